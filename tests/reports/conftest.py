"""Fixtures shared by the report tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli import run_nas
from tests.reports.browser import ChromiumUnavailable, ensure_chromium


@pytest.fixture(scope="session")
def swept(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """(folder, tracking URI) holding one finished ``smoke`` sweep with seeds 0 and 1, swept
    once for the session: the report, diff and formats tests only read it."""
    root = tmp_path_factory.mktemp("swept")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    proc = run_nas(root, "sweep", "smoke", "--seeds", "0,1", "--tracking-uri", uri)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return root, uri


@pytest.fixture(scope="session")
def chromium() -> str:
    """A headless Chromium binary, installed when missing; the test skips, with the reason,
    where none can be had."""
    try:
        return ensure_chromium()
    except ChromiumUnavailable as err:
        pytest.skip(f"no headless Chromium: {err}")
