"""Running the ``nas`` command as a user does, in a subprocess (telemetry off)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.ray_cluster import shared_env

ENV = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"}


def run_nas(cwd: Path, *args: str, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    """``nas ARGS``; a sweep runs on the session's shared Ray cluster unless given one."""
    env = ENV
    if args[:1] == ("sweep",) and "--address" not in args:
        env = {**ENV, **shared_env()}
    return subprocess.run(
        [sys.executable, "-m", "nas.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
