"""The budget section: for a sweep whose trials trained on FLOP budgets (``train.target_flops``,
each trial's steps derived from its own FLOPs), the iso-FLOP curves (final loss against depth at
each budget, per wiring), the compute-optimal frontier (the best depth and its loss per budget),
and the compute multiplier at matched FLOPs, with its bootstrap interval, beside the paper's."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from record.schema import Metric
from reports import figures
from reports.ablation import DEPTH_KEY, wiring_label
from reports.compute import MIN_DISTINCT_COMPUTE, Cells, frontier_advantage, frontier_points
from reports.document import Figure, Paragraph, Section, Table
from reports.published import COMPUTE_MULTIPLIER
from reports.sweep import SweepData
from stats.compare import mean_ci
from trainers.budget import BUDGET_KEYS

BUDGET_KEY = BUDGET_KEYS[0]  # a FLOP budget: train.target_flops
Frontier = dict[float, tuple[int, float]]  # budget -> (best depth, its mean loss)
LOSS = Metric.FINAL_VAL_LOSS
CURVE_COLUMNS = (
    "budget (FLOPs)",
    "wiring",
    "n_layers",
    "runs",
    "loss [95% CI]",
    "steps",
    "trained / budget",
)
MULTIPLIER_COLUMNS = (
    "wiring",
    "frontier alpha [95% CI]",
    "budgets",
    "matched-FLOP multiplier vs baseline [95% CI]",
    "paper",
)


def budget_section(data: SweepData) -> Section | None:
    """Where finished trials carry a FLOP budget: the iso-FLOP table and figure, the frontier
    per wiring, and the matched-FLOP compute multiplier of each wiring over the baseline."""
    runs = budgeted(data.view.comparable)
    if runs.empty:
        return None
    cells = {str(w): _cells(g) for w, g in runs.groupby("wiring")}
    # One frontier per wiring, which the curve table marks, the frontier table lists and the
    # edge warning checks.
    fronts = {w: frontier_points(c) for w, c in cells.items()}
    blocks: list[Any] = [_curve_table(runs, fronts)]
    image = figures.iso_flop(_curves(runs))
    if image:
        blocks.append(
            Figure(
                "iso_flop",
                image.png,
                "Final validation loss against depth at each "
                "FLOP budget (colour) per wiring (line style), mean and 95% "
                "interval over seeds.",
                image.pdf,
            )
        )
    blocks.append(_frontier_table(fronts))
    blocks.extend(_edge_warning(cells, fronts))
    blocks.extend(_multipliers(cells))
    return Section("Matched FLOPs: iso-FLOP curves and the compute-optimal frontier", tuple(blocks))


def budgeted(done: pd.DataFrame) -> pd.DataFrame:
    """Finished trials with a FLOP budget, with their wiring, depth and budget as columns."""
    if done.empty or BUDGET_KEY not in done.columns:
        return done.iloc[0:0]
    budget = pd.to_numeric(done[BUDGET_KEY], errors="coerce")
    runs = done[budget > 0]
    if runs.empty:
        return runs
    return runs.assign(
        budget=budget[budget > 0].astype(float),
        depth=runs[DEPTH_KEY].astype(int),
        wiring=runs.apply(wiring_label, axis=1),
    )


def _cells(runs: pd.DataFrame) -> Cells:
    return {
        (float(b), int(d)): g[LOSS].to_numpy(float)
        for (b, d), g in runs.groupby(["budget", "depth"])
    }


def _curves(runs: pd.DataFrame) -> dict[tuple[float, str], dict[int, np.ndarray]]:
    out: dict[tuple[float, str], dict[int, np.ndarray]] = {}
    for (b, w, d), g in runs.groupby(["budget", "wiring", "depth"]):
        out.setdefault((float(b), str(w)), {})[int(d)] = g[LOSS].to_numpy(float)
    return out


def _trained_ratio(g: pd.DataFrame, budget: float) -> str:
    """Recorded training FLOPs over the budget (at least 1: a run trains whole steps)."""
    if Metric.FINAL_TRAIN_FLOPS not in g.columns:
        return "—"
    flops = pd.to_numeric(g[Metric.FINAL_TRAIN_FLOPS], errors="coerce").dropna()
    return f"{flops.mean() / budget:.3f}" if len(flops) else "—"


def _curve_table(runs: pd.DataFrame, fronts: dict[str, Frontier]) -> Table:
    optimal = {(w, b): d for w, f in fronts.items() for b, (d, _) in f.items()}
    rows = []
    for (b, w, d), g in runs.groupby(["budget", "wiring", "depth"]):
        ci = mean_ci(list(g[LOSS]))
        interval = f"{ci.mean:.4f}" + (
            f" [{ci.mean - ci.half_width:.4f}, {ci.mean + ci.half_width:.4f}]"
            if np.isfinite(ci.half_width)
            else ""
        )
        mark = " (optimal)" if optimal.get((str(w), float(b))) == int(d) else ""
        steps = pd.to_numeric(g["train.max_steps"], errors="coerce").mean()
        rows.append(
            (
                f"{b:.3g}",
                str(w),
                f"{int(d)}{mark}",
                str(len(g)),
                interval,
                f"{steps:.0f}",
                _trained_ratio(g, float(b)),
            )
        )
    caption = (
        "Iso-FLOP curves: each trial's steps are its budget over its own FLOPs per step "
        "(trainers/flops.py, the wiring's included), so a deeper model trains fewer steps"
    )
    return Table(CURVE_COLUMNS, tuple(rows), caption)


def _frontier_table(fronts: dict[str, Frontier]) -> Table:
    rows = []
    for wiring, front in fronts.items():
        for budget, (depth, loss) in sorted(front.items()):
            rows.append((f"{budget:.3g}", wiring, str(depth), f"{loss:.4f}"))
    rows.sort(key=lambda r: (float(r[0]), r[1]))
    return Table(
        ("budget (FLOPs)", "wiring", "compute-optimal n_layers", "mean loss"),
        tuple(rows),
        "The compute-optimal frontier: per budget, the depth with the lowest mean final loss",
    )


def _edge_warning(cells: dict[str, Cells], fronts: dict[str, Frontier]) -> list[Paragraph]:
    """A warning naming each (wiring, budget) whose best depth is the shallowest or deepest one
    run at that budget: the optimum is not bracketed, so the true one may lie outside the grid
    and the frontier (and any multiplier read from it) is only a bound."""
    edges = []
    for wiring, front in fronts.items():
        for budget, (depth, _) in sorted(front.items()):
            depths = sorted(d for b, d in cells[wiring] if b == budget)
            if len(depths) > 1 and depth in (depths[0], depths[-1]):
                side = "shallowest" if depth == depths[0] else "deepest"
                edges.append(f"`{wiring}` at {budget:.3g} ({side}, {depth})")
    if not edges:
        return []
    return [
        Paragraph(
            "The best depth is at the edge of the depths run for "
            + "; ".join(edges)
            + ": the optimum is not bracketed, so the frontier there is the grid's edge, not "
            "a compute-optimal depth, and a multiplier read from it compares edge models. Add "
            "depths beyond that edge to locate it.",
            "warning",
        )
    ]


def _multipliers(cells: dict[str, Cells]) -> list[Any]:
    """The multiplier table, or one sentence saying why there is none."""
    base = next((w for w in cells if w.startswith("standard/pre")), None)
    others = [w for w in cells if w != base]
    budgets = {w: len(frontier_points(c)) for w, c in cells.items()}
    if base is None or not others:
        return [
            Paragraph(
                "No compute multiplier: the budgeted trials hold no `standard/pre` "
                "baseline and another wiring to compare with it.",
                "note",
            )
        ]
    if min(budgets.values()) < 2:
        few = ", ".join(f"`{w}`" for w, n in budgets.items() if n < 2)
        return [
            Paragraph(
                f"No compute multiplier: {few} ran at fewer than 2 budgets; a "
                "frontier needs at least 2 (3 to test its form).",
                "note",
            )
        ]
    rows, unfit = [], []
    for wiring in others:
        fit = frontier_advantage(cells[base], cells[wiring])
        if wiring == others[0]:
            rows.append(_row(base, fit.baseline, "baseline"))
        adv = fit.advantage
        multiplier = f"{adv.multiplier:.2f}× [{adv.low:.2f}, {adv.high:.2f}]"
        if not (fit.baseline.falls and fit.variant.falls):
            unfit.append(wiring)
            multiplier = "—"
        rows.append(_row(wiring, fit.variant, multiplier))
    caption = (
        "Frontier loss = A · C^−alpha through each wiring's compute-optimal points, C = "
        "the FLOP budget; the multiplier is the factor of compute the baseline needs to "
        "match the variant's frontier, read at the geometric mean of the budgets"
    )
    blocks: list[Any] = [Table(MULTIPLIER_COLUMNS, tuple(rows), caption)]
    if unfit:
        names = ", ".join(f"`{w}`" for w in unfit)
        blocks.append(
            Paragraph(
                f"No multiplier for {names}: it is defined where both frontiers fall with compute "
                f"over at least {MIN_DISTINCT_COMPUTE} budgets, the exponent's 95% interval above "
                "zero.",
                "note",
            )
        )
    else:
        blocks.append(
            Paragraph(
                "The interval is a bootstrap over runs: each resample draws every (budget, depth) "
                "cell's seeds with replacement and picks the frontier again. The paper reports "
                f"{COMPUTE_MULTIPLIER}× for Block AttnRes at 5.6 PFLOP/s-days, far above these "
                "budgets."
            )
        )
    return blocks


def _row(wiring: str, trend: Any, multiplier: str) -> tuple[str, ...]:
    alpha = f"{trend.law.alpha:.3f} [{trend.alpha_low:.3f}, {trend.alpha_high:.3f}]"
    paper = f"{COMPUTE_MULTIPLIER}×" if wiring.startswith("block_attnres") else "—"
    return (
        wiring,
        alpha,
        str(trend.distinct),
        multiplier,
        paper if multiplier != "baseline" else "—",
    )
