"""From trial rows to the comparisons an ablation table needs: which trials count, what an arm
is, which arm is each arm's baseline, per-arm statistics over seeds, and one-axis effects.
Pure functions over the frames of ``reports.load``."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from reports.stats import Comparison, Interval, adjust, compare, mean_ci, verdict

# The wiring: what makes a residual design. Everything else that varies (depth, width, lr...)
# is context, and an arm is compared with the baseline wiring in the same context.
WIRING_KEYS = (
    "model.residual",
    "model.placement",
    "model.norm",
    "model.norm_scaling",
    "model.attnres_blocks",
    "model.hc_streams",
    "model.hc_dynamic",
    "model.mix_ln_alpha",
)
BASELINE_WIRING = {"model.residual": "standard", "model.placement": "pre"}
PARAM_PREFIXES = ("model.", "train.", "data.")
SEED_KEY = "train.seed"


def finished(trials: pd.DataFrame) -> pd.DataFrame:
    """Trials that ran to the end: the rows a comparison may use."""
    if trials.empty:
        return trials
    ok = (trials["status"] == "FINISHED") & (trials["infeasible"] == "")
    return trials[ok & trials.get("final/val_loss", pd.Series(dtype=float)).notna()]


def varied_axes(trials: pd.DataFrame) -> list[str]:
    """Config keys that take more than one value among the trials (the seed excluded)."""
    keys = [c for c in trials.columns if c.startswith(PARAM_PREFIXES) and c != SEED_KEY]
    return [k for k in keys if trials[k].astype(str).nunique() > 1]


def with_arms(trials: pd.DataFrame) -> pd.DataFrame:
    """An ``arm`` for every trial: the configuration without its seed. Grid trials carry their
    arm's name; search trials are named by their varied values."""
    if trials.empty:
        return trials.assign(arm=pd.Series(dtype=str))
    axes = varied_axes(trials)
    out = trials.copy()
    derived = (
        out[axes]
        .astype(str)
        .apply(
            lambda row: "/".join(f"{k.split('.')[-1]}={v}" for k, v in row.items()) or "base",
            axis=1,
        )
    )
    unnamed = out["arm"].isin(["", "search"])
    out.loc[unnamed, "arm"] = derived[unnamed]
    return out


def wiring_label(row: pd.Series) -> str:
    """A trial's wiring as a label: residual/placement, plus N for Block AttnRes."""
    parts = [str(row.get("model.residual", "?")), str(row.get("model.placement", "?"))]
    if "model.attnres_blocks" in row and row.get("model.residual") == "block_attnres":
        parts.append(f"N={row['model.attnres_blocks']}")
    return "/".join(parts)


def context_keys(trials: pd.DataFrame) -> list[str]:
    return [k for k in varied_axes(trials) if k not in WIRING_KEYS]


def is_baseline(row: pd.Series) -> bool:
    return all(str(row.get(k)) == v for k, v in BASELINE_WIRING.items()) and str(
        row.get("model.norm_scaling", "none")
    ) in ("none", "nan")


def baselines(trials: pd.DataFrame, override: str | None = None) -> dict[str, str | None]:
    """arm -> its baseline arm: ``override`` for every arm when given; otherwise the
    standard/pre arm with the same context values (depth, width...), or None if the sweep has
    none."""
    arms = trials.drop_duplicates("arm").set_index("arm")
    if override is not None:
        if override not in arms.index:
            raise ValueError(
                f"--baseline {override!r}: no such arm; arms: {', '.join(sorted(arms.index))}"
            )
        return {arm: override for arm in arms.index}
    context = context_keys(trials)
    candidates = [arm for arm, row in arms.iterrows() if is_baseline(row)]
    out: dict[str, str | None] = {}
    for arm, row in arms.iterrows():
        same = [b for b in candidates if all(str(arms.loc[b, k]) == str(row[k]) for k in context)]
        out[str(arm)] = same[0] if same else None
    return out


@dataclass(frozen=True)
class ArmRow:
    arm: str
    baseline: str | None
    final: Interval
    best: Interval
    bpb: Interval
    seeds: tuple[int, ...]
    params: float
    tokens_per_s: float
    wall_s: float
    comparison: Comparison | None  # None for a baseline arm and where there is no baseline

    @property
    def verdict(self) -> str:
        if self.comparison is None:
            return "baseline" if self.baseline == self.arm else "no baseline"
        return verdict(self.comparison)


def _by_seed(frame: pd.DataFrame, column: str) -> dict[int, float]:
    return {int(s): float(v) for s, v in zip(frame["seed"], frame[column], strict=True)}


def _mean(frame: pd.DataFrame, column: str) -> float:
    return float(frame[column].mean()) if column in frame else math.nan


def arm_rows(trials: pd.DataFrame, override: str | None = None) -> list[ArmRow]:
    """One row per arm, sorted by mean final validation loss; comparisons with the baseline
    paired by seed where the seeds match, Holm-corrected over the table."""
    done = with_arms(finished(trials))
    if done.empty:
        return []
    base_of = baselines(done, override)
    groups = {str(arm): g for arm, g in done.groupby("arm")}
    rows, comparisons = [], []
    for arm, g in groups.items():
        base = base_of.get(arm)
        comparison = None
        if base is not None and base != arm:
            comparison = compare(
                _by_seed(groups[base], "final/val_loss"), _by_seed(g, "final/val_loss")
            )
            comparisons.append(comparison)
        bpb = g["val/bpb"] if "val/bpb" in g else pd.Series(dtype=float)
        rows.append(
            ArmRow(
                arm=arm,
                baseline=base,
                final=mean_ci(g["final/val_loss"].tolist()),
                best=mean_ci(g["best_val_loss"].tolist()),
                bpb=mean_ci(bpb.dropna().tolist()),
                seeds=tuple(sorted(int(s) for s in g["seed"])),
                params=_mean(g, "final/params"),
                tokens_per_s=_mean(g, "final/tokens_per_s"),
                wall_s=_mean(g, "final/wall_s"),
                comparison=comparison,
            )
        )
    adjusted = iter(adjust(comparisons))
    rows = [
        r if r.comparison is None else ArmRow(**{**r.__dict__, "comparison": next(adjusted)})
        for r in rows
    ]
    return sorted(rows, key=lambda r: r.final.mean)


def axis_effect(trials: pd.DataFrame, axis: str, metric: str = "final/val_loss") -> pd.DataFrame:
    """Mean ``metric`` over seeds for each value of ``axis`` (columns), with every other
    varied axis held fixed (rows): an interaction shows as rows that disagree."""
    done = finished(trials)
    others = [k for k in varied_axes(done) if k != axis]
    if others:
        table = done.pivot_table(index=others, columns=axis, values=metric, aggfunc="mean")
    else:
        table = done.groupby(axis)[metric].mean().to_frame().T
        table.index = ["all"]
    return table
