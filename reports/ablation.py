"""From trial rows to the comparisons an ablation table needs: an arm's wiring label, which arm
is each arm's baseline, per-arm statistics over seeds, and one-axis effects. Which trials count
is ``reports.outcomes``'s, and what an arm is and what an old record ran are
``reports.normalize``'s; pure functions over the frames of ``reports.sweep.SweepData``."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from dataclasses import dataclass

import pandas as pd

from record.schema import BEST_VAL_LOSS, Metric, Status
from reports.normalize import TrialView, read_axes, read_values, reads, recorded, varied_axes
from reports.outcomes import counts, diverged
from reports.published import attnres_switches
from stats.compare import Comparison, Interval, adjust, compare, mean_ci, verdict
from trainers import catalogue
from trainers.budget import BUDGET_KEYS, DERIVED_KEYS
from trainers.config import MODEL_DEFAULTS, balanced_partition

# The wiring: what makes a residual design (the catalogue's axes and every field an entry owns).
# Everything else that varies (depth, width, lr...) is context, and an arm is compared with the
# baseline wiring in the same context.
WIRING_KEYS = catalogue.wiring_keys()
DEPTH_KEY = "model.n_layers"
RESIDUAL_KEY = "model.residual"


def wiring_label(row: pd.Series) -> str:
    """A trial's wiring as a label: residual/placement, then its catalogue entry's label segments
    (N for Block AttnRes first; LAuReL-LR's rank and DenseFormer's k x p after), the attention
    variant and each AttnRes design switch away from the paper's choice."""
    residual = row.get(RESIDUAL_KEY)
    parts = [str(row.get(RESIDUAL_KEY, "?")), str(row.get("model.placement", "?"))]
    own = _WIRINGS[residual].label if residual in _WIRINGS else ()
    parts.extend(_segments([p for p in own if p.lead], row))
    parts.extend(_attention_parts(str(recorded(row, "model.attention")), row))
    parts.extend(f"{name}={value}" for name, value in attnres_switches(row).items())
    parts.extend(_segments([p for p in own if not p.lead], row))
    return "/".join(parts)


_WIRINGS = {w.name: w for w in catalogue.WIRINGS}
_ATTENTIONS = {a.name: a for a in catalogue.ATTENTIONS}


def _attention_parts(attention: str, row: pd.Series) -> list[str]:
    """The attention variant's segments (a record from before the field reads as standard:
    ``recorded``, at the caller)."""
    if attention in _ATTENTIONS:
        return _segments(list(_ATTENTIONS[attention].label), row)
    return [attention]


def _whole(value: object) -> int | None:
    """A config integer as a frame holds it (int, float or MLflow's string); None if absent."""
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else int(number)


def _segments(parts: list[catalogue.LabelPart], row: pd.Series) -> list[str]:
    """Each label part as text. Integers are read whole, absent ones (a record from before the
    field existed) at the default they ran; values read as recorded need every field present."""
    out = []
    for part in parts:
        keys = [f"model.{name}" for name in part.fields]
        if not part.whole:
            if all(k in row for k in keys):
                out.append(part.template.format(*(row[k] for k in keys)))
            continue
        defaults = [MODEL_DEFAULTS[name] for name in part.fields]
        values = [_whole(row.get(k)) or d for k, d in zip(keys, defaults, strict=True)]
        if not (part.hide_at_default and values == defaults):
            out.append(part.template.format(*values))
    return out


def partitions(trials: pd.DataFrame) -> dict[str, tuple[int, ...]]:
    """arm -> its Block AttnRes partition, for the Block AttnRes arms of a labelled frame: what
    ``attnres_blocks`` = N meant at that arm's depth."""
    needed = (RESIDUAL_KEY, DEPTH_KEY, "model.attnres_blocks")
    if trials.empty or not all(k in trials for k in needed):
        return {}
    rows = trials[trials[RESIDUAL_KEY] == "block_attnres"].drop_duplicates("arm")
    return {
        str(r["arm"]): balanced_partition(2 * int(r[DEPTH_KEY]), int(r["model.attnres_blocks"]))
        for _, r in rows.iterrows()
    }


# A run's length when it trains to a budget (train.target_flops or train.tokens_per_param):
# derived from the budget and the wiring's own FLOPs (trainers.budget), so it differs
# between wirings at one budget and is not part of the context an arm is compared in.


def context_keys(trials: pd.DataFrame, tuned: tuple[str, ...] = ()) -> list[str]:
    """The varied keys an arm is compared with its baseline within: all but the wiring's, the
    lengths a budget derived, and a search's settings tuned per arm (each arm at its own best)."""
    derived = DERIVED_KEYS if _all_budgeted(trials) else ()
    skip = {*WIRING_KEYS, *derived, *tuned}
    return [k for k in varied_axes(trials) if k not in skip]


