"""The results section: one row per arm with its statistics over the finished seeds, how its
other seeds ended, and its comparison with its baseline."""

from __future__ import annotations

import math
from collections.abc import Callable

import pandas as pd

from record.schema import Status
from reports.ablation import ArmRow, arm_rows, partitions
from reports.document import Paragraph, Section, Table
from reports.merge import SOURCES_SEP, SWEEP_COLUMN, sweeps_holding
from reports.outcomes import describe
from reports.sections.best_points import best_point_blocks
from reports.sections.cells import fmt, fmt_ci, fmt_diff, fmt_number
from reports.sweep import SweepData
from stats.compare import Interval

COLUMNS = (
    "arm",
    "outcomes",
    "final val loss",
    "best val loss",
    "val bits/byte",
    "seeds",
    "params",
    "tokens/s",
    "wall s",
    "Δ vs baseline [95% CI]",
    "test",
    "p (Holm)",
    "verdict",
)
# The columns whose best (lowest) mean is set in bold.
LOSS_COLUMNS: dict[str, Callable[[ArmRow], Interval]] = {
    "final val loss": lambda r: r.final,
    "best val loss": lambda r: r.best,
    "val bits/byte": lambda r: r.bpb,
}


def main_table(data: SweepData, baseline: str | None) -> tuple[Section, list[ArmRow]]:
    rows = arm_rows(data.view, baseline)
    if not rows:
        return Section("Results", (Paragraph("No trial has trained yet.", "warning"),)), rows
    highlight = tuple(i for i, r in enumerate(rows) if r.baseline == r.arm)
    columns: tuple[str, ...] = COLUMNS
    cells = [_cells(r) for r in rows]
    best = _best_cells(rows)
    if data.sweeps:  # several sweeps: where each arm's trials came from
        where = _sweeps_of(data.view.configured, data.sweeps)
        columns = (COLUMNS[0], "sweeps", *COLUMNS[1:])
        cells = [(c[0], where.get(r.arm, "—"), *c[1:]) for r, c in zip(rows, cells, strict=True)]
        best = tuple((i, j + 1 if j > 0 else j) for i, j in best)
    table = Table(columns, tuple(cells), _caption(rows), highlight, best)
    notes = _notes(rows) + _partition_notes(partitions(data.view.configured))
    return Section("Results", (table, *best_point_blocks(data.view, rows), *notes)), rows


def _sweeps_of(configured: pd.DataFrame, order: tuple[str, ...]) -> dict[str, str]:
    """arm -> the sweeps its (configured) trials came from, in the report's order of sweeps."""
    labelled = sweeps_holding(configured)
    return {
        str(arm): SOURCES_SEP.join(s for s in order if s in set(g[SWEEP_COLUMN]))
        for arm, g in labelled.groupby("arm", sort=False)
    }


def _caption(rows: list[ArmRow]) -> str:
    caption = "arms sorted by final validation loss; bold: the lowest mean in each loss column"
    if any(r.comparison for r in rows):
        caption += "; *: Δ significant at the 5% level after Holm's correction"
    return caption


def _best_cells(rows: list[ArmRow]) -> tuple[tuple[int, int], ...]:
    """Each loss column's lowest mean, as ``(row, column)`` cells (ties all of them)."""
    cells: list[tuple[int, int]] = []
    for column, interval in LOSS_COLUMNS.items():
        means = [interval(r).mean for r in rows]
        finite = [m for m in means if math.isfinite(m)]
        if finite:
            j = COLUMNS.index(column)
            cells.extend((i, j) for i, m in enumerate(means) if m == min(finite))
    return tuple(sorted(cells))


def _significant(r: ArmRow) -> bool:
    # The verdict's own test (``stats.verdict``, alpha 0.05 on the Holm-adjusted p): the mark
    # and the verdict column cannot disagree.
    return r.comparison is not None and r.verdict in ("better", "worse")


def _cells(r: ArmRow) -> tuple[str, ...]:
    c = r.comparison
    return (
        r.arm + (" (baseline)" if r.baseline == r.arm else ""),
        describe(r.statuses),
        fmt_ci(r.final),
        fmt_ci(r.best),
        fmt_ci(r.bpb),
        str(len(r.seeds)),
        fmt_number(r.params, ",.0f"),
        fmt_number(r.tokens_per_s, ",.0f"),
        fmt_number(r.wall_s, ".0f"),
        fmt_diff(c) + (" *" if _significant(r) else ""),
        c.test if c else "—",
        fmt(c.p_adjusted, 3) if c else "—",
        r.verdict,
    )


def _notes(rows: list[ArmRow]) -> list[Paragraph]:
    notes = [
        Paragraph(
            "Mean ± half-width of the 95% Student-t interval over seeds. Only finished trials "
            "enter the means, intervals and tests (`seeds` counts them); `outcomes` says how "
            "each arm's other seeds ended. Δ is the arm's final validation loss minus its "
            "baseline's (negative is better); the baseline is the `standard`/`pre` arm with the "
            "same depth, width and other non-wiring settings unless `--baseline` names one. "
            "Tests are paired by seed where both arms finished the same seeds, Welch's "
            "otherwise; p-values are Holm-corrected over the table."
        )
    ]
    lost = [r.arm for r in rows if r.statuses.get(Status.DIVERGED)]
    if lost:
        notes.append(
            Paragraph(
                "Seeds diverged in " + ", ".join(f"`{a}`" for a in lost) + ": those arms' "
                "statistics are over the survivors, which flatters them; the divergence counts "
                "are part of the result.",
                "warning",
            )
        )
    if max(len(r.seeds) for r in rows) < 2:
        notes.append(
            Paragraph(
                "Every arm finished a single seed at most: there are no confidence intervals and "
                "no tests, since both need at least two seeds per arm. Differences below the "
                "seed-to-seed spread of a comparable sweep mean nothing; rerun with "
                "`--seeds 0,1,2`.",
                "warning",
            )
        )
    if all(r.baseline is None for r in rows):
        notes.append(
            Paragraph(
                "No `standard`/`pre` arm in this sweep: no differences are computed (name one "
                "with `--baseline ARM`).",
                "note",
            )
        )
    return notes


def _partition_notes(sizes: dict[str, tuple[int, ...]]) -> list[Paragraph]:
    """Each Block AttnRes arm's actual blocks: the same N means different blocks at different
    depths, and unequal ones where N does not divide the sublayers."""
    if not sizes:
        return []
    each = "; ".join(f"`{arm}`: {_blocks(s)}" for arm, s in sorted(sizes.items()))
    return [Paragraph(f"Block AttnRes partitions (sublayers per AttnRes block, in order): {each}.")]


def _blocks(sizes: tuple[int, ...]) -> str:
    if len(set(sizes)) == 1:
        return f"N = {len(sizes)} AttnRes blocks of {sizes[0]}"
    return f"N = {len(sizes)} AttnRes blocks of {', '.join(map(str, sizes))}"
