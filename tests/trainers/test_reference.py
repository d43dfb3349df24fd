"""The one-file reference model against ``DeepTransformer`` for plain pre-norm: the same parameter
names (strict loads both ways), the same logits to float64 rounding, the same seeded init, and a
one-line refusal of every other configuration."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import itertools

import pytest
import torch
from torch import nn

from trainers import reference
from trainers.config import ModelConfig
from trainers.model.transformer import DeepTransformer
from trainers.reference import ReferenceTransformer

GRID = list(
    itertools.product(["rmsnorm", "layernorm"], ["rope", "learned"], [True, False], [True, False])
)
IDS = [f"{n}-{p}-{'tied' if t else 'untied'}-{'bias' if b else 'nobias'}" for n, p, t, b in GRID]
U = torch.finfo(torch.float64).eps / 2  # float64 unit roundoff, 2^-53


def config(norm: str, pos: str, tie: bool, bias: bool, n_layers: int) -> ModelConfig:
    """d_model 16, two heads; mlp_ratio 1.3 makes an odd hidden width (21) and dropout 0.1 is
    built (the comparisons run in eval mode)."""
    return ModelConfig(
        vocab_size=32, d_model=16, n_heads=2, n_layers=n_layers, seq_len=12, mlp_ratio=1.3,
        dropout=0.1, norm=norm, pos=pos, tie_embeddings=tie, bias=bias,
    )  # fmt: skip


def perturb(model: nn.Module, seed: int) -> None:
    """Move every parameter by 0.3 N(0, 1), seeded: gains leave one and biases leave zero, so a
    forgotten gain or bias shows, and the logits are of order one."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=g, dtype=p.dtype))


def tolerance(cfg: ModelConfig) -> float:
    """How far the two models' logits may differ, relative to the largest logit.

    Both compute the same real function, each with its own order of float64 operations (an
    explicit masked softmax against ``scaled_dot_product_attention``, the norm formulas against
    ``F.rms_norm`` / ``F.layer_norm``). A length-n sum rounded at each step errs by at most about
    n * u of its terms' magnitudes (u = 2^-53); a logit ends a chain of at most S = 8 such steps
    per sublayer plus 4 (embedding, final norm, head), each of length at most n = max(d_model,
    mlp_hidden, seq_len). With activations of order one (``perturb``), n * S * u bounds each
    model's error to first order, so twice it bounds their difference: about 1e-13 at 3 blocks
    (measured: at most 2e-15). A missing term (a norm, a bias, the 1/sqrt(d_head) scale) moves
    the logits by order one, and rope angles rounded differently (float32 against float64)
    by about 1e-8, both far outside it."""
    n = max(cfg.d_model, cfg.mlp_hidden, cfg.seq_len)
    steps = 8 * cfg.n_sublayers + 4
    return 2 * n * steps * U


def assert_same_logits(a: nn.Module, b: nn.Module, cfg: ModelConfig) -> None:
    idx = torch.randint(
        0, cfg.vocab_size, (3, cfg.seq_len), generator=torch.Generator().manual_seed(7)
    )
    la, lb = a(idx), b(idx)
    assert la.shape == lb.shape == (3, cfg.seq_len, cfg.vocab_size)
    worst = ((la - lb).abs().max() / la.abs().max()).item()
    assert worst <= tolerance(cfg), f"relative difference {worst:.3g} > {tolerance(cfg):.3g}"


@pytest.mark.parametrize("n_layers", [1, 3])
@pytest.mark.parametrize(("norm", "pos", "tie", "bias"), GRID, ids=IDS)
@pytest.mark.parametrize("source", ["deep", "reference"])
def test_state_dict_loads_strictly_and_logits_agree(
    norm: str, pos: str, tie: bool, bias: bool, n_layers: int, source: str
) -> None:
    """Perturbed weights from either model load strictly into the other, and both then give the
    same float64 logits within ``tolerance``."""
    cfg = config(norm, pos, tie, bias, n_layers)
    torch.manual_seed(0)
    deep = DeepTransformer(cfg).double().eval()
    ref = ReferenceTransformer(cfg).double().eval()
    donor, receiver = (deep, ref) if source == "deep" else (ref, deep)
    perturb(donor, seed=n_layers)
    receiver.load_state_dict(donor.state_dict(), strict=True)
    assert_same_logits(deep, ref, cfg)


@pytest.mark.parametrize(("norm", "pos", "tie", "bias"), GRID, ids=IDS)
def test_same_seed_gives_the_same_weights(norm: str, pos: str, tie: bool, bias: bool) -> None:
    """Built under the same seed, the reference holds DeepTransformer's weights bit for bit:
    the same modules made and initialized in the same order, output projections scaled."""
    cfg = config(norm, pos, tie, bias, n_layers=3)
    torch.manual_seed(5)
    deep = DeepTransformer(cfg).state_dict()
    torch.manual_seed(5)
    ref = ReferenceTransformer(cfg).state_dict()
    assert list(ref) == list(deep)
    for name, tensor in deep.items():
        assert torch.equal(ref[name], tensor), name


def test_scaled_init_off_matches_too() -> None:
    """With ``scaled_init`` off the output projections keep init_std, as DeepTransformer's."""
    cfg = dataclasses.replace(config("rmsnorm", "rope", True, False, 3), scaled_init=False)
    torch.manual_seed(5)
    deep = DeepTransformer(cfg).state_dict()
    torch.manual_seed(5)
    ref = ReferenceTransformer(cfg).state_dict()
    assert all(torch.equal(ref[k], v) for k, v in deep.items())


@pytest.mark.parametrize(
    "overrides",
    [
        {"residual": "attnres"},
        {"residual": "rezero"},
        {"placement": "post"},
        {"placement": "sandwich"},
        {"placement": "mix"},
        {"attention": "value_residual"},
        {"norm_scaling": "lns"},
    ],
    ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()),
)
def test_other_configurations_are_refused_in_one_line(overrides: dict[str, str]) -> None:
    """Anything but standard/pre with standard attention and no norm scaling is refused with one
    line naming the field, its value and what is allowed."""
    cfg = ModelConfig(d_model=16, n_heads=2, n_layers=2, **overrides)
    with pytest.raises(ValueError) as err:
        ReferenceTransformer(cfg)
    (name, value), message = next(iter(overrides.items())), str(err.value)
    assert "\n" not in message
    assert message.startswith(f"model.{name}: {value!r} ")
    assert "allowed:" in message


def test_sequence_longer_than_context_is_rejected() -> None:
    """The forward contract holds: a sequence longer than seq_len raises."""
    model = ReferenceTransformer(config("rmsnorm", "rope", True, False, 1))
    with pytest.raises(ValueError, match="seq_len"):
        model(torch.zeros(1, 13, dtype=torch.long))


def test_dropout_acts_in_training_only() -> None:
    """With dropout 0.1 two training-mode forwards differ; in eval mode they are equal."""
    model = ReferenceTransformer(config("layernorm", "learned", False, True, 2))
    idx = torch.randint(0, 32, (2, 12))
    assert not torch.equal(model.train()(idx), model(idx))
    assert torch.equal(model.eval()(idx), model(idx))


def test_reads_nothing_from_trainers_but_the_config() -> None:
    """The reference stays one file: its only import from the package is ``ModelConfig``."""
    tree = ast.parse(inspect.getsource(reference))
    modules = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    modules |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert {m for m in modules if m and m.startswith("trainers")} == {"trainers.config"}
