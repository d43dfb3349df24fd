"""A real two-node Ray cluster on loopback (``ray start --head`` plus a second ``ray start
--address``, each with its own ports and temp folder, token authentication on) and a real
``mlflow server`` on 127.0.0.1: the ``smoke`` sweep runs through ``--address``, its trials run
on both nodes, and every trial is recorded once on the server.

Ray's ``ray stop`` would stop every Ray process of the user, so the test stops its own: the
processes whose command line names its temp folders, by process id."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pids_naming(text: str) -> list[int]:
    """Processes whose command line or environment contains ``text`` (our temp folder), and
    their descendants (the raylet's workers and agents rename themselves ``ray::...``, and are
    orphaned when a driver is killed); this one excluded."""
    named, parent = set(), {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes() + (entry / "environ").read_bytes()
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
        if text.encode() in cmdline:  # in its arguments or its environment
            named.add(int(entry.name))
    found = set(named)
    while True:
        more = {pid for pid, ppid in parent.items() if ppid in found} - found
        if not more:
            return sorted(found)
        found |= more


def _stop(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _node_args(name: str, root: Path) -> list[str]:
    """Own ports and temp folder for one node: two raylets on one machine must not share the
    fixed default ports (the dashboard agent's 52365 among them)."""
    return [
        f"--temp-dir={root / name}",
        f"--node-manager-port={_free_port()}",
        f"--object-manager-port={_free_port()}",
        f"--dashboard-agent-listen-port={_free_port()}",
        f"--dashboard-agent-grpc-port={_free_port()}",
        f"--metrics-export-port={_free_port()}",
        f"--runtime-env-agent-port={_free_port()}",
        "--num-cpus=1",
        "--num-gpus=0",
        "--disable-usage-stats",
    ]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[str, str, dict[str, str]]]:
    """(Ray address, MLflow URL, environment with the cluster's token)."""
    # Ray's Unix sockets live in the temp folder, whose path must stay short (108 bytes).
    root = Path(tempfile.mkdtemp(prefix="nas-ray-", dir="/tmp"))
    env = {
        **os.environ,
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": secrets.token_hex(32),
        "MLFLOW_DISABLE_TELEMETRY": "true",
    }
    port, ml_port = _free_port(), _free_port()
    address = f"127.0.0.1:{port}"
    server = subprocess.Popen(
        [
            str(BIN / "mlflow"),
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            str(ml_port),
            "--workers",
            "1",
            "--backend-store-uri",
            f"sqlite:///{tmp_path / 'server.db'}",
            "--artifacts-destination",
            str(tmp_path / "artifacts"),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "mlflow-server.log").open("w"),
        start_new_session=True,
    )
    try:
        head = [
            str(BIN / "ray"),
            "start",
            "--head",
            "--node-ip-address=127.0.0.1",
            f"--port={port}",
            "--include-dashboard=false",
            *_node_args("head", root),
        ]
        subprocess.run(head, env=env, check=True, capture_output=True, timeout=180)
        worker = [
            str(BIN / "ray"),
            "start",
            f"--address={address}",
            "--node-ip-address=127.0.0.1",
            *_node_args("worker", root),
        ]
        subprocess.run(worker, env=env, check=True, capture_output=True, timeout=180)
        _wait_for(f"http://127.0.0.1:{ml_port}/health")
        yield address, f"http://127.0.0.1:{ml_port}", env
    finally:
        _stop(_pids_naming(str(root)))
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=30)
        shutil.rmtree(root, ignore_errors=True)


def _wait_for(url: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.5)


def test_smoke_sweep_runs_on_both_nodes_of_a_cluster(
    cluster: tuple[str, str, dict[str, str]], tmp_path: Path
) -> None:
    address, mlflow_url, env = cluster
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "nas.cli",
            "sweep",
            "smoke",
            "--seeds",
            "0,1",
            "--address",
            address,
            "--concurrency",
            "2",
            "--cpus-per-trial",
            "1",
            "--tracking-uri",
            mlflow_url,
            "--storage-path",
            str(tmp_path / "shared"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "sweep smoke: 4 finished, 0 skipped" in proc.stdout

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=mlflow_url)
    exp = client.get_experiment_by_name("smoke")
    assert exp is not None
    runs = client.search_runs([exp.experiment_id], max_results=100)
    trials = [r for r in runs if r.data.tags.get("nas.role") == "trial"]
    assert len(trials) == 4  # one run per cell, none duplicated
    assert len({r.data.tags["nas.trial_key"] for r in trials}) == 4
    assert all(r.info.status == "FINISHED" for r in trials)
    assert len({r.data.tags["nas.node"] for r in trials}) == 2  # both nodes trained
    assert all("final/val_loss" in r.data.metrics for r in trials)
    parents = [r for r in runs if r.data.tags.get("nas.role") == "sweep"]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    # the dilution artifacts reached the server's artifact store from the workers
    assert any(client.list_artifacts(r.info.run_id, "dilution") for r in trials)
    assert (tmp_path / "mlflow.db").exists() is False  # nothing went to the local default
