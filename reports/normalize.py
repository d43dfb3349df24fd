"""The one step between the record and the report: the trial frame the sections read is
derived here once (``TrialView``), so that no section labels arms, selects the trials it counts
or fills in a configuration field newer than the record.

Every run arrives in the current record shape: ``record.read.upgraded`` brought it there
(``record.upgrade``: a version-1 trial's legacy infeasible tag and seed param are its status,
reason and seed tags by then). A trial that has not ended yet carries no status, whatever its
version: the MLflow run status says how it stands (``STATUS_OF_RUN``). Its configuration may
lack the fields that came later (``FIELD_DEFAULTS``): such a run ran the field's default.

A frame keeps a missing field missing (NaN), as recorded: which fields vary, and so the arms'
labels, are read from the record as it is. The defaults apply where a label or a baseline is
read from one trial (``recorded``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from record.schema import Metric, Status, Tag
from reports.outcomes import comparable, configured, with_outcome
from trainers.config import MODEL_DEFAULTS, RunConfig, flatten
from trainers.identity import READERS

PARAM_PREFIXES = ("model.", "train.", "data.")
SEED_KEY = "train.seed"
# The MLflow status a trial run without ``nas.status`` (one not ended: the trial writes its
# status as it ends) is in -> the trial status it means.
STATUS_OF_RUN = {
    "FINISHED": Status.FINISHED,
    "FAILED": Status.FAILED,
    "KILLED": Status.KILLED,
    "RUNNING": Status.KILLED,  # the driver exited without closing it: interrupted
    "SCHEDULED": Status.KILLED,
}
# The value a record ran for a config field it holds none for: the field came later, and its
# default is what the run did before it existed (a new field's default changes nothing:
# LAuReL-LR ran rank 16, DenseFormer 1x1, every run the standard parametrization and the
# routing alarm's default level). The record's params are kept as recorded (no step of
# record.upgrade fills them: the report's tables show the columns a run recorded, and which
# fields vary is read from the record as it is), so this is read where one row is read.
FIELD_DEFAULTS: dict[str, object] = {
    **flatten(RunConfig()),
    **{f"model.{k}": v for k, v in MODEL_DEFAULTS.items()},
}
_UNRECORDED = ("nan", "None")  # a missing value once it has been through str()


def trial_status(tags: Mapping[str, str], run_status: str) -> Status:
    """A trial's ``Status``: its ``nas.status`` tag; without one (a trial not ended yet), the
    MLflow run status's (``STATUS_OF_RUN``)."""
    if Tag.STATUS in tags:
        try:
            return Status(tags[Tag.STATUS])
        except ValueError:
            valid = ", ".join(s.value for s in Status)
            raise ValueError(
                f"{Tag.STATUS} {tags[Tag.STATUS]!r}: unknown; valid: {valid}"
            ) from None
    return STATUS_OF_RUN.get(run_status, Status.KILLED)


def trial_reason(tags: Mapping[str, str]) -> str | None:
    """Why the trial ended as it did: its reason tag (None without one, or before it ended)."""
    return tags.get(Tag.REASON) if Tag.STATUS in tags else None


def recorded(row: Mapping[str, Any], key: str, default: object | None = None) -> object:
    """A trial's value for config field ``key``, or where its record holds none (a field newer
    than the record) the default that run ran: ``default``, else ``FIELD_DEFAULTS[key]``."""
    value = row.get(key)
    missing = value is None or (isinstance(value, float) and math.isnan(value))
    if missing or str(value) in _UNRECORDED:
        return FIELD_DEFAULTS.get(key) if default is None else default
    return value


# Data fields newer than some records, and what such a record ran: no manifest (its data was
# not a prepared corpus). Read as that value, so merging an older sweep splits no context.
MANIFEST_KEY = "data.manifest"
DATA_FIELD_DEFAULTS: dict[str, str] = {MANIFEST_KEY: str(FIELD_DEFAULTS[MANIFEST_KEY])}


