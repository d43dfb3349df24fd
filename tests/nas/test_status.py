"""``nas status``: a sweep's progress read from its record. The counts on real MLflow records
written as the product writes them, without Ray (the plan and record opened as ``nas sweep``
opens them, each trial written by the trials' own writer, ``nas.store.tracking.TrialRun``): a
grid mid-way, a search, a tuned grid whose stage has not settled, a sweep with no plan recorded;
an unknown sweep and stores that cannot be read, one line and exit 2; and the store byte for byte
the same after the command read it. (The rate and time-left arithmetic, worked by hand:
test_progress.py.)"""

from __future__ import annotations

import contextlib
import hashlib
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from record.schema import Metric, Status, Tag
from tests.cli import nas_here, run_nas
from tests.nas.spaces import ARMS, BASE, TINY_SEARCH, TWO_ARMS
from tests.nas.sweeps import command, store_uri, write_trial
from trainers.config import flatten

THREE_SEEDS = TWO_ARMS.replace("seeds: [0]", "seeds: [0, 1, 2]")  # 2 arms x 3 seeds: 6 trials
TUNED = BASE + ARMS + "tune: {train.lr: {float: [1e-3, 1e-2], log: true}, points: 3}\n"
LAST = re.compile(r"last written: \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(.+ ago\)")


def _begin(tmp: Path, *args: str) -> tuple[Any, Any]:
    """The plan and record of ``nas sweep ARGS`` as the command makes and opens them (its plan
    file logged on the parent run), no trial run yet."""
    from nas.cli import build_parser
    from nas.commands.sweep import options
    from nas.sweep.opening import begin
    from nas.sweep.plan import plan

    opts = options(build_parser().parse_args(command(tmp, *args)))
    p, record, _ = begin(store_uri(tmp), plan(opts), opts)
    return p, record


def _trial(record: Any, key: str, config: Any = None, arm: str = "a", seed: int = 0) -> Any:
    """A trial's run opened as a trial opens it (``TrialRun``), one validation logged."""
    from nas.store.tracking import TrialRun

    params = flatten(config) if config is not None else {}
    run = TrialRun(record, key, params, {Tag.ARM: arm, Tag.SEED: str(seed)})
    run.log_metrics({Metric.VAL_LOSS: 4.0}, step=10)
    run.flush()
    return run


def _grid_mid_way(tmp: Path) -> None:
    """``camp``: 6 planned; 2 finished, 1 diverged, 1 failed (the driver's word), 1 running,
    1 not started; the parent left running, as a driver that is still at work leaves it."""
    from nas.store.tracking import set_outcome

    space = tmp / "camp.yaml"
    space.write_text(THREE_SEEDS)
    p, record = _begin(tmp, str(space), "--name", "camp")
    specs = p.specs
    assert len(specs) == 6
    write_trial(record, specs[0], 3.1)
    write_trial(record, specs[1], 3.2)
    one = {s.key: (s.config, s.arm, s.seed) for s in specs}
    _trial(record, specs[2].key, *one[specs[2].key]).end(Status.DIVERGED, "loss is nan", 10)
    _trial(record, specs[3].key, *one[specs[3].key])
    set_outcome(record, specs[3].key, Status.FAILED, "CUDA error")
    _trial(record, specs[4].key, *one[specs[4].key])  # running: no outcome yet


def _search(tmp: Path) -> None:
    """``search``: a search asking for 3 trials, 1 finished."""
    space = tmp / "search.yaml"
    space.write_text(TINY_SEARCH)
    _, record = _begin(tmp, str(space), "--name", "search")
    _trial(record, "point-1").end(Status.FINISHED, "", 20)


def _tuned(tmp: Path) -> None:
    """``tuned``: a tuned grid's stage (2 arms x 3 learning rates) planned, 1 stage trial
    finished: the arms' seeds are not planned yet."""
    space = tmp / "tuned.yaml"
    space.write_text(TUNED)
    p, record = _begin(tmp, str(space), "--name", "tuned")
    assert len(p.specs) == 6
    write_trial(record, p.specs[0], 3.0)


