"""The Optuna searcher of a ``search`` space, warm-started from the record: every trial an
earlier invocation settled is in the study before the first proposal (so ``--trials N`` above a
finished search continues the same study, the sampler seeing every earlier trial), and the
interrupted or failed ones are proposed again first (their key finds their run and checkpoint).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

from nas.tracking import RecordedTrial
from reports.schema import FINAL_OF, Metric, Status
from search_spaces.distributions import Choice, Distribution, Fixed, FloatRange, IntRange
from search_spaces.space import Space

STUDY = "nas"
RERUN = (Status.KILLED, Status.FAILED, None)  # None: a run a crash left RUNNING


def optuna_distribution(d: Distribution) -> Any:
    """One Optuna distribution per search-space distribution; an unknown kind is an error,
    never dropped."""
    import optuna.distributions as od

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
    import optuna.distributions as od

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
        if trial.status != Status.FINISHED and o.metric == "val/loss":
            metric = Metric.VAL_LOSS  # the latest validation of a trial that stopped early
        values.append(trial.metrics.get(metric, math.nan))
    return values if all(math.isfinite(v) for v in values) else None


def searcher(
    space: Space, recorded: Mapping[str, RecordedTrial], worst: Mapping[str, float]
) -> Any:
    import optuna
    from ray.tune.search.optuna import OptunaSearch

    dists = {k: optuna_distribution(d) for k, d in space.params.items()}
    # Seeded by how many trials the record holds: deterministic for a given record, and a
    # continued study does not replay the first invocation's random start-up proposals.
    seed = len(recorded)
    sampler = (
        optuna.samplers.TPESampler(seed=seed)
        if space.sampler == "tpe"
        else optuna.samplers.RandomSampler(seed=seed)
    )
    storage = optuna.storages.InMemoryStorage()
    directions: list[Literal["minimize", "maximize"]] = [
        "minimize" if o.mode == "min" else "maximize" for o in space.objectives
    ]
    study = optuna.create_study(storage=storage, study_name=STUDY, directions=directions)
    _warm_start(study, dists, space, recorded, worst)
    keys = [o.key for o in space.objectives]
    modes: list[str] = [o.mode for o in space.objectives]
    metric, mode = (keys[0], modes[0]) if len(keys) == 1 else (keys, modes)
    return OptunaSearch(
        space=dists, metric=metric, mode=mode, sampler=sampler, storage=storage, study_name=STUDY
    )


def _warm_start(
    study: Any,
    dists: Mapping[str, Any],
    space: Space,
    recorded: Mapping[str, RecordedTrial],
    worst: Mapping[str, float],
) -> None:
    import optuna

    for trial in recorded.values():
        point = recorded_point(trial, dists)
        if point is None:
            continue
        if trial.status in RERUN:
            study.enqueue_trial(point)
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