def _as_text(trials: pd.DataFrame, key: str) -> pd.Series:
    text = trials[key].astype(str)
    if key not in DATA_FIELD_DEFAULTS:
        return text
    return text.where(~text.isin(_UNRECORDED), DATA_FIELD_DEFAULTS[key])


def varied_axes(trials: pd.DataFrame) -> list[str]:
    """Config keys that take more than one value among the trials (the seed excluded). The
    corpus's manifest hash (``data.manifest``) is one: trials on different data are never one
    arm, and an arm's baseline is taken in its own context (``reports.ablation``), so never
    on other data."""
    keys = [c for c in trials.columns if c.startswith(PARAM_PREFIXES) and c != SEED_KEY]
    return [k for k in keys if _as_text(trials, k).nunique() > 1]


# What a trial holds for a field its configuration does not read (``reads``): no value of it.
NOT_READ = "(not read)"


def reads(trials: pd.DataFrame, key: str) -> pd.Series:
    """Per trial, whether its configuration reads config field ``key`` (``trainers.identity``'s
    ``READERS``, over the trial's recorded selectors; a field it does not name is read by every
    configuration). A field a trial does not read holds the default the sweep gave it (Block
    AttnRes's N beside a standard arm), which says nothing of the model the trial built."""
    reader = READERS.get(key.removeprefix("model.")) if key.startswith("model.") else None
    if reader is None or trials.empty:
        return pd.Series(True, index=trials.index, dtype=bool)
    selectors = [(s, f"model.{s}") for s in reader.selectors]
    return pd.Series(
        [reader.reads({s: recorded(row, k) for s, k in selectors}) for _, row in trials.iterrows()],
        index=trials.index,
        dtype=bool,
    )


def read_values(trials: pd.DataFrame, key: str) -> pd.Series:
    """``key``'s column with ``NOT_READ`` where a trial does not read the field (``reads``)."""
    return trials[key].where(reads(trials, key), NOT_READ)


def read_axes(trials: pd.DataFrame) -> list[str]:
    """``varied_axes`` over the trials that read each key: a field an arm does not read is no
    axis of that arm, so standard's default N beside Block AttnRes at N = 4 varies nothing."""
    return [k for k in varied_axes(trials) if _as_text(trials[reads(trials, k)], k).nunique() > 1]


def label_of(row: Mapping[str, Any], keys: Sequence[str]) -> str:
    """``field=value`` of each of ``keys``, joined by "/": how a search trial's arm is named by
    its varied values (``search_spaces.space.arm_label``'s form)."""
    return "/".join(f"{k.split('.')[-1]}={row.get(k)}" for k in keys)


def with_arms(trials: pd.DataFrame, tuned: Sequence[str] = ()) -> pd.DataFrame:
    """An ``arm`` for every trial: the configuration without its seed (and without a search's
    ``tuned`` settings, ``tuned_keys``). Grid trials carry their arm's name; search trials (and
    a merge's trials whose name was ambiguous) are named by their varied values, the axes taken
    over the trials with a full configuration (an infeasible one holds only its point). The
    whole frame is labelled before anything is selected from it, so that every part of a report
    names an arm alike. Where trials ran on more than one corpus (``data.manifest``), a grid
    arm's name gains its trials' ``manifest=``: one arm never holds two corpora's trials."""
    if trials.empty:
        return trials.assign(arm=pd.Series(dtype=str))
    full = configured(trials)
    axes = [k for k in varied_axes(full if len(full) else trials) if k not in tuned]
    out = trials.copy()
    derived = out[axes].astype(str).apply(lambda row: label_of(row, axes) or "base", axis=1)
    unnamed = out["arm"].isin(["", "search"])
    out.loc[unnamed, "arm"] = derived[unnamed]
    if MANIFEST_KEY in axes:  # a grid's arm name does not say which data its trials had
        named = ~unnamed
        data = _as_text(out, MANIFEST_KEY).replace("", "none")
        out.loc[named, "arm"] = out.loc[named, "arm"] + "/manifest=" + data[named]
    return out


