"""Fixtures shared by the report tests."""

from __future__ import annotations

import pytest

from tests.reports.browser import ChromiumUnavailable, ensure_chromium


@pytest.fixture(scope="session")
def chromium() -> str:
    """A headless Chromium binary, installed when missing; the test skips, with the reason,
    where none can be had."""
    try:
        return ensure_chromium()
    except ChromiumUnavailable as err:
        pytest.skip(f"no headless Chromium: {err}")
