"""The budget section on constructed sweeps: iso-FLOP curves, the compute-optimal frontier and the
matched-FLOP compute multiplier, where the construction fixes what each must show."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest

from record.schema import Metric
from reports.build import build_report
from reports.compute import frontier_advantage
from reports.document import Figure, Paragraph, Table
from reports.sections.budget import budget_section
from tests.reports.frames import sweep, trial

BUDGETS = (1e10, 1e11, 1e12)
OPTIMAL = {1e10: 2, 1e11: 4, 1e12: 8}  # the frontier moves deeper as the budget grows
MULTIPLIER = 1.25


def _loss(budget: float, depth: int, multiplier: float) -> float:
    """A frontier A (m C)^-alpha at each budget's optimal depth, higher elsewhere."""
    frontier = 10.0 * (multiplier * budget) ** -0.05
    return frontier + 0.05 * (math.log2(depth) - math.log2(OPTIMAL[budget])) ** 2


def _runs(budgets: tuple[float, ...] = BUDGETS) -> list[dict[str, Any]]:
    rows = []
    for residual, m in (("standard", 1.0), ("block_attnres", MULTIPLIER)):
        for budget in budgets:
            for depth in (2, 4, 8):
                for seed, noise in ((0, 0.002), (1, -0.002)):  # the mean is the curve
                    row = trial(
                        f"{residual}/target_flops={budget}/n_layers={depth}",
                        seed,
                        _loss(budget, depth, m) + noise,
                        model__residual=residual,
                        model__n_layers=depth,
                        model__attnres_blocks=4,
                        train__target_flops=budget,
                        train__max_steps=int(budget / 1e8 / depth),
                    )
                    rows.append({**row, Metric.FINAL_TRAIN_FLOPS: budget * 1.01})
    return rows


def _blocks(section: Any, kind: type) -> list[Any]:
    return [b for b in section.blocks if isinstance(b, kind)]


def test_iso_flop_table_and_frontier_mark_each_budget_s_optimal_depth() -> None:
    """One row per (budget, wiring, depth) with its runs and trained/budget ratio; the frontier
    holds each budget's constructed optimal depth for both wirings; the figure is drawn."""
    section = budget_section(sweep(_runs()))
    assert section is not None
    curves, frontier, _ = _blocks(section, Table)
    assert len(curves.rows) == 3 * 2 * 3
    optimal = {(r[0], r[1], r[2]) for r in curves.rows if r[2].endswith("(optimal)")}
    wirings = ("standard/pre", "block_attnres/pre/N=4")
    expected = {(f"{b:.3g}", w, f"{OPTIMAL[b]} (optimal)") for b in BUDGETS for w in wirings}
    assert optimal == expected
    assert {r[3] for r in curves.rows} == {"2"} and {r[6] for r in curves.rows} == {"1.010"}
    assert {(r[0], r[1], r[2]) for r in frontier.rows} == {
        (f"{b:.3g}", w, str(OPTIMAL[b])) for b in BUDGETS for w in wirings
    }
    assert [f.name for f in _blocks(section, Figure)] == ["iso_flop"]


def test_matched_flop_multiplier_recovers_the_constructed_factor() -> None:
    """The variant's frontier is the baseline's at 1.25x the compute: the multiplier is 1.25
    exactly, its bootstrap interval holds it, and the paper's 1.25x stands beside it."""
    section = budget_section(sweep(_runs()))
    assert section is not None
    table = _blocks(section, Table)[2]
    base, block = table.rows
    assert base[0] == "standard/pre" and base[3] == "baseline"
    assert block[0] == "block_attnres/pre/N=4" and block[4] == "1.25×"
    value, low, high = (float(x) for x in re.findall(r"[0-9.]+", block[3]))
    assert value == pytest.approx(MULTIPLIER, abs=0.005)
    assert low <= MULTIPLIER <= high


