"""Plan against cost, per arm: the step time the FLOP plan gave each trial (its training FLOPs at
the plan's assumed MFU of its device's peak: ``trainers.measure.time_plan``) beside the step time
it took, and each arm's time per token over its baseline's beside its FLOPs per token over its
baseline's. An arm whose time share exceeds its FLOP share by more than ``OVER`` is flagged: it
pays for something the FLOP count does not hold (on a GPU, many small memory-bound kernels), so
a plan from FLOPs understates it, and an equal-FLOPs comparison flatters it."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from record.schema import Metric
from reports.ablation import ArmRow, arm_frames
from reports.document import Paragraph, Table
from reports.normalize import TrialView
from reports.sections.cells import column_mean, fmt_number

OVER = 0.10  # the time share above the FLOP share that flags an arm
COLUMNS = (
    "arm",
    "planned step ms",
    "measured step ms",
    "measured / planned",
    "FLOPs/token ×",
    "time/token ×",
    "over its FLOP share",
)


@dataclass(frozen=True)
class ArmPlan:
    """One arm's means over its finished trials; NaN where none recorded the figure."""

    arm: str
    baseline: str | None
    planned_step_ms: float
    step_ms: float
    flops_per_token: float
    ms_per_token: float


def _column(frame: pd.DataFrame, name: str) -> pd.Series:
    if name not in frame:
        return pd.Series(math.nan, index=frame.index, dtype=float)
    return pd.to_numeric(frame[name], errors="coerce")


def arm_plans(view: TrialView, rows: list[ArmRow]) -> list[ArmPlan]:
    """Each arm of ``rows`` over the finished trials its statistics use: the planned step (the
    plan's time for the steps trained over those steps), the measured step, FLOPs per token and
    the measured time per token (the step over its tokens: batch x context)."""
    done = view.comparable
    step_ms = view.step_ms.reindex(done.index)
    steps = _column(done, Metric.FINAL_STEPS)
    planned = 1000 * _column(done, Metric.FINAL_PLANNED_TRAIN_S) / steps.where(steps > 0)
    tokens = _column(done, "train.batch_size") * _column(done, "model.seq_len")
    frame = done.assign(
        _planned=planned,
        _step=step_ms,
        _flops=_column(done, Metric.FINAL_FLOPS_PER_TOKEN),
        _per_token=step_ms / tokens.where(tokens > 0),
    )
    out = []
    for row, g in arm_frames(frame, rows):
        out.append(
            ArmPlan(
                arm=row.arm,
                baseline=row.baseline,
                planned_step_ms=column_mean(g, "_planned"),
                step_ms=column_mean(g, "_step"),
                flops_per_token=column_mean(g, "_flops"),
                ms_per_token=column_mean(g, "_per_token"),
            )
        )
    return out


def excess(arm: ArmPlan, base: ArmPlan) -> float:
    """How far the arm's time share exceeds its FLOP share: (time/token over the baseline's) /
    (FLOPs/token over the baseline's) - 1; NaN where either is unrecorded."""
    time_share = arm.ms_per_token / base.ms_per_token
    flop_share = arm.flops_per_token / base.flops_per_token
    ratio = time_share / flop_share - 1.0
    return ratio if math.isfinite(ratio) else math.nan


def _cells(p: ArmPlan, base: ArmPlan | None) -> tuple[str, ...]:
    over = excess(p, base) if base is not None and base.arm != p.arm else math.nan
    flag = "—" if not math.isfinite(over) else f"{over:+.0%}" + (" ⚑" if over > OVER else "")
    flops_x = p.flops_per_token / base.flops_per_token if base else math.nan
    time_x = p.ms_per_token / base.ms_per_token if base else math.nan
    return (
        p.arm + (" (baseline)" if p.baseline == p.arm else ""),
        fmt_number(p.planned_step_ms, ",.1f"),
        fmt_number(p.step_ms, ",.1f"),
        fmt_number(p.step_ms / p.planned_step_ms, ".2f"),
        fmt_number(flops_x, ".3f"),
        fmt_number(time_x, ".3f"),
        flag,
    )


def planned(trials: pd.DataFrame) -> bool:
    """Whether some trial recorded its plan (``final/planned_train_s``): a sweep recorded
    before it reports as it did, without the plan's table or the time-matched section."""
    return bool(_column(trials, Metric.FINAL_PLANNED_TRAIN_S).notna().any())


def plan_blocks(view: TrialView, rows: list[ArmRow]) -> list[Table | Paragraph]:
    """The plan-against-cost table and its note; nothing for a sweep recorded before trials
    recorded their plan."""
    if not planned(view.comparable):
        return []
    plans = arm_plans(view, rows)
    by_arm = {p.arm: p for p in plans}
    body = tuple(_cells(p, by_arm.get(p.baseline or "")) for p in plans)
    flagged = [
        p.arm
        for p in plans
        if p.baseline in by_arm and p.baseline != p.arm and excess(p, by_arm[p.baseline]) > OVER
    ]
    caption = "plan against cost: means over each arm's finished seeds"
    note = (
        "planned step ms: the FLOP plan's time for the steps a trial trained (its training "
        "FLOPs at the assumed MFU, final/planned_mfu, of its device's peak; "
        "trainers/measure/time_plan.py) over those steps; measured step ms: the time inside "
        "its training steps per step. FLOPs/token × and time/token × are the arm's over its "
        "baseline's; over its FLOP share is the second over the first, less 1, flagged ⚑ above "
        f"{OVER:.0%}: there a plan from FLOPs understates the arm's cost, and an equal-FLOPs "
        "comparison gives it time it did not have. — : not recorded (a trial recorded before "
        "the plan was)."
    )
    blocks: list[Table | Paragraph] = [Table(COLUMNS, body, caption), Paragraph(note)]
    if flagged:
        names = ", ".join(f"`{a}`" for a in flagged)
        blocks.append(
            Paragraph(
                f"{names}: measured time per token more than {OVER:.0%} above the FLOP share; "
                "see the time-matched comparison for their loss at their baseline's time.",
                "warning",
            )
        )
    return blocks
