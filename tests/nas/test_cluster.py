"""A real two-node Ray cluster on loopback (``ray start --head`` plus a second ``ray start
--address``, each with its own ports and temp folder, token authentication on) and a real
``mlflow server`` on PostgreSQL on 127.0.0.1: a sweep runs through ``--address`` with a trial
on each node, loses the worker node mid-way, and every trial is recorded once on the server.

Ray's ``ray stop`` would stop every Ray process of the user, so the test stops its own: the
processes whose command line names its temp folders, by process id."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from record.schema import PROFILE_FOLDER, Metric, Status, Tag
from tests.ray_cluster import BIN, free_port, node_args, pids_naming, stop
from tests.tracking_server import TrackingServer


@pytest.fixture
def cluster(
    pg_server: TrackingServer, tmp_path: Path
) -> Iterator[tuple[str, str, dict[str, str], Path]]:
    """(Ray address, MLflow URL, environment with the cluster's token, the worker node's temp
    folder: what names its processes)."""
    # Ray's Unix sockets live in the temp folder, whose path must stay short (108 bytes).
    root = Path(tempfile.mkdtemp(prefix="nas-ray-", dir="/tmp"))
    env = {
        **os.environ,
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": secrets.token_hex(32),
        "MLFLOW_DISABLE_TELEMETRY": "true",
    }
    port = free_port()
    address = f"127.0.0.1:{port}"
    try:
        head = [
            str(BIN / "ray"),
            "start",
            "--head",
            "--node-ip-address=127.0.0.1",
            f"--port={port}",
            "--include-dashboard=false",
            *node_args("head", root),
        ]
        subprocess.run(head, env=env, check=True, capture_output=True, timeout=180)
        worker = [
            str(BIN / "ray"),
            "start",
            f"--address={address}",
            "--node-ip-address=127.0.0.1",
            *node_args("worker", root),
        ]
        subprocess.run(worker, env=env, check=True, capture_output=True, timeout=180)
        yield address, pg_server.url, env, root / "worker"
    finally:
        stop(pids_naming(str(root)))
        shutil.rmtree(root, ignore_errors=True)


SPACE = """\
description: two trials, one per node, long enough to lose a node mid-way
base: {model.d_model: 32, model.n_heads: 2, model.n_layers: 2, model.seq_len: 64,
       train.batch_size: 4, train.max_steps: 120, train.val_every: 30, train.val_batches: 2,
       train.warmup_steps: 2, train.diagnostics_batch: 2, data.max_bytes: 1000000}
seeds: [0, 1]
arms: {standard: {model.residual: standard}}
"""


def _trial_runs(url: str) -> tuple[Any, list[Any]]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=url)
    exp = client.get_experiment_by_name("nodes")
    runs = [] if exp is None else client.search_runs([exp.experiment_id], max_results=100)
    return client, [r for r in runs if r.data.tags.get(Tag.ROLE) == "trial"]


def _validated(client: Any, run: Any) -> bool:
    return bool(client.get_metric_history(run.info.run_id, Metric.VAL_LOSS))


def test_a_sweep_spreads_over_both_nodes_and_survives_losing_one(
    cluster: tuple[str, str, dict[str, str], Path], tmp_path: Path
) -> None:
    """Two trials through ``--address``, one per node, into an MLflow server on PostgreSQL.
    Once both have validated (each has a checkpoint), every process of the worker node is
    killed: its trial is retried on the surviving node from its checkpoint into the same run.
    Both runs end finished, each validation recorded once, both on the head node by then."""
    address, url, env, worker_root = cluster
    (tmp_path / "space.yaml").write_text(SPACE)
    cmd = [sys.executable, "-m", "nas.cli", "sweep", str(tmp_path / "space.yaml"),
           "--name", "nodes", "--address", address, "--concurrency", "2",
           "--cpus-per-trial", "1", "--tracking-uri", url,
           "--storage-path", str(tmp_path / "shared")]  # fmt: skip
    log = (tmp_path / "out.txt").open("w")
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 300
        while True:
            assert proc.poll() is None, (tmp_path / "out.txt").read_text()[-3000:]
            assert time.monotonic() < deadline, "the trials did not both validate"
            client, trials = _trial_runs(url)
            if len(trials) == 2 and all(_validated(client, r) for r in trials):
                break
            time.sleep(0.5)
        nodes = {r.info.run_id: r.data.tags[Tag.NODE] for r in trials}
        assert len(set(nodes.values())) == 2  # one trial on each node
        stop(pids_naming(str(worker_root)))
        assert proc.wait(timeout=600) == 0, (tmp_path / "out.txt").read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
    client, trials = _trial_runs(url)
    assert sorted(r.info.run_id for r in trials) == sorted(nodes)  # the same two runs
    assert all(r.data.tags[Tag.STATUS] == Status.FINISHED.value for r in trials)
    assert all(r.info.status == "FINISHED" for r in trials)
    assert len({r.data.tags[Tag.NODE] for r in trials}) == 1  # the moved trial is on the head
    for r in trials:
        steps = [m.step for m in client.get_metric_history(r.info.run_id, Metric.VAL_LOSS)]
        assert sorted(steps) == [29, 59, 89, 119], steps  # each validation once
    # the dilution artifacts reached the server's artifact store from the workers
    assert all(client.list_artifacts(r.info.run_id, PROFILE_FOLDER) for r in trials)
    assert (tmp_path / "mlflow.db").exists() is False  # nothing went to the local default