def test_frontier_advantage_is_exact_on_noiseless_power_laws() -> None:
    """Frontiers A C^-alpha and A (1.25 C)^-alpha: the multiplier is 1.25 to float precision,
    and resampling identical runs leaves the interval at that point."""
    cells = {
        m: {(b, d): [_loss(b, d, m)] * 2 for b in BUDGETS for d in (2, 4, 8)}
        for m in (1.0, MULTIPLIER)
    }
    fit = frontier_advantage(cells[1.0], cells[MULTIPLIER], n_boot=50)
    assert fit.advantage.multiplier == pytest.approx(MULTIPLIER, rel=1e-9)
    assert fit.advantage.low == pytest.approx(MULTIPLIER) == fit.advantage.high
    assert fit.baseline.law.alpha == pytest.approx(0.05) and fit.baseline.distinct == 3
    assert fit.advantage.at_compute == pytest.approx(1e11)


def test_two_budgets_give_the_frontier_but_no_multiplier() -> None:
    """Over two budgets a power law fits exactly whatever the curve: the frontier is shown and
    the multiplier column says there is none, and why."""
    section = budget_section(sweep(_runs(BUDGETS[:2])))
    assert section is not None
    assert _blocks(section, Table)[2].rows[1][3] == "—"
    assert "over at least 3 budgets" in _blocks(section, Paragraph)[-1].text


def test_no_budget_no_section_and_the_report_builds() -> None:
    """Trials without a budget (every sweep before budgets, or target_flops 0) give no section;
    with budgets the whole report builds with it."""
    assert budget_section(sweep([trial("standard", 0, 2.0)])) is None
    assert budget_section(sweep([trial("standard", 0, 2.0, train__target_flops=0.0)])) is None
    titles = [s.title for s in build_report(sweep(_runs())).sections]
    assert any(t.startswith("Matched FLOPs") for t in titles)


def test_an_optimum_at_the_edge_of_the_depths_run_is_flagged() -> None:
    """The constructed optima sit at the shallowest depth run (1e10), inside (1e11) and at the
    deepest (1e12): the warning names exactly the two edge budgets for each wiring, since their
    'compute-optimal' depth is only the grid's edge."""
    section = budget_section(sweep(_runs()))
    assert section is not None
    (warning,) = [p for p in _blocks(section, Paragraph) if "not bracketed" in p.text]
    assert warning.kind == "warning"
    for w in ("standard/pre", "block_attnres/pre/N=4"):
        assert f"`{w}` at 1e+10 (shallowest, 2)" in warning.text
        assert f"`{w}` at 1e+12 (deepest, 8)" in warning.text
        assert f"`{w}` at 1e+11" not in warning.text


def test_budgeted_arms_find_their_baseline_despite_different_derived_steps() -> None:
    """At one budget a costlier wiring trains fewer steps, so train.max_steps (and warm-up,
    validation interval) differ between the arms: in a budgeted sweep they are derived, not
    context, and each arm is compared with the baseline at its budget and depth. Without a
    budget, different max_steps still mark different contexts (no baseline across them)."""
    from reports.sections import main_table

    def rows(budget: float) -> list[dict[str, Any]]:
        out = []
        for residual, steps in (("standard", 100), ("block_attnres", 80)):
            for seed in (0, 1):
                out.append(
                    trial(
                        residual,
                        seed,
                        3.0 - 0.1 * (residual == "block_attnres") + 0.01 * seed,
                        model__residual=residual,
                        model__attnres_blocks=4,
                        train__target_flops=budget,
                        train__max_steps=steps,
                        train__warmup_steps=steps // 10,
                    )
                )
        return out

    _, arms = main_table(sweep(rows(1e11)), None)
    (block,) = [a for a in arms if a.arm == "block_attnres"]
    assert block.baseline == "standard" and block.comparison is not None
    assert block.comparison.diff == pytest.approx(-0.1)
    _, arms = main_table(sweep(rows(0.0)), None)
    (block,) = [a for a in arms if a.arm == "block_attnres"]
    assert block.baseline is None
