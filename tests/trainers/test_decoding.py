"""Incremental decoding (``DeepTransformer.prefill`` / ``decode_step``,
``trainers.model.decoding``): a prompt then tokens one at a time give the logits one full forward
gives, for every wiring, placement, norm, position, attention variant, AttnRes switch and
parametrization.

The tolerance is float64's: the two computations differ only in the order of the same sums
(attention over a different number of rows per product), so they agree to a few ulps of the
logits (~1e-15 measured); 1e-10 leaves room and still catches any real difference, which is
of the order of the weights' perturbation (0.2).
"""

from __future__ import annotations

import pytest
import torch

from tests.trainers.conftest import tiny
from trainers.config import VALID_PLACEMENTS
from trainers.model.decoding import generate, sample
from trainers.model.layers import Attention
from trainers.model.transformer import DeepTransformer

TOL = 1e-10
PROMPT = 5  # of seq_len 12: 7 positions decoded


def _model(**overrides: object) -> DeepTransformer:
    """A double-precision tiny model in eval mode, weights moved away from init (queries and
    gates start at zero, where AttnRes's depth weights are uniform and ReZero's gains zero)."""
    model = DeepTransformer(tiny(n_layers=3, **overrides)).double().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.2 * torch.randn_like(p))
    return model


@torch.no_grad()
def _decoded(model: DeepTransformer, idx: torch.Tensor, chunk: int = 1) -> torch.Tensor:
    """Prefill of the first PROMPT tokens, then the rest ``chunk`` at a time: every logit."""
    logits, cache = model.prefill(idx[:, :PROMPT])
    out = [logits]
    for i in range(PROMPT, idx.shape[1], chunk):
        logits, cache = model.decode_step(idx[:, i : i + chunk], cache)
        out.append(logits)
    assert cache.length == idx.shape[1]
    return torch.cat(out, dim=1)


def assert_decodes_exactly(model: DeepTransformer, chunk: int = 1) -> None:
    idx = torch.randint(0, 32, (2, 12))
    with torch.no_grad():
        full = model(idx)
    gap = (_decoded(model, idx, chunk) - full).abs().max().item()
    assert gap < TOL, f"decoding differs from the full forward by {gap:.3g}"


@pytest.mark.parametrize("pos", ["rope", "learned"])
def test_decoding_matches_full_forward(wiring: dict[str, str], pos: str) -> None:
    """Every (residual, placement, norm, scaling) cell, either position kind: prefill then one
    token at a time gives the full forward's logits."""
    assert_decodes_exactly(_model(pos=pos, **wiring))


@pytest.mark.parametrize("attention", ["value_residual", "value_residual_learned"])
@pytest.mark.parametrize("residual", sorted(VALID_PLACEMENTS))
def test_attention_variants_decode_exactly(residual: str, attention: str) -> None:
    """The value residual's cached values are the mixed ones, each position mixing with its own
    first-layer values: exact under every wiring."""
    placement = VALID_PLACEMENTS[residual][0]
    assert_decodes_exactly(_model(residual=residual, placement=placement, attention=attention))


SWITCHES = [
    {"attnres_key_norm": "none"},
    {"attnres_gate": "sigmoid"},
    *({"attnres_query": q} for q in ("input", "input_sqrt_d", "input_d", "static_input")),
    *({"attnres_query": q} for q in ("low_rank", "gated", "scalar")),
    {"attnres_heads": 2},
    {"attnres_window": 1},
    {"attnres_sources": "deltas"},
    {"attnres_sources": "cumulative"},
]


@pytest.mark.parametrize("switch", SWITCHES, ids=lambda s: "-".join(map(str, s.values())))
@pytest.mark.parametrize("residual", ["attnres", "block_attnres"])
def test_attnres_switches_decode_exactly(residual: str, switch: dict[str, object]) -> None:
    """Each Table 4 switch and each routing of AttnRes, Full and Block (uneven blocks: 6
    sublayers in 4, sizes 2, 2, 1, 1)."""
    assert_decodes_exactly(_model(residual=residual, attnres_blocks=4, **switch))


@pytest.mark.parametrize("blocks", [1, 2, 4, 5, 6])
@pytest.mark.parametrize("query", ["static", "input", "static_input"])
def test_block_attnres_partitions_decode_exactly(blocks: int, query: str) -> None:
    """Block AttnRes over even and uneven partitions of 6 sublayers, static and input-dependent
    queries."""
    assert_decodes_exactly(
        _model(residual="block_attnres", attnres_blocks=blocks, attnres_query=query)
    )


