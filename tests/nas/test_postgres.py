"""MLflow and an Optuna study on a real PostgreSQL, written to directly by the driver and every
trial, and no password leaked anywhere the harness writes or prints, nor in any process's
command line: the search, its continuation and its report with the trials in this process;
what Ray's workers, logs and Tune's pickles hold on one real sweep."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path
from typing import Any

import psycopg
import pytest

from record.schema import Metric, Tag
from tests.cli import run_nas
from tests.nas import sweeps
from tests.nas.spaces import TINY_SEARCH
from tests.postgres import Database, database
from tests.proc import SecretWatch
from tests.ray_cluster import shared_root


def _store_text(url: str) -> str:
    """Every row of every table of the store's database, as text."""
    out = []
    with psycopg.connect(url) as conn:
        tables = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
        ).fetchall()
        for (table,) in tables:
            out.extend(str(row) for row in conn.execute(f'SELECT * FROM "{table}"'))
    return "\n".join(out)


def _files_holding(folder: Path, secret: bytes) -> list[Path]:
    """The files under ``folder`` holding ``secret``; one removed while being read is left out
    (the shared Ray cluster keeps running other tests' sweeps)."""
    found = []
    for f in folder.rglob("*"):
        with contextlib.suppress(OSError):
            if f.is_file() and secret in f.read_bytes():
                found.append(f)
    return found


