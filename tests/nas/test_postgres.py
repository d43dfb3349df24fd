"""MLflow and an Optuna study on a real PostgreSQL, written to directly by the driver and every
trial, and no password leaked anywhere the harness writes or prints, nor in any process's
command line."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path
from typing import Any

import psycopg

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
    tmp_path: Path, postgres_db: Database
) -> None:
    """A TPE search with ASHA over a YAML space, recorded in one PostgreSQL database
    (``--tracking-uri postgresql://role:password@…``) with its Optuna study in another
    (``--study-storage``, also with a password); then ``--trials 5`` with the storage path
    deleted; then its report. One search for both stores: each sweep costs a Ray job here.

    The search: 3 trials, each a child run with its sampled values as params, finished or
    stopped early by ASHA (a trial reaching the last step finishes); the continuation runs only
    the 2 new proposals, the earlier 3 in the study and their runs untouched: the record and
    the stored study hold the same 5 distinct trials, and the report reads them back.

    The passwords: neither is in any file under the folder (the storage path, where Tune
    pickles the searcher; the downloaded artifacts; the report) or any output; the tracking
    store's is in no row of the store, the recorded command shows it as ***, no process but
    the typed ``nas`` command has it in its command line while the sweep and the report run
    (Ray's workers, the trials among them, included), and the logs of the Ray cluster the
    sweep ran on never hold it."""
    import optuna
    from mlflow.tracking import MlflowClient

    uri, secret = postgres_db.url, postgres_db.password
    space = tmp_path / "search.yaml"
    space.write_text(TINY_SEARCH)
    with database() as study_db:
        stores = ("--name", "more", "--tracking-uri", uri, "--study-storage", study_db.url)
        with SecretWatch(secret) as sweep_watch:
            first = sweeps.sweep(tmp_path, str(space), *stores)
        assert first.returncode == 0, first.stderr[-3000:]
        client = MlflowClient(tracking_uri=uri)
        before = _trials(client)
        assert len(before) == 3
        assert all(3e-4 <= float(r.data.params["train.lr"]) <= 1e-2 for r in before)
        for run in before:
            status = run.data.tags[Tag.STATUS]
            assert status in ("finished", "stopped_early") and not run.data.tags.get(Tag.REASON)
            if status == "finished":
                assert run.data.metrics[Metric.FINAL_STEPS] == 20

        shutil.rmtree(tmp_path / "ray")
        more = sweeps.sweep(tmp_path, str(space), "--trials", "5", *stores)
        assert more.returncode == 0, more.stderr[-3000:]
        assert "3 settled earlier" in more.stdout
        after = _trials(client)
        assert len(after) == 5
        assert {r.info.run_id for r in before} < {r.info.run_id for r in after}
        sweeps.check_record(after, client)
        for run in before:
            again = next(r for r in after if r.info.run_id == run.info.run_id)
            assert again.data.metrics == run.data.metrics
        assert len({r.data.params["train.lr"] for r in after}) == 5
        stored = optuna.load_study(study_name="more", storage=study_db.url)
        assert [t.state.name for t in stored.trials] == ["COMPLETE"] * 5
        assert {t.params["train.lr"] for t in stored.trials} == {
            float(r.data.params["train.lr"]) for r in after
        }
        study_secret = study_db.password

    with SecretWatch(secret) as report_watch:
        report = run_nas(tmp_path, "report", "more", "--tracking-uri", uri)
    assert report.returncode == 0, report.stderr[-3000:]
    assert "**best trials**" in (tmp_path / "nas-reports" / "more" / "report.md").read_text()
    assert sweep_watch.polls > 10 and report_watch.polls > 0
    assert sweep_watch.besides(first.args) == [] and report_watch.besides(report.args) == []
    ray_logs = shared_root()
    assert ray_logs is not None and not _files_holding(ray_logs, secret.encode())

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
        for run_output in (first, more, report):
            assert password not in run_output.stdout + run_output.stderr


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
