"""``nas ui`` on a PostgreSQL store: the MLflow UI served from it, and gone after Ctrl-C."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from reports.schema import ROLE_SWEEP, Tag
from tests.cli import ENV
from tests.postgres import Database

SWEEP = "smoke"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _record_a_sweep(url: str) -> None:
    """One sweep-like experiment: its parent run, ended."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=url)
    exp_id = client.create_experiment(SWEEP)
    tags = {Tag.ROLE: ROLE_SWEEP, Tag.SWEEP: SWEEP}
    run = client.create_run(exp_id, tags=tags, run_name=SWEEP)
    client.set_terminated(run.info.run_id)


def _get(url: str, deadline: float) -> bytes:
    """The body at ``url`` once the server answers (until ``deadline``)."""
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return bytes(response.read())
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _group_gone(pgid: int, timeout_s: float = 10) -> bool:
    """Whether every process of the group has exited (exited children are reaped promptly)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    return False


def test_ui_serves_a_postgresql_store_and_stops_on_sigint(
    tmp_path: Path, postgres_db: Database
) -> None:
    """``nas ui --tracking-uri postgresql://…`` on 127.0.0.1 answers /health, its REST API lists
    the recorded sweep's experiment, its first line shows the URI without the password; SIGINT
    (Ctrl-C) ends it with status 0, every process it started gone and the port free again."""
    _record_a_sweep(postgres_db.url)
    port = _free_port()
    argv = ["ui", "--tracking-uri", postgres_db.url, "--port", str(port)]
    with (tmp_path / "ui.log").open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "nas.cli", *argv],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            cwd=tmp_path,
            env=ENV,
            start_new_session=True,  # its own process group, as a terminal's Ctrl-C reaches
        )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert f"http://127.0.0.1:{port}" in first and postgres_db.password not in first
        base, deadline = f"http://127.0.0.1:{port}", time.monotonic() + 120
        assert _get(f"{base}/health", deadline) == b"OK"
        search = f"{base}/api/2.0/mlflow/experiments/search?max_results=100"
        names = [e["name"] for e in json.loads(_get(search, deadline))["experiments"]]
        assert SWEEP in names
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGINT)
        code = proc.wait(timeout=60)
    assert code == 0, (tmp_path / "ui.log").read_text()[-2000:]
    assert _group_gone(proc.pid), "a process of nas ui outlived it"
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0, "something still listens on the port"
