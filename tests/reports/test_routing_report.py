"""The report's routing alarm: collapsed sites framed on the depth-weights figure, and the
finished trials' alarms listed under it."""

from __future__ import annotations

import numpy as np

from reports.document import Paragraph
from reports.figures import collapsed_in_any_seed
from reports.sections.plots import figure_section
from tests.reports.frames import sweep, trial

ALARM = "routing alarm (top-1 mass > 0.95): site 1 collapsed onto the embedding by step 40"
WEIGHTS = np.array([[1.0, np.nan, np.nan], [0.98, 0.02, np.nan], [0.3, 0.3, 0.4]])


def _rows() -> list[dict[str, object]]:
    attnres = {"model__residual": "attnres", "model__n_layers": 1}
    return [
        trial("attnres", 0, 2.5, reason=ALARM, **attnres),
        trial("attnres", 1, 2.4, **attnres, train__routing_alarm=0.99),
    ]


def test_a_site_is_framed_when_it_collapsed_in_any_seed_at_its_own_threshold() -> None:
    """Seed 0 (default threshold 0.95) collapsed at site 1; seed 1, at its own 0.99, did not:
    site 1 is framed; site 0 (one source) never is."""
    data = sweep(
        _rows(),
        depth_weights={"attnres-0-1-32": WEIGHTS, "attnres-1-1-32": WEIGHTS},
        routing_top1={
            "attnres-0-1-32": np.array([1.0, 0.98, 0.4]),
            "attnres-1-1-32": np.array([1.0, 0.97, 0.4]),
        },
    )
    done = data.view.comparable
    framed = collapsed_in_any_seed(done, data.depth_weights, data.routing_top1)
    assert framed.tolist() == [False, True, False]
    only_seed1 = done[done["seed"] == 1]
    assert not collapsed_in_any_seed(only_seed1, data.depth_weights, data.routing_top1).any()


def test_the_figures_section_lists_each_finished_trials_alarm() -> None:
    """A finished trial whose reason is a routing alarm is named under the figures, with arm
    and seed; a trial without one is not."""
    data = sweep(_rows(), depth_weights={"attnres-0-1-32": WEIGHTS})
    section = figure_section(data)
    assert section is not None
    notes = [b.text for b in section.blocks if isinstance(b, Paragraph)]
    assert notes == [f"Routing alarms: attnres seed 0: {ALARM}."]
