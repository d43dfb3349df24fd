"""The Table 4 switches the buffered two-phase path serves (raw keys, a window, sigmoid gates and
their combinations): the same
loss and gradients as the plain path (``depth_mixing``'s direct formula) and as the plain-autograd
twin (``StackedSources``), in float64, on Full and Block AttnRes with an uneven partition."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F

from benchmarks.gpu.fused_block import perturb
from tests.trainers.attnres_cases import SWITCHES
from tests.trainers.conftest import tiny
from trainers.config import ModelConfig
from trainers.model.transformer import DeepTransformer
from trainers.residual.attnres.block import block_spans
from trainers.residual.attnres.depth_attention import StackedSources, window_hidden
from trainers.residual.attnres.depth_mixing import window_mask

SERVED: dict[str, dict[str, Any]] = {
    "key_norm=none": {"attnres_key_norm": "none"},
    "window=1": {"attnres_window": 1},
    "window=3": {"attnres_window": 3},
    "gate=sigmoid": {"attnres_gate": "sigmoid"},
    "key_norm=none+window=2": {"attnres_key_norm": "none", "attnres_window": 2},
    "sigmoid+window=2": {"attnres_gate": "sigmoid", "attnres_window": 2},
    "sigmoid+key_norm=none+window=3": {
        "attnres_gate": "sigmoid",
        "attnres_key_norm": "none",
        "attnres_window": 3,
    },
}
# Full: 11 sites, two phase-1 groups of up to 8 (recent sources merged in phase 2). Block: 8
# sublayers in 5 blocks of 2, 2, 2, 1, 1 (uneven), so a window of 1 to 3 hides summaries.
SHAPES: dict[str, dict[str, Any]] = {
    "attnres": {"n_layers": 5},
    "block_attnres": {"n_layers": 4, "attnres_blocks": 5},
}
CASES = [(r, s) for r in SHAPES for s in SERVED]
# float64 rounding over a few dozen operations on values of order one: far below this
ATOL = 1e-10


def _cfg(residual: str, switch: str) -> ModelConfig:
    return tiny(residual=residual, **SHAPES[residual], **SERVED[switch])


def _perturbed(cfg: ModelConfig) -> DeepTransformer:
    """A float64 model away from its init: random queries (and gains), every other weight moved."""
    torch.manual_seed(1)
    model = DeepTransformer(cfg).double()
    perturb(model)
    return model


def _stacked(model: DeepTransformer) -> None:
    """Sends the model's two-phase mixing through ``StackedSources`` (plain autograd)."""
    stream = model.stream
    sites = stream.sites

    def new_sources() -> StackedSources:
        queries, hidden = sites.folded(), stream.hidden
        return StackedSources(sites.key_eps, queries, stream.schedule, hidden, sites.sigmoid)

    stream.new_sources = new_sources  # type: ignore[method-assign]


def _loss_and_grads(model: DeepTransformer) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    torch.manual_seed(2)
    idx = torch.randint(0, 32, (2, 12))
    model.zero_grad()
    loss = F.cross_entropy(model(idx).flatten(0, 1), idx.roll(-1, 1).flatten())
    loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    assert len(grads) == len(list(model.parameters()))
    return loss.detach(), grads


def _max_gap(a: tuple[torch.Tensor, dict], b: tuple[torch.Tensor, dict]) -> tuple[float, float]:
    """max |loss_a - loss_b| and the max over every parameter of max |grad_a - grad_b|."""
    assert a[1].keys() == b[1].keys()
    loss = (a[0] - b[0]).abs().item()
    grads = max((a[1][n] - b[1][n]).abs().max().item() for n in a[1])
    return loss, grads


@pytest.mark.parametrize("residual,switch", CASES)
def test_buffered_switch_is_the_plain_path(residual: str, switch: str) -> None:
    """Loss and every parameter's gradient: buffered = plain formula = plain-autograd twin."""
    model = _perturbed(_cfg(residual, switch))
    assert model.stream.fast
    buffered = _loss_and_grads(model)
    model.stream.fast = False  # the plain path: DepthMixer's direct formula
    plain = _loss_and_grads(model)
    _stacked(model)  # replaces new_sources, which reads ``fast``: last
    stacked = _loss_and_grads(model)
    gradient_scale = max(g.abs().max().item() for g in plain[1].values())
    assert gradient_scale > 1e-3  # the comparison compares something
    for other in (buffered, stacked):
        loss_gap, grad_gap = _max_gap(other, plain)
        assert loss_gap <= ATOL and grad_gap <= ATOL, (loss_gap, grad_gap)


