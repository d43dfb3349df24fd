"""MLflow on a real PostgreSQL, written to directly by the driver and every trial, and no
password leaked anywhere the harness writes or prints, nor in any process's command line."""

from __future__ import annotations

import contextlib
from pathlib import Path

import psycopg

from record.schema import Tag
from tests.cli import run_nas
from tests.nas import sweeps
from tests.postgres import Database
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


def test_a_sweep_and_its_report_on_postgresql_never_record_the_password(
    tmp_path: Path, postgres_db: Database
) -> None:
    """``--tracking-uri postgresql://role:password@…``: the smoke sweep records one finished run
    per cell in PostgreSQL and the report reads it back; the password appears in no row of the
    store, no artifact, no file under the storage path or the report, and no output; the
    recorded command shows it as ***. While both run, no process but the typed ``nas`` command
    has the password in its command line (Ray's workers, the trials among them, included), and
    the logs of the Ray cluster the sweep ran on never hold it."""
    uri, secret = postgres_db.url, postgres_db.password
    with SecretWatch(secret) as sweep_watch:
        sweep = run_nas(tmp_path, "sweep", "smoke", "--tracking-uri", uri,
                        "--storage-path", str(tmp_path / "ray"))  # fmt: skip
    assert sweep.returncode == 0, sweep.stderr[-3000:]
    with SecretWatch(secret) as report_watch:
        report = run_nas(tmp_path, "report", "smoke", "--tracking-uri", uri)
    assert report.returncode == 0, report.stderr[-3000:]
    assert sweep_watch.polls > 10 and report_watch.polls > 0
    assert sweep_watch.besides(sweep.args) == [] and report_watch.besides(report.args) == []
    ray_logs = shared_root()
    assert ray_logs is not None and not _files_holding(ray_logs, secret.encode())

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("smoke")
    assert exp is not None
    runs = client.search_runs([exp.experiment_id])
    trials = [r for r in runs if r.data.tags.get(Tag.ROLE) == "trial"]
    parent = next(r for r in runs if r.data.tags.get(Tag.ROLE) == "sweep")
    assert len(trials) == 2 and all(r.data.tags[Tag.STATUS] == "finished" for r in trials)
    sweeps.check_record(trials, client)
    assert ":***@" in parent.data.tags[Tag.COMMAND]

    assert secret not in _store_text(uri)
    artifacts = tmp_path / "artifacts"
    for run in runs:
        client.download_artifacts(run.info.run_id, "", str(artifacts / run.info.run_id))
    assert list(artifacts.rglob("*.json")), "the profiles and plans were downloaded"
    assert not _files_holding(tmp_path, secret.encode())
    for text in (sweep.stdout, sweep.stderr, report.stdout, report.stderr):
        assert secret not in text


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
