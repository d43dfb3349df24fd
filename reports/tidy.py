"""A sweep as tidy tables for pandas or R (``nas report --format csv``): ``trials.csv``, one row
per trial with its identity, status, every param and every metric, and ``arms.csv``, one row per
arm with the statistics the report's tables show, unformatted.

The numbers are the report's own: the same trials count (``reports.outcomes``), the same arms
and baselines (``reports.ablation``), the same intervals and tests (``stats.compare``) and the
same cost means (``reports.sections.cost``). Cells hold full-precision numbers, never formatted
text; a missing value is an empty cell.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pandas as pd

from record.schema import BEST_VAL_LOSS, Metric, Status
from reports.ablation import ArmRow
from reports.document import DataFile
from reports.merge import SWEEP_COLUMN
from reports.normalize import PARAM_PREFIXES
from reports.power import comparison_mde, comparison_seeds, estimable
from reports.sections.cost import ArmCost, arm_costs
from reports.sweep import TRIAL_COLUMNS, SweepData
from stats.compare import Interval, first_step_alpha

TRIALS_FILE = "trials.csv"
ARMS_FILE = "arms.csv"
# The arms table's loss statistics: column prefix -> the trial column and the ArmRow interval.
LOSSES: dict[str, tuple[str, Callable[[ArmRow], Interval]]] = {
    "final_val_loss": (Metric.FINAL_VAL_LOSS, lambda r: r.final),
    "best_val_loss": (BEST_VAL_LOSS, lambda r: r.best),
    "val_bpb": (Metric.VAL_BPB, lambda r: r.bpb),
}
COST_COLUMNS = (
    "params",
    "tokens_per_s",
    "wall_s",
    "step_ms",
    "peak_mem_mb",
    "mfu",
    "device_hours",
    "gpu_util",
    "gpu_power_w",
)


def csv_files(data: SweepData, rows: list[ArmRow], effect: float) -> tuple[DataFile, ...]:
    """``trials.csv``, and ``arms.csv`` of the results table's ``rows`` (``arm_rows``), its
    seeds sized for ``effect`` as the seeds section sizes them."""
    return (
        DataFile(TRIALS_FILE, _csv(trial_table(data))),
        DataFile(ARMS_FILE, _csv(arm_table(data, rows, effect))),
    )


def _csv(frame: pd.DataFrame) -> bytes:
    # pandas writes floats with repr, so every digit survives the round trip.
    return frame.to_csv(index=False, na_rep="", lineterminator="\n").encode("utf-8")


def trial_table(data: SweepData) -> pd.DataFrame:
    """One row per trial: the sweep, the record's identity and status columns, then every param
    (dotted config names), then every metric (its latest value, under its MLflow name)."""
    trials = data.view.labelled
    first = [c for c in TRIAL_COLUMNS if c in trials]
    rest = [c for c in trials.columns if c not in first]
    params = sorted(c for c in rest if c.startswith(PARAM_PREFIXES))
    others = sorted(c for c in rest if c not in params)
    others = [c for c in others if c != SWEEP_COLUMN]
    table = trials[first + params + others].copy()
    # a report over several sweeps names each trial's own (``reports.merge``)
    table.insert(0, SWEEP_COLUMN, trials[SWEEP_COLUMN] if data.sweeps else data.name)
    return table


def arm_table(data: SweepData, rows: list[ArmRow], effect: float) -> pd.DataFrame:
    """One row per arm of the results table's ``rows`` (``arm_rows``), in its order: trials per
    status, each loss's mean, standard deviation and 95% interval over the finished seeds, the
    comparison with the baseline and what its seeds could detect (the noise, the MDE at Holm's
    first-step level, the seeds ``effect`` needs), and the mean cost figures."""
    columns = _arm_columns()
    if not rows:
        return pd.DataFrame(columns=columns)
    done = {str(a): g for a, g in data.view.comparable.groupby("arm")}
    costs = arm_costs(data.view, rows)
    alpha = first_step_alpha([r.comparison for r in rows if r.comparison])
    records = [
        _arm_record(r, c, done.get(r.arm, pd.DataFrame())) | _power(r, effect, alpha)
        for r, c in zip(rows, costs, strict=True)
    ]
    return pd.DataFrame.from_records(records, columns=columns)


def _power(r: ArmRow, effect: float, alpha: float) -> dict[str, object]:
    """The seeds section's numbers for ``r``'s comparison; none under 3 seeds (the noise cannot
    be estimated) or without one."""
    c = r.comparison
    if c is None or not estimable(c, alpha):
        return {}
    return {
        "noise_sd": c.sd,
        "alpha": alpha,
        "mde": comparison_mde(c, alpha),
        "effect": effect,
        # beyond the cap: inf, where an empty cell would read as "not estimated"
        "seeds_needed": comparison_seeds(c, effect, alpha) or math.inf,
    }


def _arm_columns() -> list[str]:
    counts = [f"n_{s.value}" for s in Status]
    losses = [f"{name}_{stat}" for name in LOSSES for stat in ("mean", "std", "ci_low", "ci_high")]
    comparison = ["diff", "diff_ci_low", "diff_ci_high", "test", "p", "p_holm", "verdict"]
    power = ["noise_sd", "alpha", "mde", "effect", "seeds_needed"]
    return [
        "arm",
        "baseline",
        "n_trials",
        "n_seeds",
        *counts,
        *losses,
        *comparison,
        *power,
        *COST_COLUMNS,
    ]


def _std(done: pd.DataFrame, column: str) -> float:
    values = done[column].dropna() if column in done else pd.Series(dtype=float)
    return float(values.std(ddof=1)) if len(values) > 1 else math.nan


def _arm_record(r: ArmRow, cost: ArmCost, done: pd.DataFrame) -> dict[str, object]:
    record: dict[str, object] = {
        "arm": r.arm,
        "baseline": r.baseline,
        "n_trials": sum(r.statuses.values()),
        "n_seeds": len(r.seeds),
        **{f"n_{s.value}": k for s, k in r.statuses.items()},
    }
    for name, (column, interval) in LOSSES.items():
        i = interval(r)
        record |= {
            f"{name}_mean": i.mean,
            f"{name}_std": _std(done, column),
            f"{name}_ci_low": i.low,
            f"{name}_ci_high": i.high,
        }
    c = r.comparison
    if c is not None:
        record |= {
            "diff": c.diff,
            "diff_ci_low": c.low,
            "diff_ci_high": c.high,
            "test": c.test,
            "p": c.p,
            "p_holm": c.p_adjusted,
        }
    record["verdict"] = r.verdict
    record |= {
        "params": r.params,
        "tokens_per_s": r.tokens_per_s,
        "wall_s": r.wall_s,
        "step_ms": cost.step_ms,
        "peak_mem_mb": cost.peak_mem_mb,
        "mfu": cost.mfu,
        "device_hours": cost.device_hours,
        "gpu_util": cost.gpu_util,
        "gpu_power_w": cost.gpu_power_w,
    }
    return record