def step_ms(trials: pd.DataFrame) -> pd.Series:
    """Milliseconds per training step over the steps the last attempt trained and timed
    (``final/timed_steps``); a trial recorded before that metric divides by every step, which
    is the same unless it was resumed. NaN where not recorded."""
    if Metric.FINAL_STEP_S not in trials or Metric.FINAL_STEPS not in trials:
        return pd.Series(math.nan, index=trials.index, dtype=float)
    steps = pd.to_numeric(trials[Metric.FINAL_STEPS], errors="coerce")
    if Metric.FINAL_TIMED_STEPS in trials:
        timed = pd.to_numeric(trials[Metric.FINAL_TIMED_STEPS], errors="coerce")
        steps = timed.where(timed.notna(), steps)
    per_step = 1000 * pd.to_numeric(trials[Metric.FINAL_STEP_S], errors="coerce") / steps
    return per_step.where(steps > 0)


# A tuned grid's learning-rate stage as the record keeps it (``LR_STAGE_FILE``): each stage
# trial's key -> (the arm it tunes, the value it trained)
StageKeys = Mapping[str, tuple[str, float]]
STAGE_ARM, STAGE_VALUE = "stage_arm", "stage_value"


def stage_keys(state: Mapping[str, Any] | None) -> dict[str, tuple[str, float]]:
    """Each stage trial's key -> (arm, value), from the recorded stage; empty without one."""
    arms = (state or {}).get("arms") or {}
    return {
        key: (str(arm), float(value))
        for arm, entry in arms.items()
        for value, keys in (entry.get("keys") or {}).items()
        for key in keys
    }


# A search's sampled training settings (learning rate, warm-up, weight decay...): tuned per arm,
# so that an arm is its configuration without them and is compared at its best point. Its
# sampled model and data fields make the arms and their contexts.
TUNED_PREFIX = "train."


