"""``nas ui``: the MLflow UI served from a PostgreSQL or SQLite store, the URL of each sweep's
runs table printed, and every process it started gone whatever signal ends it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import time
from pathlib import Path

import pytest

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
    start_study_ui,
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


def _keep_a_study(url: str, name: str) -> None:
    """An Optuna study as a search keeps it under ``--study-storage``: named after the sweep,
    two trials ended."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(storage=url, study_name=name)
    study.optimize(lambda trial: (trial.suggest_float("train.lr", 1e-4, 1e-2) - 3e-3) ** 2, 2)


def test_ui_optuna_serves_a_postgresql_study_with_its_password_in_no_command_line(
    tmp_path: Path, postgres_db: Database
) -> None:
    """``nas ui --optuna`` with the study database in NAS_STUDY_STORAGE (password included)
    prints the database without its password and each study's dashboard page, whose API then
    lists the study with its two trials; no process it starts holds the password in its command
    line, nor does what the server wrote; SIGINT ends it with status 0, its server gone and the
    port free again."""
    _keep_a_study(postgres_db.url, SWEEP)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = None
    with SecretWatch(postgres_db.password) as watch:
        proc = start_study_ui(tmp_path, postgres_db.url, port, tmp_path / "ui.log")
        try:
            assert proc.stdout is not None
            first, second = proc.stdout.readline(), proc.stdout.readline()
            assert first.startswith("Optuna dashboard for postgresql://"), first
            assert f"at {base} " in first and postgres_db.password not in first
            assert second.rstrip("\n") == f"  {SWEEP}: {base}/dashboard/studies/1", second
            deadline = time.monotonic() + START_TIMEOUT_S
            (study,) = json.loads(get(f"{base}/api/studies", deadline))["study_summaries"]
            assert study["study_name"] == SWEEP
            detail = json.loads(get(f"{base}/api/studies/{study['study_id']}", deadline))
            assert len(detail["trials"]) == 2
            assert b"<html" in get(f"{base}/dashboard/studies/1", deadline).lower()
            (server,) = children(proc.pid)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGINT)
            code = proc.wait(timeout=60)
    log = (tmp_path / "ui.log").read_text()
    assert code == 0, log[-2000:]
    assert watch.polls > 0 and watch.besides([]) == []
    assert postgres_db.password not in log
    assert group_gone(server), "the dashboard's server outlived nas ui"
    assert port_free(port), "something still listens on the port"


def test_ui_optuna_refuses_a_missing_or_empty_study_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No study database, a SQLite file that is not there (which reading would create), a
    database without an Optuna study, another scheme, or --study-storage without --optuna:
    one line, exit 2, no server started and no file made or changed."""
    from nas.cli import main
    from record.uri import STUDY_STORAGE_ENV

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(STUDY_STORAGE_ENV, raising=False)
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE runs (id INTEGER)").connection.commit()
    before = other.read_bytes()
    cases = {
        (): "no study database; set NAS_STUDY_STORAGE",
        ("--study-storage", f"sqlite:///{tmp_path / 'absent.db'}"): "no such file",
        ("--study-storage", f"sqlite:///{other}"): "no Optuna study there",
        ("--study-storage", "mysql://u@h/db"): "give a sqlite:///<file> or postgresql:// URL",
    }
    for extra, expected in cases.items():
        assert main(["ui", "--optuna", "--port", str(free_port()), *extra]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and expected in err, (extra, err)
    assert main(["ui", "--study-storage", f"sqlite:///{other}"]) == 2
    assert "only with --optuna" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.db"]
    assert other.read_bytes() == before