@pytest.mark.parametrize("residual", SHAPES)
def test_window_changes_the_buffered_function(residual: str) -> None:
    """The window is applied, not ignored: the same weights without it give another loss."""
    windowed = _perturbed(_cfg(residual, "window=1"))
    unwindowed = _perturbed(tiny(residual=residual, **SHAPES[residual]))
    unwindowed.load_state_dict(windowed.state_dict())
    assert windowed.stream.hidden is not None and unwindowed.stream.hidden is None
    gap = (_loss_and_grads(windowed)[0] - _loss_and_grads(unwindowed)[0]).abs()
    assert gap > 1e-3


@pytest.mark.parametrize("window", [1, 2, 3, 5, 9])
@pytest.mark.parametrize("residual", SHAPES)
def test_hidden_logits_are_the_plain_window(residual: str, window: int) -> None:
    """Each site's hidden stored sources are exactly those the plain path's mask drops (the
    partial sum, last, is never hidden)."""
    cfg = tiny(residual=residual, **SHAPES[residual], attnres_window=window)
    n_sites = cfg.n_sublayers + 1
    spans = tuple(range(1, n_sites + 1)) if residual == "attnres" else block_spans(cfg)
    capacity = n_sites if residual == "attnres" else cfg.attnres_blocks + 1
    hidden = window_hidden(spans, window, capacity)
    for site, span in enumerate(spans):
        keep = window_mask(span, window, torch.device("cpu"))
        dropped = torch.zeros(span, dtype=torch.bool) if keep is None else ~keep
        row = torch.zeros(capacity, dtype=torch.bool) if hidden is None else hidden[:, site]
        stored = min(span, capacity)
        assert torch.equal(row[:stored], dropped[:stored]), site
        assert not row[stored:].any()


def test_block_spans_count_each_sites_sources() -> None:
    """Blocks of 2, 2, 2, 1, 1: a block's first site reads the embedding and the earlier
    summaries, its later sites the partial sum too; the output site all six."""
    cfg = tiny(residual="block_attnres", **SHAPES["block_attnres"])
    assert block_spans(cfg) == (1, 2, 2, 3, 3, 4, 4, 5, 6)


# The paths each switch cell of the switch suite runs: buffered where the query is static and
# there is one group.
BUFFERED_CELLS = {"key_norm=none", "window=2", "gate=sigmoid"}


@pytest.mark.parametrize("residual", SHAPES)
@pytest.mark.parametrize("switch", SWITCHES)
def test_the_buffered_path_serves_static_single_group_cells(residual: str, switch: str) -> None:
    """One rule picks the path (``DepthMixer.buffered``): input-dependent queries, scalar
    logits, several groups and Delta AttnRes stay on the plain path."""
    model = DeepTransformer(tiny(residual=residual, **SWITCHES[switch]))
    assert model.stream.fast == (switch in BUFFERED_CELLS)


@pytest.mark.parametrize("residual", SHAPES)
@pytest.mark.parametrize("switch", ["gate=sigmoid", "key_norm=none+window=2"])
def test_probe_reads_the_same_weights_on_either_path(residual: str, switch: str) -> None:
    """The diagnostics see the same weights per site from the buffered path, under the same kind
    (sigmoid gates: free weights, "dwa"), as from the plain one."""
    from trainers.residual.probe import mixing_probe

    model = _perturbed(_cfg(residual, switch)).eval()
    idx = torch.randint(0, 32, (2, 12))
    seen = []
    for fast in (True, False):
        model.stream.fast = fast
        with mixing_probe() as mixing:
            model(idx)
        seen.append({kind: dict(sites) for kind, sites in mixing.items()})
    buffered, plain = seen
    assert buffered.keys() == plain.keys() == {"dwa" if "sigmoid" in switch else "depth"}
    for kind, sites in plain.items():
        assert buffered[kind].keys() == sites.keys()
        for site, weights in sites.items():
            torch.testing.assert_close(buffered[kind][site], weights, rtol=0, atol=1e-6)
