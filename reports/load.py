"""The only module that reads MLflow. (The report issue builds its data frames here; for now it
reads what ``nas train --from-run`` needs.)"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RecordedRun:
    run_id: str
    params: dict[str, str]
    tags: dict[str, str]
    metrics: dict[str, float]


def load_run(uri: str, run_id: str) -> RecordedRun:
    """One run's params, tags and latest metrics; ValueError when it cannot be read."""
    import os

    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    try:
        run = MlflowClient(tracking_uri=uri).get_run(run_id)
    except MlflowException as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else "not found"
        raise ValueError(f"--from-run {run_id}: no such run in {uri} ({first})") from None
    return RecordedRun(run_id, dict(run.data.params), dict(run.data.tags), dict(run.data.metrics))
