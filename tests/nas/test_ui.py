"""``nas ui``: the MLflow UI served from a PostgreSQL or SQLite store, the URL of each sweep's
runs table printed, and every process it started gone whatever signal ends it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from pathlib import Path

from nas.store.dashboard import VIEW_KEY
from record.schema import ROLE_SWEEP, Tag
from tests.postgres import Database
from tests.proc import SecretWatch
from tests.ui import (
    START_TIMEOUT_S,
    children,
    free_port,
    get,
    group_gone,
    port_free,
    start_ui,
    ui_command,
)

SWEEP = "smoke"


def _record_a_sweep(url: str) -> None:
    """One sweep-like experiment: its parent run, ended."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=url)
    exp_id = client.create_experiment(SWEEP)
    tags = {Tag.ROLE: ROLE_SWEEP, Tag.SWEEP: SWEEP}
    run = client.create_run(exp_id, tags=tags, run_name=SWEEP)
    client.set_terminated(run.info.run_id)


def test_ui_serves_a_postgresql_store_and_stops_on_sigint(
    tmp_path: Path, postgres_db: Database
) -> None:
    """``nas ui --tracking-uri postgresql://…`` on 127.0.0.1 answers /health, its REST API lists
    the recorded sweep's experiment, its first line shows the URI without the password, and no
    process it starts (``mlflow ui``, its uvicorn worker) has the password in its command line
    (a shared login node's ``ps``); SIGINT (Ctrl-C) ends it with status 0, the server it
    started gone and the port free again."""
    _record_a_sweep(postgres_db.url)
    port = free_port()
    server = None
    with SecretWatch(postgres_db.password) as watch:
        proc = start_ui(tmp_path, postgres_db.url, port, tmp_path / "ui.log")
        try:
            assert proc.stdout is not None
            first = proc.stdout.readline()
            assert f"http://127.0.0.1:{port}" in first and postgres_db.password not in first
            base, deadline = f"http://127.0.0.1:{port}", time.monotonic() + START_TIMEOUT_S
            assert get(f"{base}/health", deadline) == b"OK"
            (server,) = children(proc.pid)
            assert children(server), "mlflow ui runs uvicorn as a child of its own"
            search = f"{base}/api/2.0/mlflow/experiments/search?max_results=100"
            names = [e["name"] for e in json.loads(get(search, deadline))["experiments"]]
            assert SWEEP in names
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
            code = proc.wait(timeout=60)
    log = (tmp_path / "ui.log").read_text()
    assert code == 0, log[-2000:]
    assert watch.besides(ui_command(postgres_db.url, port)) == []
    assert postgres_db.password not in log  # nor in what the server wrote
    assert group_gone(server), "a process of the MLflow server outlived nas ui"
    assert port_free(port), "something still listens on the port"


def test_ui_prints_the_runs_table_and_sigterm_stops_the_server(tmp_path: Path) -> None:
    """On a store a sweep opened, ``nas ui`` prints the sweep's runs-table URL (the Model
    training side, the sweep's saved view); ``kill -TERM`` of the nas ui process alone, as a
    supervisor sends it, ends it and the server it started (uvicorn included): no process of
    the server's group survives and the port is free. (SIGHUP takes the same path.)"""
    from nas.store.tracking import open_sweep

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    record = open_sweep(uri, SWEEP, "key", {}, {"train.lr": 0.01})
    port = free_port()
    proc = start_ui(tmp_path, uri, port, tmp_path / "ui.log")
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline(), proc.stdout.readline()]
        base = f"http://127.0.0.1:{port}"
        runs = f"{base}/#/experiments/{record.experiment_id}/runs"
        expected = f"  {SWEEP}: {runs}?workflowType=machine_learning&viewStateShareKey={VIEW_KEY}"
        assert lines[1].rstrip("\n") == expected, lines
        assert get(f"{base}/health", time.monotonic() + START_TIMEOUT_S) == b"OK"
        (server,) = children(proc.pid)
        assert len(children(server)) >= 1  # mlflow ui runs uvicorn as a child of its own
    finally:
        os.kill(proc.pid, signal.SIGTERM)  # nas ui's own pid only, not its group
        code = proc.wait(timeout=60)
    assert code == 0, (tmp_path / "ui.log").read_text()[-2000:]
    assert group_gone(server), "a process of the MLflow server outlived nas ui"
    assert port_free(port), "something still listens on the port"
