"""The figures read where the numbers are drawn: the depth-scaling figure's divergence panel and
survivors' loss per depth, plain tick labels on a narrow log axis, and each seed's own loss
curve drawn faintly beside its arm's mean."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from record.schema import Metric, Status
from reports.figures import (
    SEED_ALPHA,
    draw_compute_fits,
    draw_depth_scaling,
    draw_loss_curves,
    spread_caption,
)
from stats.compare import mean_ci
from tests.reports.frames import sweep, trial


def _lines(ax) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    return {line.get_label(): (line.get_xdata(), line.get_ydata()) for line in ax.get_lines()}


def test_depth_figure_shows_divergence_rate_per_depth() -> None:
    """Right panel: the share of each depth's trials that diverged, of those that trained to an
    outcome (a failed trial is rerun, so it is not in the denominator); left panel: the
    survivors' mean loss, with no point where none survived."""
    rows = [trial("standard", s, 3.0, model__n_layers=n) for n in (4, 8) for s in range(2)]
    attnres = {"model__residual": "attnres"}
    rows += [trial("attnres", s, 2.0 + s, model__n_layers=4, **attnres) for s in range(2)]
    rows += [
        trial("attnres", 0, 2.5, model__n_layers=8, **attnres),
        trial("attnres", 1, None, Status.DIVERGED, "nan", model__n_layers=8, **attnres),
        trial("attnres", 2, None, Status.DIVERGED, "nan", model__n_layers=8, **attnres),
        trial("attnres", 3, None, Status.FAILED, "OOM", model__n_layers=8, **attnres),
    ]
    rows += [
        trial("attnres", s, None, Status.DIVERGED, "nan", model__n_layers=16, **attnres)
        for s in range(2)
    ]
    fig = draw_depth_scaling(sweep(rows).view)
    loss_ax, rate_ax = fig.axes[:2]
    rates = _lines(rate_ax)
    assert list(rates["attnres/pre"][0]) == [4, 8, 16]
    assert list(rates["attnres/pre"][1]) == pytest.approx([0.0, 2 / 3, 1.0])
    assert list(rates["standard/pre"][1]) == [0.0, 0.0]
    losses = _lines(loss_ax)["attnres/pre"][1]
    assert losses[:2] == pytest.approx([2.5, 2.5]) and np.isnan(losses[2])


def test_narrow_log_axis_has_plain_decimal_labels() -> None:
    """Losses between 2.2 and 2.3 on the log loss axis are labelled as decimals (no ``× 10^0``),
    and the labels are where the ticks are."""
    c = np.array([1e12, 2e12, 4e12, 8e12])
    loss = 2.3 * (c / 1e12) ** -0.02
    fig = draw_compute_fits({"standard/pre": (c, loss)}, {})
    fig.canvas.draw()
    ax = fig.axes[0]
    labels = [t for t in ax.get_yticklabels() + ax.get_yticklabels(minor=True) if t.get_text()]
    assert labels
    for label in labels:
        text = label.get_text().replace("\N{MINUS SIGN}", "-")
        assert float(text) == pytest.approx(label.get_position()[1], rel=1e-6)
    low, high = ax.get_ylim()
    assert sum(low <= float(t.get_text()) <= high for t in labels) >= 2


def _band_extent(losses: list[np.ndarray]) -> list[tuple[float, float]]:
    """(low, high) of the shaded band at each depth of a standard-only depth figure."""
    rows = [
        trial("standard", s, float(v), model__n_layers=n)
        for n, values in zip((4, 8), losses, strict=True)
        for s, v in enumerate(values)
    ]
    loss_ax = draw_depth_scaling(sweep(rows).view).axes[0]
    (band,) = loss_ax.collections
    ys = band.get_paths()[0].vertices[:, 1]
    xs = band.get_paths()[0].vertices[:, 0]
    return [(float(ys[xs == n].min()), float(ys[xs == n].max())) for n in (4, 8)]


def test_two_seeds_are_drawn_as_their_range_three_as_an_interval() -> None:
    """With two seeds the band is the seeds' range (a 95% t-interval, 12.7 standard errors
    wide, would hide the lines); with three it is the interval, and the caption says which."""
    two = [np.array([3.0, 3.2]), np.array([2.5, 2.9])]
    assert _band_extent(two) == [pytest.approx((3.0, 3.2)), pytest.approx((2.5, 2.9))]
    three = [np.array([3.0, 3.1, 3.2]), np.array([2.5, 2.7, 2.9])]
    for (low, high), values in zip(_band_extent(three), three, strict=True):
        ci = mean_ci(list(values))
        assert (low, high) == pytest.approx((ci.mean - ci.half_width, ci.mean + ci.half_width))
        assert low < values.min()  # wider than the range: the interval, not the seeds
    captions = [
        spread_caption(sweep([trial("standard", s, 3.0) for s in range(n)]).view.comparable)
        for n in (1, 2, 3)
    ]
    assert "no band" in captions[0]
    assert "range of the seeds" in captions[1] and "Student-t" in captions[2]
    assert "range" not in captions[2]


def test_loss_curves_draw_each_seed_faintly_beside_the_mean() -> None:
    """An arm of three seeds: its mean line and three faint lines, each a seed's own curve; an
    arm of one seed: the mean only."""
    rows = [trial("standard", s, 3.0) for s in range(3)] + [
        trial("block_attnres", 0, 2.9, model__residual="block_attnres")
    ]
    data = sweep(rows)
    curves = pd.DataFrame(
        [
            {"run_id": r["run_id"], "metric": Metric.VAL_LOSS, "step": step, "value": v}
            for i, r in enumerate(rows)
            for step, v in ((0, 4.0 + i), (9, 3.0 + i / 10))
        ]
    )
    fig = draw_loss_curves(data.view.comparable, curves)
    lines = fig.axes[0].get_lines()
    faint = [line for line in lines if line.get_alpha() == SEED_ALPHA]
    assert len(lines) == 5 and len(faint) == 3
    assert sorted(tuple(line.get_ydata()) for line in faint) == [(4.0, 3.0), (5.0, 3.1), (6.0, 3.2)]