def tuned_keys(space: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The settings a search tunes per arm (its sampled ``train.*`` parameters, in order);
    none for a grid (a tuned grid's learning-rate stage is ``stage_keys``')."""
    if (space or {}).get("kind") != "search":
        return ()
    params = (space or {}).get("params") or {}
    return tuple(sorted(k for k in params if str(k).startswith(TUNED_PREFIX)))


def point_of(row: Mapping[str, Any], tuned: Sequence[str]) -> tuple[str, ...]:
    """A trial's tuned values, as text (how a frame's floats and MLflow's strings compare)."""
    return tuple(str(row.get(k)) for k in tuned)


def best_points(trials: pd.DataFrame, tuned: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """Each arm's best point (``point_of``) over its trials that trained to an outcome: the
    lowest mean final validation loss over the point's seeds, a seed that did not finish
    counting as inf (``search_spaces.lr_stage.lowest_mean``, the learning-rate stage's rule);
    an arm none of whose points finished every seed has none."""
    from search_spaces.lr_stage import lowest_mean  # torch-free; not loaded for --help

    ran = with_outcome(trials)
    out = {}
    for arm, group in ran.groupby("arm", sort=True):
        losses: dict[tuple[str, ...], list[float]] = {}
        for _, row in group.sort_values(list(tuned), kind="stable").iterrows():
            finished = row["status"] == Status.FINISHED
            loss = float(row.get(Metric.FINAL_VAL_LOSS, math.inf)) if finished else math.inf
            losses.setdefault(point_of(row, tuned), []).append(loss)
        best = lowest_mean(losses)
        if best is not None:
            out[str(arm)] = best
    return out


def _at_best(
    trials: pd.DataFrame, best: Mapping[str, tuple[str, ...]], tuned: Sequence[str]
) -> pd.Series:
    """Which trials sit at their arm's best point (True for every trial of an arm with none)."""
    return pd.Series(
        [
            str(row["arm"]) not in best or point_of(row, tuned) == best[str(row["arm"])]
            for _, row in trials.iterrows()
        ],
        index=trials.index,
        dtype=bool,
    )


@dataclass(frozen=True)
class TrialView:
    """A sweep's trials as every section reads them. Each frame keeps the record's index and
    columns (nothing is filled into them), with each trial's arm labelled. A tuned grid's
    learning-rate stage trials are in ``labelled`` and ``stage`` only: the comparison's frames
    hold the trials at each arm's chosen value. Likewise a search's with settings tuned per arm
    (``tuned``): the comparison's frames hold each arm's trials at its best point, ``labelled``
    and ``sampled`` every point's."""

    labelled: pd.DataFrame
    """Every trial, its arm labelled (``with_arms``)."""
    configured: pd.DataFrame
    """The trials with a full configuration: all but the infeasible ones (and the stage's)."""
    comparable: pd.DataFrame
    """The trials whose final metrics a comparison may use (``reports.outcomes.comparable``)."""
    outcome: pd.DataFrame
    """The trials that trained to an outcome: the denominators of divergence rates."""
    step_ms: pd.Series
    """Per trial (``labelled``'s index): milliseconds per training step (``step_ms``)."""
    stage: pd.DataFrame = field(default_factory=pd.DataFrame)
    """A tuned grid's learning-rate stage trials, labelled, with the arm each tunes
    (``stage_arm``) and the value it trained (``stage_value``); empty for any other sweep."""
    tuned: tuple[str, ...] = ()
    """A search's settings tuned per arm (``tuned_keys``): the comparison's frames hold each
    arm's trials at its best point (``best_points``) only; empty for any other sweep."""
    sampled: pd.DataFrame = field(default_factory=pd.DataFrame)
    """The comparable trials at every point a search sampled (``comparable`` before each
    arm's best point is selected): what the search section reads."""
    chosen: tuple[str, ...] = ()
    """The settings each arm chose for itself, which an arm and its baseline may differ in: a
    search's ``tuned`` keys and a tuned grid's stage parameter (each arm at its own best)."""


def normalize(
    trials: pd.DataFrame,
    stage: StageKeys | None = None,
    tuned: Sequence[str] = (),
    stage_param: str | None = None,
) -> TrialView:
    """The view of a sweep's recorded trial frame (``SweepData.trials``) every section reads;
    ``stage``: its learning-rate stage's trials (``stage_keys``), left out of the comparison;
    ``tuned``: a search's settings tuned per arm (``tuned_keys``), the comparison taking each
    arm at its best point; ``stage_param``: the setting a tuned grid's stage chose per arm."""
    labelled = with_arms(trials, tuned)
    stage = stage or {}
    in_stage = labelled["key"].isin(list(stage)) if "key" in labelled else None
    compared = labelled if in_stage is None else labelled[~in_stage]
    sampled = comparable(compared)
    best: Mapping[str, tuple[str, ...]] = {}
    if tuned and not compared.empty:
        best = best_points(configured(compared), tuned)
        compared = compared[_at_best(compared, best, tuned)]
    staged = labelled.iloc[0:0] if in_stage is None else labelled[in_stage]
    staged = staged.assign(
        **{
            STAGE_ARM: [stage[k][0] for k in staged.get("key", [])],
            STAGE_VALUE: [stage[k][1] for k in staged.get("key", [])],
        }
    )
    done = comparable(compared)
    if tuned and not done.empty:  # an arm with no best point has nothing to compare
        done = done[done["arm"].isin(list(best))]
    return TrialView(
        labelled=labelled,
        configured=configured(compared),
        comparable=done,
        outcome=with_outcome(compared),
        step_ms=step_ms(labelled),
        stage=staged,
        tuned=tuple(tuned),
        sampled=sampled,
        chosen=(*tuned, *([stage_param] if stage and stage_param else [])),
    )