def test_a_search_on_postgresql_continued_and_reported_never_records_a_password(
    tmp_path: Path, postgres_db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    """A TPE search over a YAML space, its trials trained in this process
    (``tests.nas.sweeps.run_here``), recorded in one PostgreSQL database (``--tracking-uri
    postgresql://role:password@…``) with its Optuna study in another (``--study-storage``, also
    with a password); then ``--trials 3`` with the storage path deleted; then its report.

    The search: 2 trials, each a child run with its sampled values as params, trained to its
    last step; the continuation runs only the 1 new proposal, the earlier 2 in the study and
    their runs untouched: the record and the stored study hold the same 3 distinct trials, and
    the report reads them back.

    The passwords: neither is in any file under the folder (the storage path, the downloaded
    artifacts, the report) or any output; the tracking store's is in no row of the store, the
    recorded command shows it as ***, and no process but the typed ``nas report`` has it in its
    command line while the report runs. (The sweep starts no process here: what Ray's workers,
    its logs and Tune's pickles hold, the real sweep below.)"""
    import optuna
    from mlflow.tracking import MlflowClient

    uri, secret = postgres_db.url, postgres_db.password
    space = tmp_path / "search.yaml"
    space.write_text(TINY_SEARCH)
    with database() as study_db:
        stores = ["--name", "more", "--tracking-uri", uri, "--study-storage", study_db.url]
        code, first = sweeps.run_here(tmp_path, [str(space), "--trials", "2", *stores])
        assert code == 0 and len(first.proposals) == 2
        client = MlflowClient(tracking_uri=uri)
        before = _trials(client)
        assert len(before) == 2
        assert all(3e-4 <= float(r.data.params["train.lr"]) <= 1e-2 for r in before)
        for run in before:
            assert run.data.tags[Tag.STATUS] == "finished" and not run.data.tags.get(Tag.REASON)
            assert run.data.metrics[Metric.FINAL_STEPS] == 20

        shutil.rmtree(tmp_path / "ray")
        code, more = sweeps.run_here(tmp_path, [str(space), "--trials", "3", *stores])
        assert code == 0 and len(more.proposals) == 1  # the 2 settled earlier do not run again
        after = _trials(client)
        assert len(after) == 3
        assert {r.info.run_id for r in before} < {r.info.run_id for r in after}
        sweeps.check_record(after, client)
        for run in before:
            again = next(r for r in after if r.info.run_id == run.info.run_id)
            assert again.data.metrics == run.data.metrics
        assert len({r.data.params["train.lr"] for r in after}) == 3
        stored = optuna.load_study(study_name="more", storage=study_db.url)
        assert [t.state.name for t in stored.trials] == ["COMPLETE"] * 3
        assert {t.params["train.lr"] for t in stored.trials} == {
            float(r.data.params["train.lr"]) for r in after
        }
        study_secret = study_db.password
    swept = capsys.readouterr()

    with SecretWatch(secret) as report_watch:
        report = run_nas(tmp_path, "report", "more", "--tracking-uri", uri)
    assert report.returncode == 0, report.stderr[-3000:]
    assert "**best trials**" in (tmp_path / "nas-reports" / "more" / "report.md").read_text()
    assert report_watch.polls > 0 and report_watch.besides(report.args) == []

    runs = client.search_runs([client.get_experiment_by_name("more").experiment_id])
    parent = next(r for r in runs if r.data.tags.get(Tag.ROLE) == "sweep")
    assert ":***@" in parent.data.tags[Tag.COMMAND]
    assert secret not in _store_text(uri)
    artifacts = tmp_path / "artifacts"
    for run in runs:
        client.download_artifacts(run.info.run_id, "", str(artifacts / run.info.run_id))
    assert list(artifacts.rglob("*.json")), "the profiles and plans were downloaded"
    for password in (secret, study_secret):
        assert not _files_holding(tmp_path, password.encode())
        for output in (swept.out + swept.err, report.stdout + report.stderr):
            assert password not in output


def test_a_search_on_ray_keeps_both_passwords_off_command_lines_logs_and_pickles(
    tmp_path: Path, postgres_db: Database
) -> None:
    """What only Ray shows of the passwords: a one-trial search on the session's Ray cluster,
    recorded in PostgreSQL (``--tracking-uri`` with a password) with its Optuna study in
    another (``--study-storage``, also with a password). The trial is recorded (its worker
    reached the store); no process but the typed ``nas`` command has the tracking password
    in its command line while the sweep runs (Ray's workers, the trial's among them: Ray
    hands a job's environment to a new worker on its command line); the logs of the Ray
    cluster never hold it; Tune's pickles in the storage path (the trainable's parameters, the
    searcher with its study's storage) hold neither password, nor does any output."""
    from mlflow.tracking import MlflowClient

    uri, secret = postgres_db.url, postgres_db.password
    space = tmp_path / "search.yaml"
    space.write_text(TINY_SEARCH)
    with database() as study_db:
        stores = ("--name", "more", "--tracking-uri", uri, "--study-storage", study_db.url)
        with SecretWatch(secret) as watch:
            proc = sweeps.sweep(tmp_path, str(space), "--trials", "1", *stores)
        assert proc.returncode == 0, proc.stderr[-3000:]
        study_secret = study_db.password
    (run,) = _trials(MlflowClient(tracking_uri=uri))
    assert run.data.tags[Tag.STATUS] in ("finished", "stopped_early")
    assert watch.polls > 10 and watch.besides(proc.args) == []
    ray_logs = shared_root()
    assert ray_logs is not None and not _files_holding(ray_logs, secret.encode())
    (experiment,) = (tmp_path / "ray" / "more").glob("tune-*")
    assert (experiment / "tuner.pkl").exists() and list(experiment.glob("searcher-state-*.pkl"))
    for password in (secret, study_secret):
        assert not _files_holding(tmp_path, password.encode())
        assert password not in proc.stdout + proc.stderr


def _trials(client: Any) -> list[Any]:
    """The trial runs of the sweep ``more``."""
    exp = client.get_experiment_by_name("more")
    assert exp is not None
    runs = client.search_runs([exp.experiment_id], max_results=100)
    return [r for r in runs if r.data.tags.get(Tag.ROLE) == "trial"]


def test_an_unreachable_database_is_one_line_with_the_password_redacted(tmp_path: Path) -> None:
    """A PostgreSQL URI nothing answers at: exit status 2, one line naming the store with its
    password as ***, nothing written."""
    uri = "postgresql://someone:hunter2@127.0.0.1:1/nowhere"
    proc = run_nas(tmp_path, "sweep", "smoke", "--tracking-uri", uri, timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "postgresql://someone:***@127.0.0.1:1/nowhere" in proc.stderr
    assert "hunter2" not in proc.stderr + proc.stdout
    assert not list(tmp_path.iterdir())
