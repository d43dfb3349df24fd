"""The one-axis effects section: for each varied axis, the mean final loss per value with the
other axes held fixed, and how many of each cell's trials diverged."""

from __future__ import annotations

import math
from typing import Any

from reports.ablation import AxisEffect, axis_effect
from reports.document import Paragraph, Section, Table
from reports.normalize import varied_axes
from reports.sections.cells import MAX_ROWS, fmt
from reports.sweep import SweepData


def axis_effects(data: SweepData) -> Section | None:
    ran = data.view.outcome
    # a search's settings tuned per arm vary with each arm's best point: not an axis here
    axes = [k for k in varied_axes(ran) if k not in data.view.chosen] if not ran.empty else []
    if not axes:
        return None
    blocks: list[Any] = [
        Paragraph(
            "Mean final validation loss over the finished seeds for each value of one axis "
            "(columns), the other axes held at each of their combinations (rows). Where trials "
            "of a cell diverged the cell says how many of them: at depth, divergence is a "
            "result, and the mean is over the survivors only. Rows that order the columns "
            "differently are an interaction the main table's averages would hide."
        )
    ]
    for axis in axes:
        blocks.append(_table(axis_effect(data.view, axis), axis))
    return Section("One-axis effects", tuple(blocks))


def cell(loss: float, diverged: float, trials: float) -> str:
    """ "2.3456", "2.3456 (1/3 diverged)", "— (3/3 diverged)", or "—" for an empty cell."""
    if not trials or math.isnan(trials):
        return "—"
    text = fmt(loss)
    return f"{text} ({int(diverged)}/{int(trials)} diverged)" if diverged else text


def _table(effect: AxisEffect, axis: str) -> Table:
    loss, diverged, trials = effect.loss, effect.diverged, effect.trials
    index_names = [str(n) for n in loss.index.names if n is not None]
    columns = (" / ".join(index_names), *[str(c) for c in loss.columns])
    rows = []
    for key in list(loss.index)[:MAX_ROWS]:
        label = " / ".join(map(str, key)) if isinstance(key, tuple) else str(key)
        values = zip(loss.loc[key], diverged.loc[key], trials.loc[key], strict=True)
        rows.append((label, *[cell(float(v), float(d), float(n)) for v, d, n in values]))
    caption = f"effect of {axis}"
    if len(loss) > MAX_ROWS:
        caption += f" (first {MAX_ROWS} of {len(loss)} rows)"
    return Table(columns, tuple(rows), caption)
