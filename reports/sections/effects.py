"""The one-axis effects section: for each varied axis, the mean final loss per value with the
other axes held fixed, and how many of each cell's trials diverged. A field an arm does not read
is no axis of that arm (``reports.normalize.reads``), and a table none of whose rows holds two
values of its axis is not printed: where nothing is left to show, one line says why."""

from __future__ import annotations

import math
from typing import Any

from reports.ablation import WIRING_KEYS, AxisEffect, axis_effect
from reports.document import Paragraph, Section, Table
from reports.normalize import NOT_READ, read_axes
from reports.sections.cells import MAX_ROWS, fmt
from reports.sweep import SweepData

INTRO = (
    "Mean final validation loss over the finished seeds for each value of one axis (columns), "
    "the other axes held at each of their combinations (rows). Where trials of a cell diverged "
    "the cell says how many of them: at depth, divergence is a result, and the mean is over the "
    "survivors only. Rows that order the columns differently are an interaction the main "
    "table's averages would hide. A field an arm's configuration does not read (Block "
    "AttnRes's N beside `standard`) is no axis of that arm: its trials hold no value of the "
    f'field (a row "{NOT_READ}").'
)


def axis_effects(data: SweepData) -> Section | None:
    ran = data.view.outcome
    # a search's settings tuned per arm vary with each arm's best point: not an axis here
    axes = [k for k in read_axes(ran) if k not in data.view.chosen] if not ran.empty else []
    if not axes:
        return None
    effects = {axis: axis_effect(data.view, axis) for axis in axes}
    shown = {axis: e for axis, e in effects.items() if e.compares()}
    line = _one_line(axes, shown)
    if line is not None:
        return Section("One-axis effects", (Paragraph(line),))
    blocks: list[Any] = [Paragraph(INTRO)]
    blocks.extend(_table(effect, axis) for axis, effect in shown.items())
    left = [axis for axis in axes if axis not in shown]
    if left:
        blocks.append(
            Paragraph(
                f"No table for {_names(left)}: no row would hold two of its values (no two "
                "trials that read it differ in it alone)."
            )
        )
    return Section("One-axis effects", tuple(blocks))


def _names(axes: list[str]) -> str:
    return ", ".join(f"`{a}`" for a in axes)


def _one_line(axes: list[str], shown: dict[str, AxisEffect]) -> str | None:
    """The section's one line where it has no table to add to the results table: nothing
    varies but the wiring, with no other axis to hold fixed, or no axis varies alone."""
    if all(a in WIRING_KEYS for a in axes) and not any(e.others for e in shown.values()):
        return (
            f"Nothing varies but the wiring ({_names(axes)}): the results table above compares "
            "the arms, and there is no other axis to hold fixed."
        )
    if not shown:
        return (
            f"No axis varies alone: {_names(axes)} vary together, so no two trials differ in "
            "one of them only; the results table above compares the arms."
        )
    return None


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
