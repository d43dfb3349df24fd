"""Eight trials starting at the same moment on a brand-new tracking store, SQLite and
PostgreSQL: no "database is locked", no migration race, eight runs.

Eight worker processes are started once for the module with what opening a store imports
already imported (forked from a server process that imported it: spawning eight fresh
interpreters to import MLflow cost 12 s), so each test's race is on the store, not on imports;
a barrier releases them together and each opens the store for the first time and does what a trial does through ``nas.store.tracking``:
``TrialRun``, ``log_metrics`` for every step, ``end``. Two races:

- no driver: the store does not exist yet (no SQLite file; a PostgreSQL database with no
  tables), so the eight first connections create and migrate it at once, then race to get or
  create the sweep's experiment as ``open_sweep`` does. No parent run exists in this case: the
  trials share a fixed parent id, which only tags them;
- a driver first: ``open_sweep`` creates the store, the experiment and the parent run, and the
  eight trials race on a store none of them has opened.

``nas.store.tracking._client`` opens every store through ``nas.store.prepare.prepare_store``; without it
every worker of the no-driver race but one or two fails while migrating.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from nas.store.tracking import SweepRecord, TrialRun, _client, open_sweep
from record.schema import Metric, Status, Tag

N_TRIALS = 8
STEPS = 10
METRICS = (Metric.TRAIN_LOSS, Metric.VAL_LOSS)
SWEEP = "race"
NO_PARENT = "no-driver-parent"  # the no-driver race's stand-in parent run id
WAIT_S = 120  # for every worker's imports, at the barrier, and for every result


@dataclass(frozen=True)
class Job:
    """One race: the store, the folder to run in, and the driver's record (None: no driver)."""

    uri: str
    cwd: str
    record: SweepRecord | None


def _key(index: int) -> str:
    return f"trial-{index}"


def _experiment_id(client: Any, name: str) -> str:
    """Get or create the experiment as ``open_sweep`` does, where losing the race to create it
    means reading the winner's."""
    from mlflow.exceptions import MlflowException

    exp = client.get_experiment_by_name(name)
    if exp is not None:
        return str(exp.experiment_id)
    try:
        return str(client.create_experiment(name))
    except MlflowException as err:
        if err.error_code != "RESOURCE_ALREADY_EXISTS":
            raise
        return str(client.get_experiment_by_name(name).experiment_id)


def _trial(job: Job, index: int) -> str:
    """What a trial does with the record, from its first opening of the store to its end."""
    os.chdir(job.cwd)  # a SQLite store's default artifact root is relative
    record = job.record
    if record is None:
        record = SweepRecord(job.uri, _experiment_id(_client(job.uri), SWEEP), NO_PARENT, SWEEP)
    run = TrialRun(record, _key(index), {"model.n_layers": index, "seed": 0}, {Tag.SEED: "0"})
    for step in range(STEPS):
        run.log_metrics({m: 1.0 / (step + 1) + index for m in METRICS}, step)
    run.end(Status.FINISHED, step=STEPS - 1)
    return run.run_id


PRELOAD = ["alembic.command", "mlflow.store.tracking.sqlalchemy_store", "mlflow.tracking"]


def _worker(index: int, barrier: Any, inbox: Any, outbox: Any) -> None:
    # What opening a SQL store imports, imported before any race: the race is on the store.
    import alembic.command  # noqa: F401
    import mlflow.store.tracking.sqlalchemy_store
    import mlflow.tracking  # noqa: F401

    outbox.put((index, "ready", ""))
    while (job := inbox.get()) is not None:
        try:
            barrier.wait(timeout=WAIT_S)
            outbox.put((index, _trial(job, index), ""))
        except BaseException:
            outbox.put((index, "", traceback.format_exc()))
    outbox.close()
    outbox.join_thread()  # every answer sent; nothing to clean up
    os._exit(0)  # MLflow's exit handlers cost seconds per worker


