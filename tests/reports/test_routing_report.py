"""The report's routing alarm: collapsed sites framed on the depth-weights figure, the
finished trials' alarms listed under it, and the routing section."""

from __future__ import annotations

import numpy as np
import pandas as pd

from reports.document import Paragraph, Table
from reports.figures import collapsed_in_any_seed
from reports.sections.plots import figure_section
from reports.sections.routing import routing_section
from tests.reports.frames import sweep, trial

ALARM = "routing alarm (top-1 mass > 0.95): site 1 collapsed onto the embedding by step 40"
WEIGHTS = np.array([[1.0, np.nan, np.nan], [0.98, 0.02, np.nan], [0.3, 0.3, 0.4]])
SPREAD = np.array([np.nan, 30.0, 1.0])  # site 1's softmax saturated


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
        routing_spread={i: SPREAD for i in ("attnres-0-1-32", "attnres-1-1-32")},
    )
    done = data.view.comparable
    arrays = data.depth_weights, data.routing_top1, data.routing_spread
    assert collapsed_in_any_seed(done, *arrays).tolist() == [False, True, False]
    only_seed1 = done[done["seed"] == 1]
    assert not collapsed_in_any_seed(only_seed1, *arrays).any()


def test_a_profile_with_the_collapsed_share_is_judged_by_it() -> None:
    """Seed 0's averages (site 1: top-1 mass 0.98, spread 30) pass the averaged rule, but its
    profile measured the collapsed share: under half of site 1's tokens collapsed, so no site
    is framed; seed 1's profile, recorded before the share, is still judged by its averages
    (at its own threshold 0.99, site 1 does not collapse)."""
    ids = ("attnres-0-1-32", "attnres-1-1-32")
    data = sweep(
        _rows(),
        depth_weights={i: WEIGHTS for i in ids},
        routing_top1={i: np.array([1.0, 0.98, 0.4]) for i in ids},
        routing_spread={i: SPREAD for i in ids},
        routing_collapsed={"attnres-0-1-32": np.array([np.nan, 0.3, 0.0])},
    )
    done = data.view.comparable
    arrays = data.depth_weights, data.routing_top1, data.routing_spread
    assert not collapsed_in_any_seed(done, *arrays, data.routing_collapsed).any()
    assert collapsed_in_any_seed(done, *arrays).tolist() == [False, True, False]


def test_the_figures_section_lists_each_finished_trials_alarm() -> None:
    """A finished trial whose reason is a routing alarm is named under the figures, with arm
    and seed; a trial without one is not."""
    data = sweep(_rows(), depth_weights={"attnres-0-1-32": WEIGHTS})
    section = figure_section(data)
    assert section is not None
    notes = [b.text for b in section.blocks if isinstance(b, Paragraph)]
    assert notes == [f"Routing alarms: attnres seed 0: {ALARM}."]


def _routed(arm: str, seed: int, top1_max: float, reason: str | None = None) -> dict[str, object]:
    """A Full AttnRes trial whose worst site ended at ``top1_max``."""
    return trial(
        arm,
        seed,
        2.5,
        reason=reason,
        model__residual="attnres",
        model__n_layers=1,
        **{
            "dilution/routing_top1_max": top1_max,
            "dilution/routing_entropy_min": 1 - top1_max,
            "dilution/routing_entropy": 0.8,
            "dilution/routing_spread_max": 10 * top1_max,
        },
    )


def _curves(run_id: str, top1: list[float]) -> list[dict[str, object]]:
    return [
        {"run_id": run_id, "metric": m, "step": 100 * (i + 1), "value": v if "top1" in m else 1 - v}
        for i, v in enumerate(top1)
        for m in ("dilution/routing_top1_max", "dilution/routing_entropy_min")
    ]


def test_the_routing_section_gives_each_arm_its_course_sites_and_verdict() -> None:
    """Per arm: the worst site's top-1 mass at each recorded step (mean over seeds), the end's
    summaries, a verdict counting the seeds whose alarm tripped and naming the collapsed sites,
    and each site's top-1 mass and entropy at the end with a one-source site shown as '-'."""
    rows = [
        _routed("attnres", 0, 0.6),
        _routed("attnres", 1, 0.7),
        _routed("attnres/query=input", 0, 0.99, reason=ALARM),
        _routed("attnres/query=input", 1, 0.9),
    ]
    curves = (
        _curves("attnres-0-1-32", [0.5, 0.6])
        + _curves("attnres-1-1-32", [0.5, 0.7])
        + _curves("attnres/query=input-0-1-32", [0.9, 0.99])
        + _curves("attnres/query=input-1-1-32", [0.8, 0.9])
    )
    top1 = np.array([1.0, 0.98, 0.4])
    entropy = np.array([np.nan, 0.1, 0.9])
    ids = [r["run_id"] for r in rows]
    data = sweep(
        rows,
        curves=pd.DataFrame(curves),
        depth_weights={i: WEIGHTS for i in ids},
        routing_top1={i: top1 for i in ids},
        routing_entropy={i: entropy for i in ids},
        routing_spread={i: SPREAD for i in ids},
    )
    section = routing_section(data)
    assert section is not None
    course, sites = [b for b in section.blocks if isinstance(b, Table)]
    assert course.columns[2:4] == ("top-1 max, step 100", "top-1 max, step 200")
    by_arm = {r[0]: r for r in course.rows}
    assert by_arm["attnres"][2:5] == ("0.500", "0.650", "0.650")
    assert by_arm["attnres"][-1] == "healthy"
    assert by_arm["attnres/query=input"][2:5] == ("0.850", "0.945", "0.945")
    assert by_arm["attnres/query=input"][-1] == "collapsed in 1 of 2 seeds (sites 1)"
    assert sites.rows[0] == ("attnres", "- 0.98 0.40", "- 0.10 0.90")


def test_a_sweep_without_depth_mixing_has_no_routing_section() -> None:
    """Standard pre-norm records no routing summaries: nothing to say."""
    assert routing_section(sweep([trial("standard", 0, 2.5), trial("standard", 1, 2.4)])) is None


def test_weight_and_importance_are_compared_where_every_seed_measured_both() -> None:
    """Site 1 weighs the embedding most (0.98) but losing source 1 costs more (0.30 against
    0.05): its top source differs; site 2 ranks its three sources the same both ways
    (correlation 1); the largest loss change is named with its site and source. An arm whose
    seeds did not all measure importance gets no row."""
    importance = np.array([[np.nan] * 3, [0.05, 0.30, np.nan], [0.01, 0.02, 0.04]])
    rows = [_routed("attnres", 0, 0.6), _routed("attnres", 1, 0.7)]
    rows += [_routed("block_attnres", 0, 0.6)]
    ids = [r["run_id"] for r in rows]
    data = sweep(
        rows,
        depth_weights={i: WEIGHTS for i in ids},
        routing_top1={i: np.array([1.0, 0.9, 0.4]) for i in ids},
        routing_entropy={i: np.array([np.nan, 0.3, 0.9]) for i in ids},
        source_importance={i: importance for i in ids[:2]},
    )
    section = routing_section(data)
    assert section is not None
    ranking = [b for b in section.blocks if isinstance(b, Table)][-1]
    assert ranking.rows == (("attnres", "2", "1 (sites 1)", "1.00", "+0.300 (site 1, source 1)"),)
