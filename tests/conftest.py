"""Suite-wide marks: which test modules are ``slow``.

These modules start whole sweeps (``nas sweep`` in a subprocess on Ray; the command with its
trials trained in the test's process, ``tests.nas.sweeps.run_here``: the report, diff, formats
and dashboard tests share one such ``smoke`` sweep over two seeds; the README test runs every
documented command), a two-node Ray cluster, or a headless browser; or they play campaigns on
real MLflow stores without Ray (``tests.nas.sweeps.play``: seconds each, kept out of ``make
test-fast``). A rule here rather than a decorator per test, because the rule holds whatever
tests a module ends up with. The few quick checks in these modules (bad input exiting 2 before
any trial starts) ride along.
``make test`` still runs every test; ``make test-slow`` (``-m slow``) runs only these.

Also the suite-wide fixtures: ``postgres_db`` (a database of its own on a real PostgreSQL),
``pg_server`` (an MLflow tracking server on such a database), ``chromium`` (a headless
browser's binary) and ``swept`` (one ``smoke`` sweep the read-only tests share).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from nas.sweep.tune_run import LOCAL_WORKER_NICENESS, WORKER_NICENESS_ENV
from tests.nas.sweeps import run_here
from tests.postgres import drop_leftovers, postgres_db
from tests.ray_cluster import pids_naming, stop, stop_shared
from tests.reports.browser import ChromiumUnavailable, ensure_chromium
from tests.tracking_server import pg_server

__all__ = ["pg_server", "postgres_db"]

# Every process the suite starts inherits this (``tests.cli`` reads the environment when it
# starts one), so that whatever outlives its test is found and stopped when the session ends.
SESSION_MARK = f"NAS_TEST_SESSION={secrets.token_hex(8)}"
os.environ[SESSION_MARK.split("=")[0]] = SESSION_MARK.split("=")[1]
# The clusters the suite starts with `ray start` run their trials at the niceness a local sweep's
# get, not Ray's 15: beside the other pytest worker's tests, trials at 15 wait on everything else
# (docs/benchmarks.md, "Ray's worker niceness").
os.environ.setdefault(WORKER_NICENESS_ENV, LOCAL_WORKER_NICENESS)

TESTS = Path(__file__).parent
SLOW_MODULES = frozenset(
    TESTS / name
    for name in (
        "nas/test_sweep.py",
        "nas/test_campaign.py",
        "nas/test_campaign_refusals.py",
        "nas/test_lr_stage_sweep.py",
        "nas/test_local_run.py",
        "nas/test_seeds_auto_sweep.py",
        "nas/test_status.py",
        "nas/test_postgres.py",
        "nas/test_cluster.py",
        "nas/test_data_parallel.py",
        "nas/test_gpu_scheduling.py",
        "nas/test_tracking_faults.py",
        "nas/test_ui.py",
        "nas/test_store_concurrency.py",
        "nas/test_store_input.py",
        "nas/test_ui_browser.py",
        "reports/test_browser.py",
        "reports/test_formats.py",
        "reports/test_report.py",
        "reports/test_diff_sweep.py",
        "test_readme_commands.py",
        "test_hygiene.py",
        "nas/test_coordcheck_cmd.py",
    )
)
# A test that asks for one of these starts a database, a server, a sweep or a browser: slow,
# wherever it lives.
SLOW_FIXTURES = frozenset({"postgres_db", "pg_server", "swept", "chromium"})
# Single tests that run ``nas`` in a subprocess (an interpreter start and a training run each),
# a benchmark against its time budget, or torch.compile, in modules whose other tests are quick.
SLOW_TESTS = frozenset(
    {
        "test_benchmark_budget.py::test_variant_cost_skips_the_depths_past_its_budget_and_says_so",
        "test_benchmark_budget.py::test_decode_runs_one_round_past_its_budget_and_standard_is_its_own_unit",
        "test_benchmark_budget.py::test_memory_plans_gpu_table_skips_groups_past_its_budget_and_says_so",
        "nas/test_cli.py::test_train_end_to_end",
        "nas/test_identity.py::test_train_set_of_an_unread_field_exits_2_with_one_line",
        "nas/test_sweep_coordcheck.py::test_a_completep_sweep_records_its_checks_and_the_report_shows_them",
        "trainers/test_module.py::test_compiled_training_matches_eager_and_keeps_the_diagnostics",
        "trainers/test_attnres_fused.py::test_kernels_match_under_the_interpreter",
        "test_gpu_check.py::test_a_table_stopped_mid_way_keeps_every_row_it_measured",
    }
)


def pytest_configure(config: pytest.Config) -> None:
    """One torch thread per pytest-xdist worker: two workers of two threads each on two cores
    spin against each other (OpenMP's busy wait), which measured slower than one process."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        import torch

        torch.set_num_threads(1)


def pytest_sessionstart(session: pytest.Session) -> None:
    """SIGTERM (``timeout 600 pytest``, a CI runner giving up) unwinds the run as Ctrl-C does:
    fixtures tear down (servers stop, databases are dropped) and ``pytest_sessionfinish``
    runs. Then drop what an earlier run killed harder (SIGKILL) left in PostgreSQL."""

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupt)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return  # the run's first process dropped them, before any worker made its own
    dropped = drop_leftovers(datetime.now(timezone.utc))
    if dropped:
        print(f"dropped {len(dropped)} leftover test databases: {', '.join(dropped)}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Stop the Ray cluster the session's sweeps shared, if one was started, and any process
    of this session's that outlived its test."""
    stop_shared()
    stop([p for p in pids_naming(SESSION_MARK) if not _resource_tracker(p)])


# The longest modules (real Ray sweeps and servers), longest first. pytest-xdist hands each
# worker whole modules in collection order as it frees up, so a long module collected last runs
# alone at the end while the other worker idles; handed out first, the short ones fill in
# around them.
LONGEST_FIRST = tuple(
    TESTS / name
    for name in (
        "nas/test_tracking_faults.py",
        "nas/test_sweep.py",
        "nas/test_data_parallel.py",
        "nas/test_fsdp.py",
        "nas/test_cluster.py",
        "reports/test_report.py",
        "nas/test_gpu_scheduling.py",
        "nas/test_postgres.py",
        "trainers/test_attnres_fused.py",
        "nas/test_ui.py",
    )
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test of ``SLOW_MODULES``, every test using a ``SLOW_FIXTURES`` fixture, and
    the ``SLOW_TESTS``, slow; then put the ``LONGEST_FIRST`` modules first, each module's tests
    together and in their own order (a stable sort)."""
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path, len(rank)))
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        where = item.path.relative_to(TESTS) if item.path.is_relative_to(TESTS) else item.path
        name = f"{where.as_posix()}::{getattr(item, 'originalname', '')}"
        if item.path in SLOW_MODULES or fixtures & SLOW_FIXTURES or name in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)


def _resource_tracker(pid: int) -> bool:
    """multiprocessing's resource tracker, which this process started and ends itself at its
    exit (killed first, it warns and leaks the semaphores it tracks)."""
    try:
        return b"resource_tracker" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


@pytest.fixture(scope="session")
def chromium() -> str:
    """A headless Chromium binary. Where there is none the test skips, saying how to install
    one; under ``CI=true`` it fails instead (``make test`` installs one there): CI must not pass
    a browser check it never ran."""
    try:
        return ensure_chromium()
    except ChromiumUnavailable as err:
        if os.environ.get("CI") == "true":
            pytest.fail(f"no headless Chromium under CI=true: {err}")
        pytest.skip(f"no headless Chromium: {err}")


@pytest.fixture(scope="session")
def swept(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """(folder, tracking URI) holding one finished ``smoke`` sweep with seeds 0 and 1, swept
    once for the whole test run by the command with its trials trained in this process
    (``tests.nas.sweeps.run_here``; what Ray adds, the real sweeps of tests/nas show): the
    report, diff, formats and dashboard tests only read it.
    Under pytest-xdist the first worker to ask sweeps it, under a file lock, into the run's
    shared temp folder, and the others read the same sweep."""
    import fcntl

    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # every worker's basetemp lies in the run's
    root = shared / "swept"
    uri = f"sqlite:///{root / 'mlflow.db'}"
    with (shared / "swept.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / "done").exists():
            shutil.rmtree(root, ignore_errors=True)
            root.mkdir()
            storage = ["--storage-path", str(root / "ray_results")]
            code, _ = run_here(root, ["smoke", "--seeds", "0,1", *storage])
            assert code == 0
            (root / "done").touch()
    return root, uri
