"""Delta AttnRes (arXiv 2605.18855): the model equals a forward written here from the paper and
its released code, in plain torch ops, on mixing weights far from their uniform init; taking the
sources as cumulative states is another model; Block with a block per sublayer is Full."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch import Tensor

from tests.trainers.conftest import tiny
from trainers.config import ModelConfig
from trainers.model.transformer import DeepTransformer
from trainers.residual.probe import mixing_probe

# Float64 through four blocks of O(1)-conditioned operations: the model and the reference add
# the same terms in other orders, which moves logits by some 1e-15. A wrong source, a missing
# h or a source one sublayer late moves them by far more (the mutant below, and 1e-3 checks).
ATOL = 1e-12
N_LAYERS = 4  # 8 sublayers
# The cells: Full, and Block with N = 3 blocks of 3, 3 and 2 sublayers (balanced, the longer
# first), so one block is uneven and a block closes after an MLP and after an attention.
CELLS = {"full": ("attnres", (1,) * 8), "block": ("block_attnres", (3, 3, 2))}


def _cfg(residual: str, sources: str, **kw: object) -> ModelConfig:
    fields = {"n_layers": N_LAYERS, "attnres_blocks": 3, **kw}
    return tiny(residual=residual, attnres_sources=sources, **fields)


def _perturbed(cfg: ModelConfig, seed: int = 0) -> DeepTransformer:
    """Float64, every mixing parameter random: queries N(0, 1) (zero at init, which makes the
    weights uniform and hides a misrouted source), key gains 1 + N(0, 0.5^2)."""
    torch.manual_seed(seed)
    model = DeepTransformer(cfg).double().eval()
    with torch.no_grad():
        sites = model.stream.sites
        sites.param("queries").normal_()
        sites.param("key_norm_weights").copy_(1 + 0.5 * torch.randn_like(sites.key_norm_weights))
    return model


def _reference(model: DeepTransformer, idx: Tensor, sizes: tuple[int, ...], kind: str) -> Tensor:
    """The paper's forward, written out. h_0 = embedding, h_{j+1} = h_j + y_j; site j >= 1 of
    block n: x_j = h_j + sum_i softmax_i(w . g * s_i / rms(s_i)) s_i over s_0 = h_0 and, per
    completed block m < n, its delta h_end - h_start ('deltas') or h_end ('cumulative');
    x_0 = h_0; the final norm reads h_2L. Row j - 1 of the model's table is site j's query."""
    w = model.stream.sites.param("queries")
    g = model.stream.sites.param("key_norm_weights")
    eps = model.cfg.norm_eps
    ends = set(itertools.accumulate(sizes))  # one past each block's last sublayer
    branches = [b for block in model.blocks for b in (block.attn, block.mlp)]
    h = model.embed(idx)
    sources, start = [h], h
    for j, branch in enumerate(branches):
        x = h
        if j > 0:
            s = torch.stack(sources)  # (S, B, T, d)
            keys = s / torch.sqrt(s.pow(2).mean(-1, keepdim=True) + eps) * g[j - 1]
            a = torch.softmax(keys @ w[j - 1], dim=0)  # over the sources
            x = h + (a[..., None] * s).sum(0)
        h = h + branch(x)
        if j + 1 in ends and j + 1 < len(branches):
            sources.append(h - start if kind == "deltas" else h)
            start = h
    return model.head(model.final_norm(h))


def _idx() -> Tensor:
    torch.manual_seed(1)
    return torch.randint(0, 32, (2, 12))


@pytest.mark.parametrize("kind", ["deltas", "cumulative"])
@pytest.mark.parametrize("cell", list(CELLS))
def test_model_is_the_papers_forward(cell: str, kind: str) -> None:
    """On random mixing weights the model's logits are the reference's to float64 rounding."""
    residual, sizes = CELLS[cell]
    model = _perturbed(_cfg(residual, kind))
    with torch.no_grad():
        got, want = model(_idx()), _reference(model, _idx(), sizes, kind)
    gap = (got - want).abs().max().item()
    print(f"{cell} {kind}: max |delta logits| = {gap:.3g}")
    assert gap < ATOL


@pytest.mark.parametrize("cell", list(CELLS))
def test_cumulative_sources_are_another_model(cell: str) -> None:
    """The mutant (every source taken as the cumulative state through it) moves the logits of
    the same weights far beyond rounding: the reference tells the two kinds apart."""
    residual, sizes = CELLS[cell]
    model = _perturbed(_cfg(residual, "deltas"))
    with torch.no_grad():
        gap = (model(_idx()) - _reference(model, _idx(), sizes, "cumulative")).abs().max().item()
    print(f"{cell}: deltas model vs cumulative reference, max |delta logits| = {gap:.3g}")
    assert gap > 1e-3


def test_replacement_routing_is_another_model() -> None:
    """'outputs' (AttnRes's replacement routing) with the same mixing weights is not the
    additive model either: the source kind changes what the model computes."""
    delta = _perturbed(_cfg("attnres", "deltas"))
    outputs = DeepTransformer(_cfg("attnres", "outputs")).double().eval()
    state = {k: v for k, v in delta.state_dict().items() if not k.startswith("stream.sites.")}
    outputs.load_state_dict(state, strict=False)
    with torch.no_grad():
        assert (delta(_idx()) - outputs(_idx())).abs().max() > 1e-3


@pytest.mark.parametrize("kind", ["deltas", "cumulative"])
def test_block_with_one_sublayer_per_block_is_full(kind: str) -> None:
    """Block with N = 2L routes each sublayer's delta (or state) at once, as Full does: Full's
    state dict loads strictly and gives the same logits."""
    full = _perturbed(_cfg("attnres", kind))
    block = DeepTransformer(_cfg("block_attnres", kind, attnres_blocks=8)).double().eval()
    block.load_state_dict(full.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(block(_idx()), full(_idx()), rtol=0, atol=ATOL)


def test_probe_sees_every_routing_site_with_its_sources() -> None:
    """Sites 1..2L - 1 report softmax weights (summing to one) over the embedding and the
    completed blocks: Block N = 3 of 3, 3, 2 sublayers reads 1, 1, 2, 2, 2, 3, 3 sources."""
    model = _perturbed(_cfg("block_attnres", "deltas"))
    with mixing_probe() as mixing, torch.no_grad():
        model(_idx())
    depth = mixing["depth"]
    assert sorted(depth) == list(range(1, 8))
    assert [depth[s].numel() for s in range(1, 8)] == [1, 1, 2, 2, 2, 3, 3]
    for w in depth.values():
        torch.testing.assert_close(w.sum(), torch.tensor(1.0))


def test_zero_init_adds_the_mean_of_the_sources() -> None:
    """At init (zero queries) the weights are uniform: site 1 of Full reads the embedding plus
    the mean of the embedding and the first output; the output is the plain residual sum."""
    model = DeepTransformer(_cfg("attnres", "deltas")).double().eval()
    idx = _idx()
    with torch.no_grad():
        h0 = model.embed(idx)
        y0 = model.blocks[0].attn(h0)
        seen: list[Tensor] = []
        hook = model.blocks[0].mlp.register_forward_pre_hook(lambda m, a: seen.append(a[0]))
        model(idx)
        hook.remove()
    torch.testing.assert_close(seen[0], h0 + y0 + (h0 + y0) / 2, rtol=0, atol=ATOL)


@pytest.mark.parametrize("residual", ["attnres", "block_attnres"])
def test_every_parameter_gets_a_gradient(residual: str) -> None:
    """Every parameter gets a finite gradient, and each routing site's query row a non-zero one
    where its softmax has two sources or more (one source weighs 1 whatever its logit: Block's
    first block, like AttnRes's site 0)."""
    model = _perturbed(_cfg(residual, "deltas"))
    model(_idx()).square().mean().backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
    one_source = 0 if residual == "attnres" else 2  # Block's sites 1 and 2 read the embedding
    rows = model.stream.sites.param("queries").grad.abs().sum(-1)
    assert (rows[:one_source] == 0).all() and (rows[one_source:] > 0).all()