class Workers:
    """Eight processes, each running every job it is given once the barrier lets all eight go.
    Forked from a fresh server process (not from pytest's) with MLflow's store imported."""

    def __init__(self) -> None:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(PRELOAD)
        self.barrier = ctx.Barrier(N_TRIALS)  # held: a child unpickles it after start()
        self.outbox = ctx.Queue()
        self.inboxes = [ctx.Queue() for _ in range(N_TRIALS)]
        self.procs = [
            ctx.Process(target=_worker, args=(i, self.barrier, inbox, self.outbox), daemon=True)
            for i, inbox in enumerate(self.inboxes)
        ]
        for p in self.procs:
            p.start()
        self._collect(expected="ready")

    def _collect(self, expected: str | None = None) -> dict[int, tuple[str, str]]:
        """One message from every worker: (run id, error) by worker, or ``expected``."""
        results: dict[int, tuple[str, str]] = {}
        for _ in range(N_TRIALS):
            try:
                index, answer, error = self.outbox.get(timeout=WAIT_S)
            except queue.Empty:
                pytest.fail(f"only {len(results)} of {N_TRIALS} workers answered")
            assert expected is None or answer == expected, error
            results[index] = (answer, error)
        return results

    def race(self, job: Job) -> dict[int, tuple[str, str]]:
        """Every worker's (run id, error) for ``job``."""
        for inbox in self.inboxes:
            inbox.put(job)
        return self._collect()

    def close(self) -> None:
        for inbox in self.inboxes:
            inbox.put(None)
        for p in self.procs:
            p.join(timeout=30)
            if p.is_alive():
                p.terminate()
                p.join(timeout=10)


@pytest.fixture(scope="module")
def workers() -> Iterator[Workers]:
    pool = Workers()
    try:
        yield pool
    finally:
        pool.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def fresh_store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URI of a store nothing has opened: a SQLite file that does not exist yet, or a
    PostgreSQL database with no tables."""
    if request.param == "sqlite":
        path = tmp_path / "store" / "mlflow.db"
        assert not path.parent.exists()
        return f"sqlite:///{path}"
    url: str = request.getfixturevalue("postgres_db").url
    with psycopg.connect(url) as conn:
        assert conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
        ).fetchone() == (0,)
    return url


def _check(record: SweepRecord, results: dict[int, tuple[str, str]]) -> None:
    """Every worker succeeded; the record holds exactly eight child runs, one per key, each
    ended FINISHED with every metric step exactly once."""
    errors = [f"worker {i}:\n{error}" for i, (_, error) in sorted(results.items()) if error]
    assert not errors, "\n".join(errors)
    client = _client(record.uri)
    query = f"tags.`{Tag.PARENT}` = '{record.parent_run_id}'"
    runs = client.search_runs([record.experiment_id], query, max_results=100)
    assert sorted(r.data.tags[Tag.TRIAL_KEY] for r in runs) == [_key(i) for i in range(N_TRIALS)]
    assert {r.info.run_id for r in runs} == {run_id for run_id, _ in results.values()}
    for run in runs:
        assert run.info.status == "FINISHED" and run.data.tags[Tag.STATUS] == Status.FINISHED
        for metric in METRICS:
            steps = [m.step for m in client.get_metric_history(run.info.run_id, metric)]
            assert sorted(steps) == list(range(STEPS)), (run.data.tags[Tag.TRIAL_KEY], metric)


def test_eight_trials_create_a_fresh_store_at_once(
    workers: Workers, fresh_store: str, tmp_path: Path
) -> None:
    """Eight first connections to a store that does not exist yet create and migrate it once,
    agree on one experiment, and record eight finished runs; no lock file is left beside a
    SQLite store."""
    results = workers.race(Job(fresh_store, str(tmp_path), None))
    client = _client(fresh_store)
    exp = client.get_experiment_by_name(SWEEP)
    assert exp is not None
    _check(SweepRecord(fresh_store, exp.experiment_id, NO_PARENT, SWEEP), results)
    assert len(client.search_experiments()) == 2  # MLflow's Default and the sweep's
    if fresh_store.startswith("sqlite"):
        assert [p.name for p in (tmp_path / "store").iterdir()] == ["mlflow.db"]


def test_eight_trials_start_at_once_on_a_just_opened_sweep(
    workers: Workers, fresh_store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The driver opens the sweep on a fresh store; eight trials that have never opened it
    start at once and record eight finished runs under its parent."""
    monkeypatch.chdir(tmp_path)
    record = open_sweep(fresh_store, SWEEP, str(tmp_path / "ray" / SWEEP), {}, {"seed": 0})
    _check(record, workers.race(Job(fresh_store, str(tmp_path), record)))
