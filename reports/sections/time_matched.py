"""The time-matched comparison: each arm's validation loss at the training time its baseline
needed, beside the step- and FLOP-matched ones. A wiring that costs three times standard's step
on some hardware has, at standard's wall time, trained a third of the steps; this reads its loss
there, from its validation curve.

A trial's training time at step s is s times its measured step (the time inside training steps
per step: validation, diagnostics and start-up left out, as the cost section counts it). The
baseline's time is its own trial's at the same seed (its mean over seeds where the arm has a
seed the baseline lacks). An arm's loss at that time is linear between its two validations
around the step it had reached; an arm that finished sooner is read at its final validation,
which understates what it would have reached, and the table says how many did. The
statistics are the results table's: paired by seed where the seeds match, Holm-corrected over
this table. The result is the hardware's as much as the wiring's: the section names the
devices."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from record.schema import Metric
from reports.ablation import ArmRow
from reports.document import Paragraph, Section, Table
from reports.sections.cells import fmt, fmt_ci, fmt_diff
from reports.sections.plan_cost import planned
from reports.sweep import SweepData
from stats.compare import Comparison, adjust, compare, mean_ci, verdict

COLUMNS = (
    "arm",
    "baseline's time s",
    "steps reached",
    "val loss at that time",
    "Δ vs baseline [95% CI]",
    "p (Holm)",
    "verdict",
    "read at its end",
)


def loss_at(steps: np.ndarray, losses: np.ndarray, step: float) -> tuple[float, bool]:
    """The validation loss at ``step`` from a curve of (``steps``, ``losses``), ascending:
    linear between the validations around it; the last validation's where ``step`` lies past
    it (True: read at its end); NaN before the first."""
    if len(steps) == 0 or step < steps[0]:
        return math.nan, False
    if step >= steps[-1]:
        return float(losses[-1]), step > steps[-1]
    return float(np.interp(step, steps, losses)), False


@dataclass(frozen=True)
class Matched:
    """One trial read at a time: its loss, the step it had reached, and whether it had ended."""

    loss: float
    step: float
    ended: bool


def _curve(curves: pd.DataFrame, run_id: str) -> tuple[np.ndarray, np.ndarray]:
    c = curves[curves["run_id"] == run_id].sort_values("step")
    c = c[np.isfinite(c["value"].astype(float))]
    return c["step"].to_numpy(dtype=float), c["value"].to_numpy(dtype=float)


def _read(curves: pd.DataFrame, row: pd.Series, seconds: float) -> Matched:
    """``row``'s trial at ``seconds`` of training."""
    step = seconds / (float(row["_step_ms"]) / 1000)
    loss, ended = loss_at(*_curve(curves, str(row["run_id"])), step)
    return Matched(loss, step, ended)


def _times(base: pd.DataFrame) -> dict[int, float]:
    """seed -> the baseline trial's training time (s): its steps times its step."""
    steps = pd.to_numeric(base[Metric.FINAL_STEPS], errors="coerce")
    seconds = steps * base["_step_ms"] / 1000
    return {int(s): float(t) for s, t in zip(base["seed"], seconds, strict=True) if t > 0}


def _matched(
    curves: pd.DataFrame, arm: pd.DataFrame, base: pd.DataFrame
) -> tuple[dict[int, Matched], dict[int, Matched], float]:
    """Per seed, the arm's and the baseline's trials read at the baseline's time; and the
    baseline's mean time."""
    times = _times(base)
    if not times:
        return {}, {}, math.nan
    mean_t = float(np.mean(list(times.values())))
    ours = {
        int(r["seed"]): _read(curves, r, times.get(int(r["seed"]), mean_t))
        for _, r in arm.iterrows()
    }
    theirs = {
        int(r["seed"]): _read(curves, r, times[int(r["seed"])])
        for _, r in base.iterrows()
        if int(r["seed"]) in times
    }
    return ours, theirs, mean_t


def _finite(read: dict[int, Matched]) -> dict[int, float]:
    return {s: m.loss for s, m in read.items() if math.isfinite(m.loss)}


def time_matched_section(data: SweepData, rows: list[ArmRow]) -> Section | None:
    """Where some arm has a baseline and both recorded step times: each arm at its baseline's
    training time, with the paired comparison. A sweep recorded before trials recorded their
    plan (``plan_cost.planned``) reports as it did, without it."""
    if not planned(data.view.comparable):
        return None
    done = data.view.comparable.assign(_step_ms=data.view.step_ms)
    done = done[pd.to_numeric(done["_step_ms"], errors="coerce") > 0]
    if done.empty or Metric.FINAL_STEPS not in done:
        return None
    curves = data.curves[data.curves["metric"] == Metric.VAL_LOSS]
    groups = {str(a): g for a, g in done.groupby("arm")}
    lines: list[tuple[ArmRow, dict[int, Matched], float, Comparison]] = []
    for row in rows:
        base = row.baseline
        if base is None or base == row.arm or row.arm not in groups or base not in groups:
            continue
        ours, theirs, seconds = _matched(curves, groups[row.arm], groups[base])
        if not _finite(ours) or not _finite(theirs):
            continue
        lines.append((row, ours, seconds, compare(_finite(theirs), _finite(ours))))
    if not lines:
        return None
    adjusted = adjust([c for *_, c in lines])
    lines = [(r, o, s, a) for (r, o, s, _), a in zip(lines, adjusted, strict=True)]
    body = tuple(_cells(r, o, s, c) for r, o, s, c in lines)
    table = Table(COLUMNS, body, "each arm at the training time its baseline took")
    return Section("Matched wall time", (table, _note(done)))


def _cells(r: ArmRow, ours: dict[int, Matched], seconds: float, c: Comparison) -> tuple[str, ...]:
    losses = mean_ci(list(_finite(ours).values()))
    steps = float(np.mean([m.step for m in ours.values()]))
    ended = sum(m.ended for m in ours.values())
    return (
        r.arm,
        f"{seconds:,.3g}",
        f"{steps:,.0f}",
        fmt_ci(losses),
        fmt_diff(c),
        fmt(c.p_adjusted, 3),
        verdict(c),
        f"{ended} of {len(ours)}",
    )


def _note(done: pd.DataFrame) -> Paragraph:
    devices = sorted({str(h) for h in done.get("hardware", pd.Series(dtype=object)).dropna()})
    where = "; ".join(devices) or "devices not recorded"
    return Paragraph(
        "Hardware-dependent: the times are these trials' own, on "
        f"{where}. A trial's training time at step s is s times its measured step (validation, "
        "diagnostics and start-up not counted); its loss there is read from its validation curve, "
        "linear between validations. An arm slower than its baseline is read at the step it "
        "had reached; one faster had ended before and is read at its final validation (read at "
        "its end), which understates it. Δ is the arm's loss less the baseline's at the same "
        "time, paired by seed where the seeds match, Holm-corrected over this table.",
        "note",
    )