def _no_plan(tmp: Path) -> None:
    """``old``: a parent run with no plan file (as recorded before plans were kept), 1 trial
    finished."""
    from nas.store.tracking import open_sweep

    record = open_sweep(store_uri(tmp), "old", "key", {}, {})
    _trial(record, "k1").end(Status.FINISHED, "", 20)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One SQLite store holding the four sweeps (one store: its schema migrations cost seconds),
    written from inside its folder so that the artifacts stay there too."""
    tmp = tmp_path_factory.mktemp("status")
    with contextlib.chdir(tmp):
        for write in (_grid_mid_way, _search, _tuned, _no_plan):
            write(tmp)
    return tmp


def _status(store: Path, sweep: str) -> list[str]:
    out = nas_here(store, "status", sweep, "--tracking-uri", store_uri(store))
    assert out.returncode == 0 and not out.stderr, out.stderr
    return out.stdout.splitlines()


def test_a_grid_mid_way_counts_each_status_and_what_is_not_started(store: Path) -> None:
    """Hand-counted: 2 finished, 1 running, 1 failed, 1 diverged, 1 not started of 6 planned;
    the rate over the 4 trials with an outcome, the time left for the running and the not
    started one, labelled an estimate; the latest write dated; the lines in a fixed order."""
    lines = _status(store, "camp")
    assert lines[0] == f"sweep camp in {store_uri(store)}: its latest invocation is running"
    assert lines[1] == (
        "trials: 2 finished, 1 running, 1 failed, 1 diverged, 1 not started (of 6 planned)"
    )
    assert lines[2].startswith("rate: ") and "(4 ended trials in " in lines[2]
    assert lines[3].startswith("time left (estimate): ")
    assert "for 2 trials (1 running, 1 not started) at that rate" in lines[3]
    assert LAST.fullmatch(lines[4]) and len(lines) == 5


def test_a_search_counts_against_the_trials_it_asked_for(store: Path) -> None:
    """A search's plan is its trial count: 3 asked for, 1 finished, 2 not started."""
    lines = _status(store, "search")
    assert lines[1] == "trials: 1 finished, 0 running, 0 failed, 2 not started (of 3 planned)"
    assert "for 2 trials (2 not started)" in lines[3]


def test_a_stage_not_settled_says_the_total_is_not_known_yet(store: Path) -> None:
    """A tuned grid before its stage settles: the 6 stage trials are all the record plans so
    far, it says so rather than guess the seeds to come, and the time left is a lower bound."""
    lines = _status(store, "tuned")
    assert lines[1] == (
        "trials: 1 finished, 0 running, 0 failed, 5 not started (of 6 planned so far; its "
        "learning-rate stage plans more once settled, how many the record does not say)"
    )
    assert lines[3].startswith("time left (estimate): at least ")


def test_a_record_without_a_plan_says_not_started_is_unknown(store: Path) -> None:
    lines = _status(store, "old")
    assert lines[1] == (
        "trials: 1 finished, 0 running, 0 failed; not started: unknown (the record holds no "
        "plan to count from)"
    )
    assert lines[3] == ("time left: unknown (the record does not say how many trials are planned)")


def _fingerprint(folder: Path) -> tuple[str, dict[str, int], list[str]]:
    """The store's bytes, each table's row count, and every file under its folder."""
    db = folder / "mlflow.db"
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as con:
        tables = [r[0] for r in con.execute("select name from sqlite_master where type='table'")]
        rows = {t: con.execute(f'select count(*) from "{t}"').fetchone()[0] for t in tables}
    files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))
    return hashlib.sha256(db.read_bytes()).hexdigest(), rows, files


def test_status_writes_nothing_to_the_store(store: Path) -> None:
    """The store's bytes, its tables' row counts and the files beside it (artifacts, no lock
    file left) are the same after ``nas status`` read every sweep in it."""
    before = _fingerprint(store)
    assert sum(before[1].values()) > 0
    for sweep in ("camp", "search", "tuned", "old"):
        _status(store, sweep)
    assert _fingerprint(store) == before


def test_an_unknown_sweep_is_one_line_and_exit_2(store: Path, tmp_path: Path) -> None:
    """The real command in a subprocess: one line naming the sweeps the store holds, no
    traceback, nothing on stdout."""
    out = run_nas(tmp_path, "status", "nonesuch", "--tracking-uri", store_uri(store))
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.splitlines() == [
        f"nas: error: no sweep named 'nonesuch' in {store_uri(store)}; sweeps there: "
        "camp, old, search, tuned"
    ]


@pytest.mark.parametrize(
    ("store_file", "says"),
    [
        (None, "no MLflow store there (no such file)"),
        (b"not a database\n", "cannot open the MLflow store"),
    ],
)
def test_a_store_that_cannot_be_read_is_one_line_and_exit_2(
    tmp_path: Path, store_file: bytes | None, says: str
) -> None:
    """A store file that is not there (and is not created by looking) or is no database: one
    line, exit 2; the store from MLFLOW_TRACKING_URI, as the other commands take it."""
    db = tmp_path / "mlflow.db"
    if store_file is not None:
        db.write_bytes(store_file)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{db}")
        out = nas_here(tmp_path, "status", "camp")
    assert out.returncode == 2 and out.stdout == ""
    assert len(out.stderr.splitlines()) == 1 and says in out.stderr
    assert db.exists() == (store_file is not None)
