"""The learning-rate transfer section: where a tuned grid's learning-rate stage ran each family
(wiring x parametrization) at several depths, the optimal learning rate per depth and family
(CompleteP's Fig. 1: final loss against learning rate, one curve per depth; and the optimum
against depth), and whether the optimum drifts with depth, from the data (``reports.lr_transfer``:
the fitted slope with its interval, the grid points it moved, what the grid can resolve)."""

from __future__ import annotations

import math
import statistics
from typing import Any

import pandas as pd

from record.schema import Metric
from reports import figures
from reports.document import Figure, Paragraph, Section, Table
from reports.lr_transfer import RESOLVED_STEPS, Drift, drift, families
from reports.sections.lr_stage import LR_KEY, stage_losses
from reports.sweep import SweepData

TITLE = "Learning-rate transfer across depth"
PUBLISHED = (
    "CompleteP (Dey et al. 2025, Fig. 1) reports the optimal learning rate shifting with depth "
    "under the standard parametrization and staying put under CompleteP; the verdicts above "
    "say what this sweep shows, at its size, and nothing more."
)


def transfer_section(data: SweepData) -> Section | None:
    """The section; None unless the sweep's learning-rate stage spans two depths or more in
    some family."""
    state = data.lr_stage or {}
    param = str(state.get("param", LR_KEY))
    values = [float(v) for v in state.get("values", [])]
    by_family = families(data.view.stage, param)
    if not by_family or len(values) < 2:
        return None
    drifts = _drifts(data, values, by_family)
    blocks: list[Any] = [Paragraph(_method(param, values, state.get("seeds", 1)), "note")]
    blocks.append(_table(drifts, param))
    blocks += [Paragraph(_verdict_text(d)) for d in drifts]
    blocks += [Paragraph(w, "warning") for d in drifts for w in _edge_warnings(d)]
    blocks += _seed_check(data, by_family, drifts)
    blocks.append(Paragraph(PUBLISHED))
    blocks += _figures(data, param, values, by_family, drifts)
    return Section(TITLE, tuple(blocks))


def _drifts(
    data: SweepData, values: list[float], by_family: dict[str, dict[int, str]]
) -> list[Drift]:
    from search_spaces.lr_stage import choose  # the sweep's own rule; torch-free

    losses = stage_losses(data.view.stage)
    return [
        drift(name, values, {d: choose(losses[arm]) for d, arm in arms.items() if arm in losses})
        for name, arms in by_family.items()
    ]


def _method(param: str, values: list[float], seeds: int) -> str:
    ratio = (values[-1] / values[0]) ** (1 / (len(values) - 1))
    return (
        f"Each family (every configuration field alike but the depth) trained {param} at "
        f"{len(values)} values a factor of about {ratio:.2f} apart ({seeds} seed"
        f"{'' if seeds == 1 else 's'} each) at every depth. The optimum at a depth is the value "
        "the stage chose (lowest mean final validation loss), refined in brackets by the vertex "
        "of the parabola in log learning rate through it and its two neighbours. The slope is "
        "the least-squares fit of log optimum (refined) against log depth: 0 means the optimum "
        "transfers across depth, -1 that it falls in proportion to depth; its interval is the "
        "95% Student-t interval from the fit's residuals."
    )


def _table(drifts: list[Drift], param: str) -> Table:
    depths = sorted({o.depth for d in drifts for o in d.optima})
    rows = []
    for d in drifts:
        by_depth = {o.depth: o for o in d.optima}
        cells = [_optimum_cell(by_depth.get(depth)) for depth in depths]
        rows.append((d.family, *cells, _slope_cell(d), f"{d.steps_moved:+d}", d.verdict))
    columns = ("family", *(f"L={x}" for x in depths), "slope ± s.e. [95%]", "moved", "verdict")
    caption = (
        f"best {param} per depth L (blocks), refined estimate in brackets (an asterisk: on the "
        "grid's edge, not bracketed); the slope of log optimum on log depth; the grid points "
        "the chosen value moved from the shallowest depth to the deepest"
    )
    return Table(columns, tuple(rows), caption)


def _optimum_cell(o: Any) -> str:
    if o is None:
        return "—"
    if not o.bracketed:
        return f"{o.best:g}*"
    return f"{o.best:g} ({o.estimate:.3g})"


def _slope_cell(d: Drift) -> str:
    if math.isnan(d.slope):
        return "—"
    if math.isnan(d.stderr):
        return f"{d.slope:+.2f}"
    return f"{d.slope:+.2f} ± {d.stderr:.2f} [{d.low:+.2f}, {d.high:+.2f}]"


