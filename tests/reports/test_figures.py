"""The figures read where the numbers are drawn: the depth-scaling figure's divergence panel and
survivors' loss per depth, and plain tick labels on a narrow log axis."""

from __future__ import annotations

import numpy as np
import pytest

from reports.figures import draw_compute_fits, draw_depth_scaling
from reports.schema import Status
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
    fig = draw_depth_scaling(sweep(rows).trials)
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