def _all_budgeted(trials: pd.DataFrame) -> bool:
    """Whether every trial trained to a budget (so its length was derived, not chosen)."""
    if trials.empty:
        return False
    budget = pd.Series(False, index=trials.index)
    for key in BUDGET_KEYS:
        if key in trials:
            budget |= pd.to_numeric(trials[key], errors="coerce").fillna(0) > 0
    return bool(budget.all())


def is_baseline(row: pd.Series) -> bool:
    return catalogue.is_baseline(lambda key: recorded(row, key))


def wiring_names(arm: str, row: pd.Series, context: list[str]) -> set[str]:
    """The names ``--baseline`` may give this arm's wiring by, the same in every context: its
    label without the segments its context adds (``standard`` for ``standard/n_layers=4``, the
    arm's name in the space) and its wiring label (``standard/pre``)."""
    # A label is the arm's name, then "field=value" per varied parameter (search_spaces.arm_label).
    fields = {key.split(".")[-1] for key in context}
    kept = [part for part in arm.split("/") if part.partition("=")[0] not in fields]
    return {name for name in ("/".join(kept), wiring_label(row)) if name}


def baselines(
    trials: pd.DataFrame, override: str | None = None, tuned: tuple[str, ...] = ()
) -> dict[str, str | None]:
    """arm -> its baseline arm, or None where its context has none. Without ``override``: the
    standard/pre arm with the same context values (depth, width...). ``override`` naming an arm:
    that arm for every arm. ``override`` naming a wiring (``wiring_names``): the arm of that
    wiring in each arm's context, so ``standard`` compares every depth with standard at that
    depth. ``tuned``: a search's settings tuned per arm, which an arm and its baseline may
    differ in."""
    arms = trials.drop_duplicates("arm").set_index("arm")
    if override is not None and override in arms.index:
        return {str(arm): override for arm in arms.index}
    context = context_keys(trials, tuned)
    if override is None:
        candidates = [str(arm) for arm, row in arms.iterrows() if is_baseline(row)]
    else:
        candidates = _wiring_arms(arms, override, context)
    out: dict[str, str | None] = {}
    for arm, row in arms.iterrows():
        same = [b for b in candidates if all(str(arms.loc[b, k]) == str(row[k]) for k in context)]
        if override is not None and len(same) > 1:
            raise ValueError(
                f"--baseline {override!r} names {len(same)} arms in one context "
                f"({', '.join(sorted(same))}); give one arm or a wiring that tells them apart"
            )
        out[str(arm)] = same[0] if same else None
    return out


def _wiring_arms(arms: pd.DataFrame, wiring: str, context: list[str]) -> list[str]:
    """The arms whose wiring ``wiring`` names; none is bad input, answered with every name the
    sweep allows."""
    names = {str(arm): wiring_names(str(arm), row, context) for arm, row in arms.iterrows()}
    found = [arm for arm, own in names.items() if wiring in own]
    if not found:
        wirings = sorted(set().union(*names.values()))
        raise ValueError(
            f"--baseline {wiring!r}: no such arm or wiring; arms: {', '.join(sorted(names))}; "
            f"wirings: {', '.join(wirings)}"
        )
    return found


@dataclass(frozen=True)
class ArmRow:
    arm: str
    baseline: str | None
    final: Interval  # over the arm's comparable trials only, like every statistic here
    best: Interval
    bpb: Interval
    seeds: tuple[int, ...]  # the seeds the statistics rest on
    params: float
    tokens_per_s: float
    wall_s: float
    comparison: Comparison | None  # None for a baseline arm and where there is no baseline
    statuses: dict[Status, int]  # the arm's trials per status (infeasible ones aside)

    @property
    def verdict(self) -> str:
        if self.baseline == self.arm:
            return "baseline"
        if self.final.n == 0:
            return "none finished"
        if self.comparison is None:
            return "no baseline" if self.baseline is None else "baseline none finished"
        return verdict(self.comparison)


def by_seed(frame: pd.DataFrame, column: str) -> dict[int, float]:
    """seed -> the value of ``column`` in each of ``frame``'s trials (one trial per seed)."""
    return {int(s): float(v) for s, v in zip(frame["seed"], frame[column], strict=True)}


def _mean(frame: pd.DataFrame, column: str) -> float:
    return float(frame[column].mean()) if column in frame and len(frame) else math.nan


def _column(frame: pd.DataFrame, column: str) -> list[float]:
    return frame[column].dropna().tolist() if column in frame else []