def _verdict_text(d: Drift) -> str:
    if not d.optima:
        return f"{d.family}: no value of the stage finished at any depth."
    first, last = d.optima[0], d.optima[-1]
    moved = (
        f"the chosen value moved {abs(d.steps_moved)} grid point"
        f"{'' if abs(d.steps_moved) == 1 else 's'} "
        f"{'up' if d.steps_moved > 0 else 'down' if d.steps_moved < 0 else ''}"
        f"{' ' if d.steps_moved else ''}from {first.depth} to {last.depth} blocks "
        f"({first.best:g} to {last.best:g})"
    )
    grid = (
        f"one grid step over depths {first.depth} to {last.depth} is a slope of {d.resolution:.2f}"
    )
    fit = f"slope {_slope_cell(d)}"
    if d.verdict == "too few depths":
        return f"{d.family}: {len(d.optima)} depths, too few for an interval; {moved}."
    if d.verdict == "drifts":
        return f"{d.family}: the optimum drifts with depth ({fit}, excluding 0); {moved}."
    if d.verdict == "drifts within a step":
        return (
            f"{d.family}: the fitted slope excludes 0 ({fit}), but the optimum moves by less "
            f"than {RESOLVED_STEPS:g} of a grid step over the depth range ({grid}): the drift "
            f"rests on the refinement between grid points, not on the grid's choice; {moved}."
        )
    return (
        f"{d.family}: no drift detected: the interval includes 0 ({fit}); {moved}. The "
        f"interval's ends are the drifts the data cannot exclude; {grid}."
    )


def _edge_warnings(d: Drift) -> list[str]:
    return [
        f"{d.family} at {o.depth} blocks: the best {o.best:g} is the grid's "
        f"{'lowest' if o.index == 0 else 'highest'} value, not bracketed; the optimum may lie "
        "beyond it, so the slope through it is a bound."
        for o in d.optima
        if not o.bracketed
    ]


def _seed_check(
    data: SweepData, by_family: dict[str, dict[int, str]], drifts: list[Drift]
) -> list[Paragraph]:
    """Seed noise at the optimum, measured: the space's own seeds trained again at each chosen
    value against the stage's loss there, beside the chosen value's lead over the next-best
    grid value. Where a second seed moves the loss more than that lead, which grid value is
    best is itself noise, and so is any drift."""
    done = data.view.comparable
    if done.empty or Metric.FINAL_VAL_LOSS not in done or LR_KEY not in done:
        return []
    cells = []  # (|again - stage|, margin, family, depth)
    for d in drifts:
        for o in d.optima:
            at_best = (pd.to_numeric(done[LR_KEY]) - o.best).abs() <= 1e-9 * o.best
            rows = done[(done["arm"] == by_family[d.family][o.depth]) & at_best]
            again = pd.to_numeric(rows[Metric.FINAL_VAL_LOSS], errors="coerce").dropna()
            if len(again) and math.isfinite(o.loss):
                cells.append((abs(float(again.mean()) - o.loss), o.margin, d.family, o.depth))
    if not cells:
        return []
    noise = statistics.median(c[0] for c in cells)
    margins = [c[1] for c in cells if math.isfinite(c[1])]
    lead = statistics.median(margins) if margins else math.nan
    worst = max(cells)
    text = (
        f"Seed noise at the optimum: the space's seeds, trained again at each chosen value, "
        f"reached final losses a median of {noise:.3f} nats from the stage's there (over "
        f"{len(cells)} family × depth cells; largest {worst[0]:.3f}, {worst[2]} at {worst[3]} "
        f"blocks), while each chosen value led the next-best grid value by a median of "
        f"{lead:.3f} nats."
    )
    out = [Paragraph(text)]
    if noise >= lead:
        out.append(
            Paragraph(
                "A second seed moves the loss at the optimum by more than the chosen value's "
                "lead over the next-best: which grid value is best is within seed noise here, "
                "and so is any drift of the optimum with depth. More seeds per learning rate "
                "(`tune: {seeds: N}`) or longer runs would be needed to resolve it.",
                "warning",
            )
        )
    return out


def _figures(
    data: SweepData,
    param: str,
    values: list[float],
    by_family: dict[str, dict[int, str]],
    drifts: list[Drift],
) -> list[Figure]:
    out = []
    basins = figures.lr_transfer_basins(data.view.stage, by_family, param)
    if basins:
        caption = (
            f"Final validation loss against {param}, one panel per family, one line per depth "
            "(the learning-rate stage; band: the seeds' range where it has several), the "
            "chosen value ringed: CompleteP's Fig. 1 at this sweep's size."
        )
        out.append(Figure("lr_transfer_basins", basins.png, caption, basins.pdf))
    optima = figures.lr_transfer_optima(drifts, values, param)
    if optima:
        caption = (
            f"The optimal {param} against depth per family: the refined estimate (dots; open "
            "where it is on the grid's edge), the fitted power law, and the grid's values as "
            "dotted lines. A flat line is an optimum that transfers across depth."
        )
        out.append(Figure("lr_transfer_optima", optima.png, caption, optima.pdf))
    return out
