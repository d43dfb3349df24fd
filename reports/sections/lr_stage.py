"""The learning-rate section: at which learning rate the arms were compared. A tuned grid's arms
each at their own best value (the stage's basin per arm as a table and a figure, and a warning
where an arm's best lies on the grid's edge or its basin is flat); any other grid's arms at one
shared learning rate, said plainly, since an arm whose optimum lies elsewhere is then compared
at a disadvantage."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from record.schema import Metric
from reports import figures
from reports.document import Figure, Paragraph, Section, Table
from reports.normalize import STAGE_ARM, STAGE_VALUE
from reports.sections.cells import fmt
from reports.sweep import SweepData

LR_KEY = "train.lr"
TITLE = "Learning rate"


def lr_section(data: SweepData) -> Section | None:
    """The section; None for a search (the learning rate is one of its sampled values) or a
    sweep with nothing finished."""
    if (data.space or {}).get("kind", "grid") != "grid":
        return None
    if data.lr_stage:
        return _tuned(data, data.lr_stage)
    return _shared(data.view.comparable)


def _shared(done: pd.DataFrame) -> Section | None:
    """One sentence: the arms shared one learning rate (or it was an axis of the grid)."""
    if done.empty or LR_KEY not in done or done["arm"].nunique() < 2:
        return None
    rates = sorted({float(v) for v in done[LR_KEY].dropna()})
    if len(rates) == 1:
        text = (
            f"All arms were trained at one shared learning rate ({LR_KEY} = {rates[0]:g}): the "
            "comparison is at that rate, not at each arm's own best, so an arm whose optimum "
            "lies elsewhere is compared at a disadvantage. A `tune:` block in the space "
            "compares each arm at its own best learning rate."
        )
    else:
        shown = ", ".join(f"{r:g}" for r in rates)
        text = (
            f"The learning rate was an axis of the grid ({LR_KEY} at {shown}); each row "
            "compares arms at the learning rate its label names, not at each arm's own best."
        )
    return Section(TITLE, (Paragraph(text, "note"),))


def _tuned(data: SweepData, state: dict[str, Any]) -> Section:
    """Each arm's basin, its choice, and what is doubtful about it."""
    from search_spaces.lr_stage import choose  # the sweep's own rule; torch-free

    param = str(state.get("param", LR_KEY))
    values = [float(v) for v in state.get("values", [])]
    seeds = state.get("seeds", 1)
    blocks: list[Any] = [
        Paragraph(
            f"Arms were compared at their own best learning rate: each arm first trained "
            f"{param} at {len(values)} values ({', '.join(f'{v:g}' for v in values)}; "
            f"{seeds} seed{'' if seeds == 1 else 's'} each), and the comparison rows use only "
            "its trials at the value with the lowest mean final validation loss.",
            "note",
        )
    ]
    rows, warnings = [], []
    for arm, losses in stage_losses(data.view.stage).items():
        choice = choose(losses)
        cells = [fmt(_mean(losses.get(v))) for v in values]
        rows.append((arm, "—" if choice is None else f"{choice.best:g}", *cells))
        if choice is None:
            warnings.append(f"{arm}: no value of the stage finished; its seeds were not run.")
        warnings += [f"{arm}: {w}." for w in (choice.warnings if choice else ())]
    if rows:
        columns = ("arm", "chosen", *(f"{v:g}" for v in values))
        caption = f"mean final validation loss of the stage's trials by {param}"
        blocks.append(Table(columns, tuple(rows), caption))
    blocks += [Paragraph(w, "warning") for w in warnings]
    image = figures.lr_basin(data.view.stage, param)
    if image:
        caption = (
            f"Final validation loss against {param} per arm (the learning-rate stage; band: "
            "the seeds' range), the chosen value ringed."
        )
        blocks.append(Figure("lr_basin", image.png, caption, image.pdf))
    if not rows:
        blocks.append(Paragraph("No trial of the learning-rate stage is recorded yet.", "warning"))
    return Section(TITLE, tuple(blocks))


def stage_losses(stage: pd.DataFrame) -> dict[str, dict[float, list[float]]]:
    """Each arm's stage: value -> each seed's final validation loss, inf for a trial that did
    not finish (diverged, timed out): what the sweep's rule read."""
    out: dict[str, dict[float, list[float]]] = {}
    for _, row in stage.iterrows():
        finished = row.get("status") == "finished"
        loss = float(row.get(Metric.FINAL_VAL_LOSS, math.inf)) if finished else math.inf
        by_value = out.setdefault(str(row[STAGE_ARM]), {})
        by_value.setdefault(float(row[STAGE_VALUE]), []).append(loss)
    return out


def _mean(losses: list[float] | None) -> float:
    finite = [x for x in losses or [] if math.isfinite(x)]
    return sum(finite) / len(finite) if finite and len(finite) == len(losses or []) else math.nan
