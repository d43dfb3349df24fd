"""The coord check can fail (microsoft/mup's CoordCheckCase): each module class's update ratio,
largest size over smallest, stays within bounds measured for the correct parametrization, and
a known-bad one falls outside them: sp across widths, sp across depths (the stream), and muP
without its 1/d_head attention scale (the attention logits). Seeded, so deterministic; the
bounds carry a margin of about half the gap between good and bad."""

from __future__ import annotations

import copy
import math

import pytest
import torch

import trainers.model.layers
from trainers import catalogue
from trainers.config import ModelConfig, TrainConfig
from trainers.measure import coordcheck as cc

WIDTHS = (32, 64, 128, 256)
DEPTHS = (2, 4, 8, 16, 32)
# Measured at this protocol (seeds 0 and 2, 4 steps, lr 3e-3): muP's update slopes -0.21 to
# +0.03 across widths, without 1/d_head the attention logits' +0.31, sp's every class but the
# embedding >= +0.75; across depths CompleteP's and Depth-muP's stream, logits and embedding
# -0.08 to +0.01, sp's stream +0.88. As ratios over the span: size^slope.
WIDTH_BOUNDS = (-0.45, 0.1)
DEPTH_BOUNDS = (-0.2, 0.2)


def _rows(axis: cc.Axis, sizes: tuple[int, ...], **model: object) -> list[cc.Row]:
    torch.set_num_threads(1)  # the same reductions, so the same numbers, wherever it runs
    base = ModelConfig(vocab_size=256, seq_len=32, n_layers=2, d_model=32, **model)  # type: ignore[arg-type]
    check = cc.CoordCheck(model=base, train=TrainConfig(), axis=axis, sizes=sizes, seeds=(0,))
    return cc.run(check)


def _within(ratio: float, sizes: tuple[int, ...], bounds: tuple[float, float]) -> bool:
    span = sizes[-1] / sizes[0]
    return span ** bounds[0] <= ratio <= span ** bounds[1]


@pytest.fixture(scope="module")
def mup_rows() -> list[cc.Row]:
    return _rows("width", WIDTHS, parametrization="mup", base_width=32)


def test_mup_keeps_every_class_flat_across_widths(mup_rows: list[cc.Row]) -> None:
    """muP: every class's update ratio within the bounds, and the verdict passes."""
    for c, r in cc.ratios(mup_rows).items():
        assert _within(r, WIDTHS, WIDTH_BOUNDS), (c, math.log(r) / math.log(8))
    assert cc.verdict(mup_rows, "width")[0]


def test_sp_fails_across_widths() -> None:
    """sp: the hidden classes' updates grow with width, outside the bounds; verdict fails."""
    rows = _rows("width", WIDTHS)
    ratios = cc.ratios(rows)
    for c in ("attention_logits", "attention_out", "mlp_out", "stream", "logits"):
        assert not _within(ratios[c], WIDTHS, WIDTH_BOUNDS), c
    assert not cc.verdict(rows, "width")[0]


def test_mup_without_its_attention_scale_fails(
    mup_rows: list[cc.Row], monkeypatch: pytest.MonkeyPatch
) -> None:
    """muP with sp's 1/sqrt(d_head) attention: the attention logits' update grows as
    sqrt(d_head) relative to muP's, outside the bounds; the verdict fails on that class."""
    monkeypatch.setattr(trainers.model.layers, "attention_scale", lambda cfg: None)
    rows = _rows("width", WIDTHS, parametrization="mup", base_width=32)
    bad, good = cc.ratios(rows), cc.ratios(mup_rows)
    assert not _within(bad["attention_logits"], WIDTHS, WIDTH_BOUNDS)
    assert bad["attention_logits"] / good["attention_logits"] == pytest.approx(
        math.sqrt(8), rel=0.25
    )  # the missing sqrt(d_head / d_base) at 8x the width
    ok, line = cc.verdict(rows, "width")
    assert not ok and "attention_logits" in line


@pytest.mark.parametrize("name", ["completep", "depth_mup"])
def test_depth_parametrizations_keep_the_stream_flat(name: str) -> None:
    """CompleteP (alpha 1) and Depth-muP (alpha 1/2): the stream, the logits and the embedding
    stay within the bounds across depths 2 to 32; the verdict passes."""
    rows = _rows("depth", DEPTHS, parametrization=name, base_width=32, base_depth=2)
    ratios = cc.ratios(rows)
    for c in cc.judged("depth"):
        assert _within(ratios[c], DEPTHS, DEPTH_BOUNDS), (c, math.log(ratios[c]) / math.log(16))
    assert cc.verdict(rows, "depth")[0]


def test_sp_stream_grows_with_depth() -> None:
    """sp: the stream's update grows about as depth (every block adds an O(1) update), outside
    the bounds; the verdict fails on the stream."""
    rows = _rows("depth", DEPTHS)
    assert not _within(cc.ratios(rows)["stream"], DEPTHS, DEPTH_BOUNDS)
    ok, line = cc.verdict(rows, "depth")
    assert not ok and "stream" in line


def test_the_check_is_deterministic(mup_rows: list[cc.Row]) -> None:
    """The same seed gives the same numbers (the bounds above are about these numbers)."""
    again = _rows("width", WIDTHS[:2], parametrization="mup", base_width=32)
    assert [r.deltas for r in again] == [r.deltas for r in mup_rows if r.size in WIDTHS[:2]]


def _forced_rows(sizes: tuple[int, ...], **model: object) -> list[cc.Row]:
    """The depth check of a configuration, built past validation: what the catalogue's
    decision (allow or refuse) was made from, so a refused one can be measured too."""
    torch.set_num_threads(1)
    base = ModelConfig(vocab_size=256, seq_len=32, n_layers=2, d_model=32)
    rows = []
    for size in sizes:
        cfg = copy.copy(base)
        for key, value in {**model, "n_layers": size}.items():
            object.__setattr__(cfg, key, value)
        for step, (values, deltas) in enumerate(cc.measure(cfg, TrainConfig(), 4, 0, 4)):
            rows.append(cc.Row(size=size, seed=0, step=step, values=values, deltas=deltas))
    return rows


DECISIONS = [
    ("attnres", "sp", {}, True),  # the convex mix alone keeps the stream flat
    ("attnres", "completep", {}, False),
    ("attnres", "depth_mup", {}, False),
    ("block_attnres", "completep", {"attnres_blocks": 4}, True),
    ("denseformer", "completep", {}, False),
    ("denseformer", "depth_mup", {}, True),
    ("hyper", "completep", {}, True),
    ("mhc", "completep", {"hc_streams": 2}, True),
    ("mhc_lite", "depth_mup", {"hc_streams": 2}, True),
]


@pytest.mark.slow  # about 10 s of CPU for the nine checks; the cases above stay fast
@pytest.mark.parametrize(("residual", "name", "extra", "passes"), DECISIONS)
def test_the_catalogue_follows_the_coord_check_for_mixing_wirings(
    residual: str, name: str, extra: dict, passes: bool
) -> None:
    """Each wiring that mixes the stream runs with a depth parametrization exactly where its
    coord check across depths 2-32 passes (trainers.catalogue's entries), and is refused with
    the measured reason where it fails."""
    sizes = dict(base_width=32, base_depth=2) if name != "sp" else {}
    rows = _forced_rows(DEPTHS, residual=residual, parametrization=name, **sizes, **extra)
    ok, line = cc.verdict(rows, "depth")
    assert ok == passes, line
    entry = catalogue.wiring(residual)
    assert (name in entry.parametrizations) == passes
    assert (name in dict(entry.coordcheck_fails)) == (not passes)
