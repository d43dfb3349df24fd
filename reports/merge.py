"""Several sweeps as one: ``nas report A B …`` reads each sweep (from one store or several) and
reports their trials together.

What makes two trials the same arm is their configuration, never their names: a sweep's arm
names are its own (``standard`` in one sweep, ``standard/n_layers=4`` in another, or one name
for two configurations). A configuration keeps the name its trials carry where that name is
unambiguous across the sweeps; otherwise its arm is named by its values on the axes that vary
(``reports.normalize.with_arms``, when the merged ``SweepData`` is built).

A trial recorded more than once (the same run read through two copies of a store, or the same
configuration and seed in a sweep and its extension) counts once, so a sweep reported together
with its own extension gives the extended sweep's table. Sweeps that ran the same design under
different data, lengths or hardware precision hold different configurations: their trials form
separate arms, which are never paired by seed nor compared; ``separating_keys`` names what
kept them apart, for the report to say.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pandas as pd

from record.redact import redact
from record.schema import SETTLED
from reports.ablation import WIRING_KEYS
from reports.normalize import PARAM_PREFIXES, SEED_KEY
from reports.sweep import SweepData, site_arrays

SWEEP_COLUMN = "sweep"  # on merged trials and parents: the sweep(s) a row came from
SOURCES_SEP = ", "  # between the sweeps that hold one trial
PRECISION_KEY = "train.precision"


def sweep_label(data: SweepData, one_store: bool) -> str:
    """How a sweep is named in a report over several: its name, and its store where the
    sweeps come from more than one."""
    return data.name if one_store else f"{data.name}@{redact(data.uri)}"


def merge_sweeps(datas: Sequence[SweepData]) -> SweepData:
    """One ``SweepData`` over every trial of ``datas``, each trial once (``SWEEP_COLUMN``
    says where it came from); a single sweep is returned as it is."""
    if len(datas) == 1:
        return datas[0]
    one_store = len({d.uri for d in datas}) == 1
    labels = [sweep_label(d, one_store) for d in datas]
    trials = _once(
        pd.concat(
            [
                d.trials.assign(**{SWEEP_COLUMN: label})
                for d, label in zip(datas, labels, strict=True)
            ],
            ignore_index=True,
        )
    )
    trials = _arms_by_configuration(_hardware_precision(trials))
    kept = set(trials["run_id"])
    parents = _once_by(
        pd.concat(
            [d.parents.assign(**{SWEEP_COLUMN: la}) for d, la in zip(datas, labels, strict=True)],
            ignore_index=True,
        ),
        "run_id",
    ).sort_values("start", kind="stable", ignore_index=True)
    return SweepData(
        name=" + ".join(dict.fromkeys(labels)),
        uri=datas[-1].uri if one_store else "several stores (see the sweeps table)",
        parents=parents,
        space=next((d.space for d in reversed(datas) if d.space is not None), None),
        trials=trials,
        curves=_kept(pd.concat([d.curves for d in datas], ignore_index=True), kept),
        profiles=_kept(pd.concat([d.profiles for d in datas], ignore_index=True), kept),
        **site_arrays(datas, kept),
        skipped=[s for d in datas for s in d.skipped],
        # a parent read through two stores holds its plans once
        plans=list({json.dumps(p, sort_keys=True): p for d in datas for p in d.plans}.values()),
        superseded=sum(d.superseded for d in datas),
        sweeps=tuple(dict.fromkeys(labels)),
        lr_stage=_merged_stage([d.lr_stage for d in datas if d.lr_stage]),
        # each check once (a check's name is a hash of what it checked)
        coordchecks=tuple({c.name: c for d in datas for c in d.coordchecks}.values()),
    )


def _kept(frame: pd.DataFrame, kept: set[str]) -> pd.DataFrame:
    if frame.empty:
        return frame
    return frame[frame["run_id"].isin(kept)].drop_duplicates(ignore_index=True)


def _once(trials: pd.DataFrame) -> pd.DataFrame:
    """Each trial key once: the same run read twice (two copies of a store), or the same
    configuration and seed trained in two sweeps, is one observation, not two. The settled run
    is kept over an unsettled one, then the one that ended last."""
    settled = trials["status"].isin([s.value for s in SETTLED])
    order = trials.assign(_settled=settled).sort_values(
        ["_settled", "end"], kind="stable", na_position="first"
    )
    return _once_by(order, "key").drop(columns="_settled")


def _once_by(frame: pd.DataFrame, column: str) -> pd.DataFrame:
    """The last row of each ``column`` value, in the frame's original order, its
    ``SWEEP_COLUMN`` naming every sweep that holds one."""
    holders = frame.groupby(column, sort=False)[SWEEP_COLUMN].agg(
        lambda s: SOURCES_SEP.join(dict.fromkeys(s))
    )
    once = frame.drop_duplicates(column, keep="last").sort_index()
    return once.assign(**{SWEEP_COLUMN: once[column].map(holders)}).reset_index(drop=True)


def sweeps_holding(trials: pd.DataFrame) -> pd.DataFrame:
    """One row per (trial, sweep that holds it): what a per-sweep grouping reads."""
    split = trials[SWEEP_COLUMN].astype(str).str.split(SOURCES_SEP, regex=False)
    return trials.assign(**{SWEEP_COLUMN: split}).explode(SWEEP_COLUMN)


def _hardware_precision(trials: pd.DataFrame) -> pd.DataFrame:
    """``train.precision: auto`` means bf16-mixed on a GPU and 32-bit on a CPU: where the
    merged trials ran on both, "auto" is two configurations, named by where they ran."""
    if PRECISION_KEY not in trials or "hardware" not in trials:
        return trials
    on_gpu = trials["hardware"].astype(str).str.startswith("GPU")
    auto = trials[PRECISION_KEY].astype(str) == "auto"
    if on_gpu[auto].nunique() < 2:
        return trials
    out = trials.copy()
    out.loc[auto & on_gpu, PRECISION_KEY] = "auto (GPU: bf16-mixed)"
    out.loc[auto & ~on_gpu, PRECISION_KEY] = "auto (CPU: 32-true)"
    return out


def config_columns(trials: pd.DataFrame) -> list[str]:
    """The configuration's columns: every recorded param but the seed."""
    return [c for c in trials.columns if c.startswith(PARAM_PREFIXES) and c != SEED_KEY]


