"""The only module that writes MLflow: the sweep's experiment and parent run, one nested child
run per trial (found again, never duplicated, when a trial is retried or resumed), its params,
metrics with steps, artifacts and tags.

MLflow is imported inside the functions: ``nas --help`` must not pay for it.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PARENT_TAG = "mlflow.parentRunId"  # MLflow's own tag: the UI nests the child under it


def resolve_tracking_uri(cli: str | None = None) -> str:
    """``--tracking-uri``, else ``MLFLOW_TRACKING_URI``, else MLflow's own default: a SQLite
    file in the working directory, so ``mlflow ui`` there shows the runs."""
    if cli:
        return cli
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{Path.cwd() / 'mlflow.db'}"


def config_hash(params: Mapping[str, Any]) -> str:
    """A stable short hash of a flattened configuration (seed included)."""
    return hashlib.sha256(json.dumps(dict(params), sort_keys=True).encode()).hexdigest()[:12]


def _client(uri: str) -> Any:
    import logging

    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    logging.getLogger("mlflow.store.db.utils").setLevel(logging.WARNING)  # migration chatter
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


@dataclass(frozen=True)
class SweepRecord:
    """Where a sweep's runs go; passed to every trial (plain strings, so it pickles)."""

    uri: str
    experiment_id: str
    parent_run_id: str
    sweep: str


def open_sweep(uri: str, sweep: str, key: str, tags: Mapping[str, str]) -> SweepRecord:
    """Get or create the sweep's experiment and its parent run, in the driver before any trial
    starts (a fresh SQLite store migrated by two trials at once races). ``key`` identifies this
    sweep's state on disk: a resumed sweep finds its parent run again by it."""
    client = _client(uri)
    exp = client.get_experiment_by_name(sweep)
    exp_id = exp.experiment_id if exp else client.create_experiment(sweep)
    found = client.search_runs([exp_id], f"tags.`nas.sweep_key` = '{key}'", max_results=1)
    if found:
        run_id = found[0].info.run_id
        client.update_run(run_id, status="RUNNING")
    else:
        run = client.create_run(
            exp_id,
            tags={"nas.sweep": sweep, "nas.sweep_key": key, "nas.role": "sweep", **tags},
            run_name=sweep,
        )
        run_id = run.info.run_id
    return SweepRecord(uri, exp_id, run_id, sweep)


def log_sweep_text(record: SweepRecord, text: str, name: str) -> None:
    """A text file (the space, as YAML) on the parent run."""
    _client(record.uri).log_text(record.parent_run_id, text, name)


def log_report(uri: str, run_id: str, folder: Path, artifact_path: str = "report") -> None:
    """A written report (its folder: pages and figures) on the sweep's parent run."""
    _client(uri).log_artifacts(run_id, str(folder), artifact_path=artifact_path)


def close_sweep(record: SweepRecord, summary: Mapping[str, float], status: str) -> None:
    """End the parent run and any child left RUNNING (a trial killed mid-way)."""
    client = _client(record.uri)
    for run in _children(client, record):
        if run.info.status == "RUNNING":
            client.set_terminated(run.info.run_id, status="KILLED")
    _log_metrics(client, record.parent_run_id, summary, step=0)
    client.set_terminated(record.parent_run_id, status=status)


def _children(client: Any, record: SweepRecord) -> list[Any]:
    query = f"tags.`{PARENT_TAG}` = '{record.parent_run_id}'"
    return list(client.search_runs([record.experiment_id], query, max_results=10_000))


def _log_metrics(client: Any, run_id: str, metrics: Mapping[str, float], step: int) -> None:
    from mlflow.entities import Metric

    now = int(time.time() * 1000)
    batch = [Metric(k, float(v), now, step) for k, v in metrics.items()]
    if batch:
        client.log_batch(run_id, metrics=batch)


class TrialRun:
    """A trial's child run: found by (parent, trial key) or created once, params logged once."""

    def __init__(
        self,
        record: SweepRecord,
        trial_key: str,
        params: Mapping[str, Any],
        tags: Mapping[str, str],
    ) -> None:
        from mlflow.entities import Param

        self.client = _client(record.uri)
        query = f"tags.`{PARENT_TAG}` = '{record.parent_run_id}' and tags.`nas.trial_key` = '{trial_key}'"
        found = self.client.search_runs([record.experiment_id], query, max_results=1)
        self.logged: set[tuple[str, int]] = set()
        if found:  # a retried or resumed trial continues its own run
            self.run_id = found[0].info.run_id
            self.client.update_run(self.run_id, status="RUNNING")
            self.logged = self._history(found[0].data.metrics)
            return
        all_tags = {
            PARENT_TAG: record.parent_run_id,
            "nas.sweep": record.sweep,
            "nas.trial_key": trial_key,
            "nas.role": "trial",
            "nas.config_hash": config_hash(params),
            **tags,
        }
        run = self.client.create_run(
            record.experiment_id, tags=all_tags, run_name=tags.get("nas.arm", trial_key)
        )
        self.run_id = run.info.run_id
        self.client.log_batch(self.run_id, params=[Param(k, str(v)) for k, v in params.items()])

    def _history(self, keys: Mapping[str, float]) -> set[tuple[str, int]]:
        """(metric, step) pairs the run already holds."""
        return {(k, m.step) for k in keys for m in self.client.get_metric_history(self.run_id, k)}

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        """Log each metric once per step: a trial resumed from a checkpoint recomputes steps it
        had logged before the interruption (and re-runs the validation it was saved in); the
        first value recorded for a step is kept."""
        new = {k: v for k, v in metrics.items() if (k, step) not in self.logged}
        self.logged.update((k, step) for k in new)
        _log_metrics(self.client, self.run_id, new, step)

    def log_files(self, files: Sequence[Path], folder: str) -> None:
        for f in files:
            self.client.log_artifact(self.run_id, str(f), artifact_path=folder)

    def end(self, status: str = "FINISHED") -> None:
        self.client.set_terminated(self.run_id, status=status)
