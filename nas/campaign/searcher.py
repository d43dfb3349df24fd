"""The Optuna searcher of a ``search`` space, warm-started from the record: every trial an
earlier invocation settled is in the study before the first proposal (so ``--trials N`` above a
finished search continues the same study, the sampler seeing every earlier trial), and the
interrupted or failed ones are proposed again first (their key finds their run and checkpoint).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import optuna

from nas.store.tracking import RecordedTrial
from record.redact import redact
from record.schema import FINAL_OF, Metric, Status
from search_spaces.distributions import Choice, Distribution, Fixed, FloatRange, IntRange
from search_spaces.space import Space

STUDY = "nas"
RERUN = (Status.KILLED, Status.FAILED, None)  # None: a run a crash left RUNNING


def optuna_distribution(d: Distribution) -> Any:
    """One Optuna distribution per search-space distribution; an unknown kind is an error,
    never dropped."""
    od = optuna.distributions

    if isinstance(d, Choice):
        return od.CategoricalDistribution(list(d.values))
    if isinstance(d, Fixed):
        return od.CategoricalDistribution([d.value])
    if isinstance(d, IntRange):
        return od.IntDistribution(d.low, d.high, log=d.log)
    if isinstance(d, FloatRange):
        return od.FloatDistribution(d.low, d.high, log=d.log)
    raise TypeError(f"no Optuna distribution for {type(d).__name__}")


def _value(recorded: str, dist: Any) -> Any:
    """A param as MLflow stored it (a string) back in the distribution's own type."""
    od = optuna.distributions

    if isinstance(dist, od.CategoricalDistribution):
        return next(c for c in dist.choices if str(c) == recorded)
    if isinstance(dist, od.IntDistribution):
        return int(recorded)
    return float(recorded)


def recorded_point(trial: RecordedTrial, dists: Mapping[str, Any]) -> dict[str, Any] | None:
    """The sampled point of a recorded trial, or None when it does not fit this space (an
    earlier plan's distributions)."""
    try:
        return {k: _value(trial.params[k], d) for k, d in dists.items()}
    except (KeyError, StopIteration, ValueError):
        return None


def objective_values(
    trial: RecordedTrial, space: Space, worst: Mapping[str, float]
) -> list[float] | None:
    """What the study is told about a settled trial, in objective order: its final values; the
    worst ones for an infeasible or diverged trial; a stopped trial's last validation."""
    if trial.status in (Status.INFEASIBLE, Status.DIVERGED):
        return [worst[o.key] for o in space.objectives]
    values = []
    for o in space.objectives:
        metric = FINAL_OF[o.metric]
        if trial.status != Status.FINISHED and o.metric == Metric.VAL_LOSS:
            metric = Metric.VAL_LOSS  # the latest validation of a trial that stopped early
        values.append(trial.metrics.get(metric, math.nan))
    return values if all(math.isfinite(v) for v in values) else None


def searcher(
    space: Space,
    recorded: Mapping[str, RecordedTrial],
    worst: Mapping[str, float],
    seed: int,
    storage_url: str | None = None,
    study_name: str = STUDY,
) -> Any:
    """The searcher over ``space``: its study in memory, or in the database at ``storage_url``
    (``--study-storage``: it outlives the storage path, optuna-dashboard browses it, another
    driver continues it), holding every trial the record settled."""
    from ray.tune.search.optuna import OptunaSearch

    dists = {k: optuna_distribution(d) for k, d in space.params.items()}
    # Seeded by how many trials the record holds: deterministic for a given record, and a
    # continued study does not replay the first invocation's random start-up proposals.
    sampler_seed = len(recorded)
    sampler = (
        optuna.samplers.TPESampler(seed=sampler_seed)
        if space.sampler == "tpe"
        else optuna.samplers.RandomSampler(seed=sampler_seed)
    )
    storage = _storage(storage_url)
    directions: list[Literal["minimize", "maximize"]] = [
        "minimize" if o.mode == "min" else "maximize" for o in space.objectives
    ]
    study = optuna.create_study(
        storage=storage, study_name=study_name, directions=directions, load_if_exists=True
    )
    _check_directions(study, directions, storage_url)
    _fail_abandoned(study)
    _warm_start(study, dists, space, recorded, worst, seed)
    keys = [o.key for o in space.objectives]
    modes: list[str] = [o.mode for o in space.objectives]
    metric, mode = (keys[0], modes[0]) if len(keys) == 1 else (keys, modes)
    return OptunaSearch(
        space=dists,
        metric=metric,
        mode=mode,
        sampler=sampler,
        storage=storage,
        study_name=study_name,
    )


class _Storage(optuna.storages.RDBStorage):
    """Tune pickles the searcher into the storage path: its URL goes there without password."""

    def __getstate__(self) -> dict[Any, Any]:
        state = super().__getstate__()
        state["url"] = redact(state["url"])
        return state


def _storage(url: str | None) -> Any:
    return optuna.storages.InMemoryStorage() if url is None else _Storage(url)


def _check_directions(study: Any, directions: Sequence[str], url: str | None) -> None:
    found = [d.name.lower() for d in study.directions]
    if found != directions:
        raise ValueError(
            redact(
                f"--study-storage {url}: study {study.study_name!r} there optimizes {found}, "
                f"this space {directions}; give another --name"
            )
        )


def _fail_abandoned(study: Any) -> None:
    """Trials a killed driver left RUNNING in a stored study will never be told: FAIL them,
    so the sampler does not wait on them (the record re-runs their points)."""

    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        study._storage.set_trial_state_values(t._trial_id, optuna.trial.TrialState.FAIL)


def _warm_start(
    study: Any,
    dists: Mapping[str, Any],
    space: Space,
    recorded: Mapping[str, RecordedTrial],
    worst: Mapping[str, float],
    seed: int,
) -> None:
    """Add each recorded trial the study does not hold yet (a stored study already has those
    its earlier drivers told it), and enqueue the points to run again."""

    from nas.spec import proposal_identity

    held = {
        proposal_identity(space, t.params, seed)[0]
        for t in study.get_trials(deepcopy=False)
        if t.state != optuna.trial.TrialState.FAIL or t.params
    }
    for key, trial in recorded.items():
        point = recorded_point(trial, dists)
        if point is None:
            continue
        if trial.status in RERUN:
            study.enqueue_trial(point, skip_if_exists=True)
            continue
        if key in held:
            continue
        values = objective_values(trial, space, worst)
        state = optuna.trial.TrialState.COMPLETE if values else optuna.trial.TrialState.FAIL
        study.add_trial(
            optuna.trial.create_trial(
                state=state, values=values, params=point, distributions=dict(dists)
            )
        )


def remaining(space: Space, recorded: Mapping[str, RecordedTrial]) -> int:
    """Trials still to run for ``space.trials`` in all: the settled ones count."""
    settled = sum(t.status not in RERUN for t in recorded.values())
    return max(0, space.trials - settled)