@pytest.mark.parametrize(
    "overrides",
    [
        {"parametrization": "mup", "base_width": 8},
        {"parametrization": "depth_mup", "base_depth": 1},
        {"parametrization": "completep", "base_width": 8, "base_depth": 1},
        {"residual": "attnres", "parametrization": "mup", "base_width": 8},
        {"residual": "hyper", "placement": "pre", "hc_dynamic": True},
        {"residual": "mhc", "placement": "pre", "hc_streams": 3},
        {"residual": "denseformer", "dense_dilation": 2, "dense_period": 2},
        {"bias": True, "tie_embeddings": False},
    ],
    ids=lambda o: "-".join(map(str, o.values())),
)
def test_other_fields_decode_exactly(overrides: dict[str, object]) -> None:
    """Parametrizations (muP's 1/d_head attention scale, the branch and logit multipliers) and
    the wirings' own options."""
    assert_decodes_exactly(_model(**overrides))


@pytest.mark.parametrize("residual", ["standard", "block_attnres", "mudd", "mhc"])
def test_chunks_after_the_prompt_decode_exactly(residual: str) -> None:
    """Several new tokens at once after cached ones (the attention's bottom-right causal mask)."""
    placement = VALID_PLACEMENTS[residual][0]
    assert_decodes_exactly(_model(residual=residual, placement=placement), chunk=3)


@pytest.mark.parametrize("query", ["static", "input"])
def test_block_attnres_two_phase_decoding_is_the_direct_softmax(query: str) -> None:
    """Block AttnRes decodes through the paper's two-phase schedule (phase 1 batched over a
    block's sites against the cached block summaries, phase 2 the online-softmax merge with the
    partial sum) where the query is static; the plain path mixes each site by one softmax over
    its stacked sources. Both decode the same logits (uneven blocks: 6 sublayers in 4)."""
    model = _model(residual="block_attnres", attnres_blocks=4, attnres_query=query)
    assert model.stream.fast == (query == "static")
    idx = torch.randint(0, 32, (2, 12))
    two_phase = _decoded(model, idx)
    model.stream.fast = False  # the same parameters through depth_mixing's direct softmax
    direct = _decoded(model, idx)
    assert (two_phase - direct).abs().max().item() < TOL


def test_decoding_past_seq_len_is_refused_and_keeps_the_cache() -> None:
    """A token past model.seq_len raises one clear line, before the cache changes."""
    model = _model()
    with torch.no_grad():
        _, cache = model.prefill(torch.zeros(1, 12, dtype=torch.long))
        with pytest.raises(ValueError, match="sequence length 13 exceeds model.seq_len=12"):
            model.decode_step(torch.zeros(1, 1, dtype=torch.long), cache)
    assert cache.length == 12
    assert all(m.cache is None for m in model.modules() if isinstance(m, Attention))


def test_a_full_forward_after_decoding_uses_no_cache() -> None:
    """Decoding leaves the model as it was: the next full forward gives the same logits."""
    model = _model()
    idx = torch.randint(0, 32, (2, 12))
    with torch.no_grad():
        before = model(idx)
        _decoded(model, idx)
        assert torch.equal(model(idx), before)


def test_generate_greedy_continues_with_the_argmax() -> None:
    """Temperature 0 appends the full forward's argmax at each step; top_k=1 samples the same."""
    model = _model()
    prompt = torch.randint(0, 32, (2, 4))
    out = generate(model, prompt, 6, temperature=0)
    assert out.shape == (2, 10) and torch.equal(out[:, :4], prompt)
    with torch.no_grad():
        argmax = model(out[:, :-1]).argmax(-1)[:, 3:]
    assert torch.equal(out[:, 4:], argmax)
    assert torch.equal(generate(model, prompt, 6, top_k=1), out)


def test_generate_is_seeded() -> None:
    """The same generator seed samples the same continuation."""
    model = _model()
    prompt = torch.randint(0, 32, (1, 3))
    a, b = (
        generate(model, prompt, 9, top_k=5, generator=torch.Generator().manual_seed(7))
        for _ in range(2)
    )
    assert torch.equal(a, b)


def test_generate_refuses_what_does_not_fit() -> None:
    """No tokens, or more than the context holds after the prompt, is one clear line."""
    model = _model()
    prompt = torch.zeros(1, 4, dtype=torch.long)
    with pytest.raises(ValueError, match="at least 1"):
        generate(model, prompt, 0)
    with pytest.raises(ValueError, match="at most 9 new tokens"):
        generate(model, prompt, 10)
    assert generate(model, prompt, 9).shape == (1, 13)
    with pytest.raises(ValueError, match="prompt's 13 tokens exceed model.seq_len=12"):
        generate(model, torch.zeros(1, 13, dtype=torch.long), 1)


def test_sample_top_k_keeps_only_the_k_largest() -> None:
    """top_k=2 draws only the two largest logits' tokens."""
    logits = torch.tensor([[0.0, 3.0, 1.0, 2.9]])
    gen = torch.Generator().manual_seed(0)
    drawn = {int(sample(logits, 1.0, 2, gen)) for _ in range(200)}
    assert drawn == {1, 3}
