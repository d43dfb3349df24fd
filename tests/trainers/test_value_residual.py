"""ResFormer's value residual (``model.attention``): what follows from U_n = A_n (l1 V_1 + l2 V_n),
and the model contract for the attention variants."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from tests.trainers.conftest import tiny
from tests.trainers.contract import (  # noqa: F401  (the contract, run on CELLS below)
    test_causal,
    test_every_wiring_trains,
    test_finite_loss_and_gradients_at_depth_64,
    test_seeded_determinism,
    test_state_dict_round_trip,
)
from trainers.attention import ATTENTIONS
from trainers.attention.value_residual import MixFirstValues
from trainers.config import ATTENTION_NAMES
from trainers.model.transformer import Block, DeepTransformer

EXACT = dict(d_model=32, n_heads=4, n_layers=4, norm_eps=1e-12)
# The contract for the attention axis, kept to two cells (each costs the suite ~10 s): the
# paper's form on its pre-norm residual, the learned form under post-norm.
CELLS = [
    ("value_residual", "standard", "pre"),
    ("value_residual_learned", "standard", "post"),
]


@pytest.fixture(params=CELLS, ids=["-".join(c) for c in CELLS])
def wiring(request: pytest.FixtureRequest) -> dict[str, str]:
    attention, residual, placement = request.param
    return {"attention": attention, "residual": residual, "placement": placement}


def _pair(attention: str) -> tuple[DeepTransformer, DeepTransformer]:
    """A standard model and the variant with the same weights (float64, eval)."""
    standard = DeepTransformer(tiny(**EXACT)).double().eval()
    variant = DeepTransformer(tiny(**EXACT, attention=attention)).double().eval()  # type: ignore[arg-type]
    missing, unexpected = variant.load_state_dict(standard.state_dict(), strict=False)
    assert not unexpected and all(k.endswith("values.lambdas") for k in missing)
    return standard, variant


def _set_lambdas(model: DeepTransformer, first: float, own: float) -> None:
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, MixFirstValues):
                m.lambdas.copy_(torch.tensor([first, own], dtype=torch.float64))


def test_attention_literal_matches_registry() -> None:
    """Every model.attention name has an implementation, and no implementation hides."""
    assert set(ATTENTION_NAMES) == set(ATTENTIONS.names())


def test_unknown_attention_is_rejected_with_the_choices() -> None:
    """An unknown attention variant raises naming model.attention and every valid choice."""
    with pytest.raises(ValueError, match="model.attention.*standard, value_residual"):
        tiny(attention="cross_layer")  # type: ignore[arg-type]


@pytest.mark.parametrize("attention", ["value_residual", "value_residual_learned"])
def test_zero_weight_on_first_values_is_the_standard_model(attention: str) -> None:
    """With lambda_1 = 0 and lambda_2 = 1 the variant is the standard model, bit for bit; at the
    paper's 1/2, 1/2 it is not."""
    standard, variant = _pair(attention)
    idx = torch.randint(0, 32, (3, 12))
    assert not torch.allclose(standard(idx), variant(idx))
    _set_lambdas(variant, 0.0, 1.0)
    assert torch.equal(standard(idx), variant(idx))


def test_first_block_is_unchanged_and_later_blocks_are_not() -> None:
    """Block 0's values have nothing earlier to mix with: its output is the standard block's
    exactly; block 1's is not."""
    standard, variant = _pair("value_residual")
    x = y = standard.embed(torch.randint(0, 32, (2, 12)))
    outs = []
    for a, b in zip(standard.blocks, variant.blocks, strict=True):
        x, y = a(x), b(y)
        outs.append(torch.equal(x, y))
    assert outs == [True, False, False, False]


def _attention_by_hand(layer: torch.nn.Module, h: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """softmax(q k^T / sqrt(hd) + causal mask) v, then the output projection; q and k from the
    layer's projection of h (rotary applied), v given (B, nh, T, hd)."""
    b, t, d = h.shape
    nh = layer.n_heads
    q, k, _ = F.linear(h, layer.qkv.weight).view(b, t, 3, nh, d // nh).unbind(2)
    q, k = (layer.rotary(z.transpose(1, 2)) for z in (q, k))
    scores = q @ k.transpose(-1, -2) / math.sqrt(d // nh)
    scores = scores.masked_fill(torch.ones(t, t).triu(1).bool(), float("-inf"))
    y = scores.softmax(-1) @ v
    return F.linear(y.transpose(1, 2).reshape(b, t, d), layer.proj.weight)


def _values(layer: torch.nn.Module, h: torch.Tensor) -> torch.Tensor:
    b, t, d = h.shape
    v = F.linear(h, layer.qkv.weight)[..., 2 * d :]
    return v.view(b, t, layer.n_heads, d // layer.n_heads).transpose(1, 2)


@pytest.mark.parametrize("lambdas", [(0.5, 0.5), (-0.3, 1.7)])
def test_value_mix_equals_the_formula(lambdas: tuple[float, float]) -> None:
    """Block 1's attention output is A_2 (l1 V_1 + l2 V_2) o W_O computed by hand from the two
    attentions' inputs: V_1 from block 0's normed input, A_2 and V_2 from block 1's."""
    cfg = tiny(**{**EXACT, "n_layers": 2}, attention="value_residual_learned")  # type: ignore[arg-type]
    model = DeepTransformer(cfg).double().eval()
    _set_lambdas(model, *lambdas)
    inputs, outputs = [], []

    def keep(module: torch.nn.Module, args: tuple[torch.Tensor], out: torch.Tensor) -> None:
        inputs.append(args[0])
        outputs.append(out)

    for block in model.blocks:
        assert isinstance(block, Block)
        block.attn.layer.register_forward_hook(keep)
    with torch.no_grad():
        model(torch.randint(0, 32, (2, 12)))
        a0, a1 = (b.attn.layer for b in model.blocks)  # type: ignore[union-attr]
        v1, v2 = _values(a0, inputs[0]), _values(a1, inputs[1])
        expected = _attention_by_hand(a1, inputs[1], lambdas[0] * v1 + lambdas[1] * v2)
        plain = _attention_by_hand(a0, inputs[0], v1)
    torch.testing.assert_close(outputs[1], expected, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(outputs[0], plain, rtol=1e-12, atol=1e-12)


def test_added_parameters() -> None:
    """The fixed form adds nothing (its lambdas are constants, outside the state dict); the
    learned form adds 2 per block after the first: 2(L - 1)."""
    base = DeepTransformer(tiny(n_layers=5))
    count = sum(p.numel() for p in base.parameters())
    for attention, extra in (("value_residual", 0), ("value_residual_learned", 2 * 4)):
        model = DeepTransformer(tiny(n_layers=5, attention=attention))  # type: ignore[arg-type]
        assert sum(p.numel() for p in model.parameters()) - count == extra
        assert set(model.state_dict()) - set(base.state_dict()) == {
            f"blocks.{i}.attn.layer.values.lambdas" for i in range(1, 5) if extra
        }


def test_one_block_has_nothing_to_mix() -> None:
    """At one block the variant is the standard model (no later attention reads V_1)."""
    standard = DeepTransformer(tiny(n_layers=1)).eval()
    variant = DeepTransformer(tiny(n_layers=1, attention="value_residual")).eval()
    variant.load_state_dict(standard.state_dict())
    idx = torch.randint(0, 32, (2, 12))
    assert torch.equal(standard(idx), variant(idx))
