"""The only module that reads MLflow: a sweep's runs as data frames (everything after this is a
pure function over them), the sweeps a store holds, and single runs for ``nas train
--from-run``."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

CURVE_METRICS = ("val/loss", "val/bpb")


@dataclass(frozen=True)
class RecordedRun:
    run_id: str
    params: dict[str, str]
    tags: dict[str, str]
    metrics: dict[str, float]


@dataclass(frozen=True)
class SweepData:
    """One sweep as read from the store.

    - ``parents``: one row per ``nas sweep`` invocation (run_id, status, start, end, command,
      space, versions, and its ``sweep/*`` metrics)
    - ``trials``: one row per trial run: run_id, status, key, arm, seed, infeasible (the reason,
      or ""), node, hardware, git_commit, version, start, end, every param under its dotted
      name (numbers parsed), every latest metric under its name, and best_val_loss
    - ``curves``: run_id, metric, step, value for the validation metrics
    - ``profiles``: run_id, block, output_norm, stream_norm, grad_norm of each trial's last
      dilution profile; ``depth_weights``: run_id -> (site x source) softmax weights
    """

    name: str
    uri: str
    parents: pd.DataFrame
    space: dict[str, Any] | None
    trials: pd.DataFrame
    curves: pd.DataFrame
    profiles: pd.DataFrame
    depth_weights: dict[str, np.ndarray] = field(default_factory=dict)
    skipped: list[dict[str, str]] = field(default_factory=list)  # grid cells never launched


def _client(uri: str) -> Any:
    import logging

    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # one bar per file
    logging.getLogger("mlflow.store.db.utils").setLevel(logging.WARNING)
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def first_line(err: BaseException) -> str:
    """An exception as one line (a usage error or a warning must not be a traceback)."""
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def load_run(uri: str, run_id: str) -> RecordedRun:
    """One run's params, tags and latest metrics; ValueError when it cannot be read."""
    from mlflow.exceptions import MlflowException

    try:
        run = _client(uri).get_run(run_id)
    except MlflowException as err:
        raise ValueError(f"--from-run {run_id}: no such run in {uri} ({first_line(err)})") from None
    return RecordedRun(run_id, dict(run.data.params), dict(run.data.tags), dict(run.data.metrics))


def _sweep_runs(client: Any, experiment_id: str, role: str) -> list[Any]:
    query = f"tags.`nas.role` = '{role}'"
    return list(client.search_runs([experiment_id], query, max_results=50_000))


def list_sweeps(uri: str) -> list[tuple[str, int]]:
    """(sweep name, number of trial runs) for every experiment holding a ``nas sweep``."""
    client = _open(uri)
    found = []
    for exp in client.search_experiments():
        if _sweep_runs(client, exp.experiment_id, "sweep"):
            found.append((exp.name, len(_sweep_runs(client, exp.experiment_id, "trial"))))
    return sorted(found)


def _open(uri: str) -> Any:
    """A client whose store answers; ValueError (one line) when it cannot be opened. A SQLite
    file that does not exist is refused rather than created: reading must not write."""
    if uri.startswith("sqlite:///"):
        path = Path(uri.removeprefix("sqlite:///"))
        if not path.is_absolute():
            path = Path.cwd() / path
        if not path.is_file():
            raise ValueError(f"--tracking-uri {uri}: no MLflow store there (no such file)")
    client = _client(uri)
    try:
        client.search_experiments(max_results=1)
    except Exception as err:  # sqlalchemy, OSError, MLflow's own: all mean "cannot open"
        raise ValueError(
            f"--tracking-uri {uri}: cannot open the MLflow store ({first_line(err)})"
        ) from None
    return client


def load_sweep(uri: str, name: str) -> SweepData:
    client = _open(uri)
    exp = client.get_experiment_by_name(name)
    parents = _sweep_runs(client, exp.experiment_id, "sweep") if exp else []
    if not parents:
        known = ", ".join(n for n, _ in list_sweeps(uri)) or "none"
        raise ValueError(f"no sweep named {name!r} in {uri}; sweeps there: {known}")
    trials = _sweep_runs(client, exp.experiment_id, "trial")
    curves = pd.DataFrame(
        [
            {"run_id": r.info.run_id, "metric": key, "step": m.step, "value": m.value}
            for r in trials
            for key in CURVE_METRICS
            if key in r.data.metrics
            for m in client.get_metric_history(r.info.run_id, key)
        ],
        columns=["run_id", "metric", "step", "value"],
    )
    frame = pd.DataFrame([_trial_row(r) for r in trials])
    if not frame.empty:
        best = curves[curves.metric == "val/loss"].groupby("run_id")["value"].min()
        frame["best_val_loss"] = frame["run_id"].map(best)
    profiles, weights = _profiles(client, trials)
    latest = max(parents, key=lambda r: r.info.start_time)
    return SweepData(
        name=name,
        uri=uri,
        parents=pd.DataFrame([_parent_row(r) for r in parents]).sort_values("start"),
        space=_yaml_artifact(client, latest.info.run_id, "space.yaml"),
        trials=frame,
        curves=curves,
        profiles=profiles,
        depth_weights=weights,
        skipped=_yaml_artifact(client, latest.info.run_id, "skipped.yaml") or [],
    )


def _number(text: str) -> Any:
    """Params come back as strings: numbers become numbers, the rest stays text."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return {"True": True, "False": False}.get(text, text)


def _trial_row(run: Any) -> dict[str, Any]:
    tags = run.data.tags
    return {
        "run_id": run.info.run_id,
        "status": run.info.status,
        "key": tags.get("nas.trial_key", ""),
        "arm": tags.get("nas.arm", ""),
        "seed": int(tags.get("nas.seed", run.data.params.get("train.seed", 0)) or 0),
        "infeasible": tags.get("nas.infeasible", ""),
        "node": tags.get("nas.node", ""),
        "hardware": tags.get("nas.hardware", ""),
        "git_commit": tags.get("nas.git_commit", ""),
        "version": tags.get("nas.version", ""),
        "start": pd.to_datetime(run.info.start_time, unit="ms", utc=True),
        "end": pd.to_datetime(run.info.end_time, unit="ms", utc=True)
        if run.info.end_time
        else pd.NaT,
        **{k: _number(v) for k, v in run.data.params.items()},
        **run.data.metrics,
    }


def _parent_row(run: Any) -> dict[str, Any]:
    tags = run.data.tags
    return {
        "run_id": run.info.run_id,
        "status": run.info.status,
        "start": pd.to_datetime(run.info.start_time, unit="ms", utc=True),
        "end": pd.to_datetime(run.info.end_time, unit="ms", utc=True)
        if run.info.end_time
        else pd.NaT,
        "command": tags.get("nas.command", ""),
        "space": tags.get("nas.space", ""),
        "versions": json.loads(tags.get("nas.versions", "{}")),
        **run.data.metrics,
    }


def _yaml_artifact(client: Any, run_id: str, name: str) -> Any:
    """A YAML file the sweep logged on its parent run; None when there is none (a sweep
    recorded by an older version)."""
    import yaml

    with tempfile.TemporaryDirectory() as tmp:
        try:
            path = client.download_artifacts(run_id, name, tmp)
        except Exception:  # MLflow raises its own or OSError for a missing artifact
            return None
        return yaml.safe_load(Path(path).read_text())


def _profiles(client: Any, trials: list[Any]) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """Each trial's last dilution profile (the JSON with the highest step)."""
    rows: list[dict[str, Any]] = []
    weights: dict[str, np.ndarray] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for run in trials:
            files = [a.path for a in client.list_artifacts(run.info.run_id, "dilution")]
            files = sorted(f for f in files if f.endswith(".json"))
            if not files:
                continue
            path = client.download_artifacts(run.info.run_id, files[-1], tmp)
            data = json.loads(Path(path).read_text())
            n = int(data["n_layers"])
            grad = data.get("grad_norm") or [np.nan] * n
            for block in range(n):
                rows.append(
                    {
                        "run_id": run.info.run_id,
                        "block": block + 1,
                        "output_norm": _float(data["output_norm"][block]),
                        "stream_norm": _float(data["stream_norm"][block]),
                        "grad_norm": _float(grad[block]),
                    }
                )
            if data.get("depth_weights") is not None:
                weights[run.info.run_id] = np.array(data["depth_weights"], dtype=float)
    columns = ["run_id", "block", "output_norm", "stream_norm", "grad_norm"]
    return pd.DataFrame(rows, columns=columns), weights


def _float(x: Any) -> float:
    return float("nan") if x is None else float(x)
