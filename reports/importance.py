"""Hyperparameter importance for a search's report: Optuna's PED-ANOVA over the finished
trials, each varied config key as one parameter."""

from __future__ import annotations

from typing import Any

import pandas as pd


def importance(done: pd.DataFrame, axes: list[str], key: str, mode: str) -> list[tuple[str, float]]:
    """(axis, importance) for objective column ``key`` (``mode`` "min" or "max"), most
    important first; empty where the trials are too few to say anything (fewer than 4) or
    Optuna cannot evaluate them."""
    if len(done) < 4 or not axes:
        return []
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="minimize" if mode == "min" else "maximize")
    dists = {k: _distribution(done[k]) for k in axes}
    for _, row in done.iterrows():
        params = {
            k: row[k]
            if not isinstance(d, optuna.distributions.CategoricalDistribution)
            else str(row[k])
            for k, d in dists.items()
        }
        study.add_trial(
            optuna.trial.create_trial(params=params, distributions=dists, value=float(row[key]))
        )
    try:
        evaluator = optuna.importance.PedAnovaImportanceEvaluator()
        found = optuna.importance.get_param_importances(study, evaluator=evaluator)
    except (ValueError, RuntimeError):
        return []
    return sorted(found.items(), key=lambda kv: -kv[1])


def _distribution(values: pd.Series) -> Any:
    """A numeric axis with more than two values as a float range (log where it spans more
    than 20x); any other as categorical."""
    import optuna

    if pd.api.types.is_numeric_dtype(values) and values.nunique() > 2:
        low, high = float(values.min()), float(values.max())
        return optuna.distributions.FloatDistribution(low, high, log=low > 0 and high / low > 20)
    return optuna.distributions.CategoricalDistribution(sorted(values.astype(str).unique()))
