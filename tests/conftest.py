"""Suite-wide marks: which test modules are ``slow``.

These modules start whole sweeps (``nas sweep`` in a subprocess, with its own local Ray; the
report, diff, formats and dashboard tests share one ``smoke`` sweep over two seeds, the README test runs
every documented command), a two-node Ray cluster, or a headless browser. A rule here rather
than a decorator per test, because
the rule holds whatever tests a module ends up with.
The few quick checks in these modules (bad input exiting 2 before any trial starts) ride along.
``make test`` still runs every test; ``make test-slow`` (``-m slow``) runs only these.

Also the suite-wide fixtures: ``postgres_db`` (a database of its own on a real PostgreSQL),
``pg_server`` (an MLflow tracking server on such a database), ``chromium`` (a headless
browser's binary) and ``swept`` (one real ``smoke`` sweep the read-only tests share).
"""

from __future__ import annotations

import os
import secrets
import signal
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from tests.cli import run_nas
from tests.postgres import drop_leftovers, postgres_db
from tests.ray_cluster import pids_naming, stop, stop_shared
from tests.reports.browser import ChromiumUnavailable, ensure_chromium
from tests.tracking_server import pg_server

__all__ = ["pg_server", "postgres_db"]

# Every process the suite starts inherits this (``tests.cli`` reads the environment when it
# starts one), so that whatever outlives its test is found and stopped when the session ends.
SESSION_MARK = f"NAS_TEST_SESSION={secrets.token_hex(8)}"
os.environ[SESSION_MARK.split("=")[0]] = SESSION_MARK.split("=")[1]

TESTS = Path(__file__).parent
SLOW_MODULES = frozenset(
    TESTS / name
    for name in (
        "nas/test_sweep.py",
        "nas/test_campaign.py",
        "nas/test_postgres.py",
        "nas/test_cluster.py",
        "nas/test_data_parallel.py",
        "nas/test_gpu_scheduling.py",
        "nas/test_tracking_faults.py",
        "nas/test_ui_browser.py",
        "reports/test_browser.py",
        "reports/test_formats.py",
        "reports/test_report.py",
        "reports/test_diff_sweep.py",
        "test_readme_commands.py",
    )
)


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
    stop(pids_naming(SESSION_MARK))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test of ``SLOW_MODULES`` slow."""
    for item in items:
        if item.path in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)


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
    once for the session: the report, diff, formats and dashboard tests only read it."""
    root = tmp_path_factory.mktemp("swept")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    proc = run_nas(root, "sweep", "smoke", "--seeds", "0,1", "--tracking-uri", uri)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return root, uri