def _arms_by_configuration(trials: pd.DataFrame) -> pd.DataFrame:
    """Each configuration's trials share one arm name: the name they carry when every trial
    of the configuration carries it and no other configuration does; otherwise none, so that
    the normalize step names the arm by its varied values."""
    if trials.empty:
        return trials
    config = trials[config_columns(trials)].astype(str).agg("\x1f".join, axis=1)
    names = trials["arm"].astype(str)
    per_config = names.groupby(config).agg(lambda s: frozenset(s))
    per_name = config.groupby(names).nunique()
    keep = {
        c: next(iter(n))
        for c, n in per_config.items()
        if len(n) == 1 and per_name[next(iter(n))] == 1
    }
    out = trials.copy()
    out["arm"] = [keep.get(c, "") for c in config]
    return out


def separating_keys(trials: pd.DataFrame) -> dict[str, list[str]]:
    """Non-wiring config keys whose values never overlap between two of the merged sweeps
    (different data, lengths, precision...): key -> each sweep's values, as text. Their trials
    are different configurations: no arm, seed pairing or comparison spans them."""
    if SWEEP_COLUMN not in trials:
        return {}
    trials = sweeps_holding(trials)
    if trials[SWEEP_COLUMN].nunique() < 2:
        return {}
    out = {}
    for key in config_columns(trials):
        if key in WIRING_KEYS:
            continue
        values = trials.groupby(SWEEP_COLUMN)[key].agg(lambda s: frozenset(s.astype(str)))
        sets = list(values)
        if any(a.isdisjoint(b) for i, a in enumerate(sets) for b in sets[i + 1 :]):
            out[key] = [f"{sweep}: {', '.join(sorted(v))}" for sweep, v in values.items()]
    return out


def _merged_stage(stages: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The learning-rate stages of the merged sweeps as one: the latest one's field and grid,
    and every sweep's stage trials (keys by arm and value), so none of them is compared as an
    arm of its own."""
    if not stages:
        return None
    arms: dict[str, Any] = {}
    for stage in stages:
        for arm, entry in (stage.get("arms") or {}).items():
            into = arms.setdefault(arm, {**entry, "keys": {}})
            for value, keys in (entry.get("keys") or {}).items():
                into["keys"].setdefault(value, []).extend(keys)
    return {**stages[-1], "arms": arms}
