"""Constructed sweeps for the report tests: trial rows and a ``SweepData`` built in memory, in the
shape ``reports.load`` reads from MLflow, so a test states exactly which runs a report sees."""

from __future__ import annotations

from typing import Any

import pandas as pd

from record.schema import BEST_VAL_LOSS, RUN_STATUS, Metric, Status
from reports.load import TRIAL_COLUMNS, SweepData

START = pd.Timestamp("2026-01-01", tz="UTC")

# A small, valid configuration (the columns the sections read), as flattened params.
CONFIG: dict[str, Any] = {
    "model.residual": "standard",
    "model.placement": "pre",
    "model.norm": "rmsnorm",
    "model.n_layers": 4,
    "model.d_model": 32,
    "model.n_heads": 2,
    "model.vocab_size": 256,
    "model.seq_len": 32,
    "model.tie_embeddings": True,
    "model.pos": "rope",
    "train.max_steps": 20,
    "train.batch_size": 4,
    "train.lr": 0.001,
}


def trial(
    arm: str,
    seed: int,
    loss: float | None,
    status: Status = Status.FINISHED,
    reason: str | None = None,
    step: int | None = 20,
    **config: Any,
) -> dict[str, Any]:
    """One trial row: ``arm``'s ``seed`` ended in ``status`` with final loss ``loss`` (None:
    no final loss recorded). ``config`` overrides ``CONFIG`` (dotted names as keyword names
    with ``__`` for the dot: ``model__n_layers=8``)."""
    params = {**CONFIG, **{k.replace("__", "."): v for k, v in config.items()}}
    params["train.seed"] = seed
    d, n = params["model.d_model"], params["model.n_layers"]
    metrics = {
        Metric.FINAL_PARAMS: 12 * n * d * d + params["model.vocab_size"] * d,
        Metric.FINAL_TOKENS_PER_S: 1000.0,
        Metric.FINAL_WALL_S: 10.0,
    }
    if loss is not None:
        metrics[Metric.FINAL_VAL_LOSS] = loss
        metrics[BEST_VAL_LOSS] = loss
    return {
        "run_id": f"{arm}-{seed}-{n}-{d}",
        "status": status.value,
        "reason": reason,
        "status_step": step,
        "run_status": RUN_STATUS[status],
        "key": f"key-{arm}-{seed}-{n}-{d}",
        "arm": arm,
        "seed": seed,
        "node": "node-1",
        "hardware": "cpu",
        "git_commit": "0123456789abcdef",
        "version": "0.1.0",
        "start": START,
        "end": START + pd.Timedelta(minutes=1),
        **params,
        **metrics,
    }


def sweep(rows: list[dict[str, Any]], **fields: Any) -> SweepData:
    """A ``SweepData`` of these trial rows under one finished parent run."""
    trials = pd.DataFrame(rows) if rows else pd.DataFrame(columns=list(TRIAL_COLUMNS))
    for column in ("seed", "status_step"):
        trials[column] = trials[column].astype("Int64")
    parents = pd.DataFrame(
        [
            {
                "run_id": "parent",
                "run_status": "FINISHED",
                "start": START,
                "end": START + pd.Timedelta(hours=1),
                "command": "nas sweep constructed",
                "space": "constructed",
                "versions": {"python": "3.11"},
                "plans": len(fields.get("plans", [])),
            }
        ]
    )
    empty_curves = pd.DataFrame(columns=["run_id", "metric", "step", "value"])
    empty_profiles = pd.DataFrame(
        columns=["run_id", "block", "output_norm", "stream_norm", "grad_norm"]
    )
    base = {
        "name": "constructed",
        "uri": "sqlite:///constructed.db",
        "parents": parents,
        "space": {"kind": "grid"},
        "trials": trials,
        "curves": empty_curves,
        "profiles": empty_profiles,
    }
    return SweepData(**{**base, **fields})