def _arm_row(arm: str, base: str | None, g: pd.DataFrame, done: pd.DataFrame) -> ArmRow:
    """One arm's statistics over its comparable trials ``done``; ``g`` holds all its trials."""
    return ArmRow(
        arm=arm,
        baseline=base,
        final=mean_ci(_column(done, Metric.FINAL_VAL_LOSS)),
        best=mean_ci(_column(done, BEST_VAL_LOSS)),
        bpb=mean_ci(_column(done, Metric.VAL_BPB)),
        seeds=tuple(sorted(int(s) for s in done["seed"])),
        params=_mean(done, Metric.FINAL_PARAMS),
        tokens_per_s=_mean(done, Metric.FINAL_TOKENS_PER_S),
        wall_s=_mean(done, Metric.FINAL_WALL_S),
        comparison=None,
        statuses=counts(g),
    )


def arm_frames(frame: pd.DataFrame, rows: list[ArmRow]) -> Iterator[tuple[ArmRow, pd.DataFrame]]:
    """Each of ``rows`` in its order with its arm's trials in ``frame`` (an empty frame where
    the arm has none): what a per-arm table beside the results table reads."""
    groups = {str(arm): g for arm, g in frame.groupby("arm")}
    for row in rows:
        yield row, groups.get(row.arm, frame.iloc[:0])


def arm_rows(view: TrialView, override: str | None = None) -> list[ArmRow]:
    """One row per arm that trained (finished or not), sorted by mean final validation loss,
    arms with no finished trial last. Statistics and comparisons use only the comparable trials;
    comparisons with the baseline are paired by seed where the seeds match, Holm-corrected over
    the table."""
    labelled = view.configured
    if labelled.empty:
        return []
    base_of = baselines(labelled, override, view.chosen)
    groups = {str(arm): g for arm, g in labelled.groupby("arm")}
    finished = {str(arm): g for arm, g in view.comparable.groupby("arm")}
    done = {arm: finished.get(arm, g.iloc[:0]) for arm, g in groups.items()}
    rows, comparisons = [], []
    for arm, g in groups.items():
        row = _arm_row(arm, base_of.get(arm), g, done[arm])
        base = row.baseline
        if base is not None and base != arm and len(done[arm]) and len(done[base]):
            final = Metric.FINAL_VAL_LOSS
            c = compare(by_seed(done[base], final), by_seed(done[arm], final))
            row = dataclasses.replace(row, comparison=c)
            comparisons.append(c)
        rows.append(row)
    adjusted = iter(adjust(comparisons))
    rows = [
        r if r.comparison is None else dataclasses.replace(r, comparison=next(adjusted))
        for r in rows
    ]
    return sorted(rows, key=lambda r: (math.isnan(r.final.mean), r.final.mean))


@dataclass(frozen=True)
class AxisEffect:
    """One axis's values (columns) against the other varied axes' combinations (rows); the
    three frames share index and columns."""

    loss: pd.DataFrame  # mean final loss over the cell's comparable trials (NaN: none)
    diverged: pd.DataFrame  # trials of the cell that diverged
    trials: pd.DataFrame  # trials of the cell that trained to an outcome
    others: tuple[str, ...] = ()  # the axes held fixed (the rows); none: one row, "all"

    def compares(self) -> bool:
        """Whether some row holds two values of the axis (cells with trials): a table of one
        value per row shows no effect of it."""
        filled = (self.trials.fillna(0) > 0).sum(axis=1)
        return bool(len(filled)) and int(filled.max()) >= 2


def axis_effect(view: TrialView, axis: str, metric: str = Metric.FINAL_VAL_LOSS) -> AxisEffect:
    """Mean ``metric`` over seeds for each value of ``axis`` (columns), with every other
    varied axis held fixed (rows), over the trials that trained to an outcome: an interaction
    shows as rows that disagree. Beside it, each cell's divergence count: at depth, divergence
    is a result, and the mean is over the survivors only. Only the trials that read ``axis``
    hold a value of it (``reads``); a row axis that some of them do not read has a row
    ``NOT_READ`` for those."""
    ran = view.outcome[reads(view.outcome, axis)]
    kept = ran.index.isin(view.comparable.index)
    values = ran[metric] if metric in ran else pd.Series(math.nan, index=ran.index)
    others = [k for k in read_axes(ran) if k != axis and k not in view.chosen]
    cells = ran.assign(
        **{k: read_values(ran, k) for k in others},
        _value=values.where(kept),
        _diverged=diverged(ran).astype(int),
    )
    grouped = cells.groupby([*others, axis], dropna=False)
    frames = {
        "loss": grouped["_value"].mean(),
        "diverged": grouped["_diverged"].sum(),
        "trials": grouped.size(),
    }
    return AxisEffect(
        **{name: _table(series, axis, bool(others)) for name, series in frames.items()},
        others=tuple(others),
    )


def _table(cells: pd.Series, axis: str, has_rows: bool) -> pd.DataFrame:
    """A (rows..., axis) series as a table with the axis's values as columns."""
    if has_rows:
        return cells.unstack(axis)
    table = cells.to_frame().T
    table.index = pd.Index(["all"])
    return table
