"""Running the ``nas`` command as a user does, in a subprocess (telemetry off), or its code
in this process (``nas_here``)."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

from tests.ray_cluster import shared_env


def env() -> dict[str, str]:
    """The environment a test's ``nas`` runs in: this process's as it is now (the session's
    mark included, ``tests/conftest.py``), telemetry off."""
    return {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"}


def run_nas(cwd: Path, *args: str, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    """``nas ARGS``; a sweep runs on the session's shared Ray cluster unless given one."""
    environ = env()
    if args[:1] == ("sweep",) and "--address" not in args:
        environ |= shared_env()
    cmd = [sys.executable, "-m", "nas.cli", *args]
    with subprocess.Popen(
        cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environ
    ) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except BaseException:  # a timeout, or the run interrupted (Ctrl-C, SIGTERM)
            _stop(proc)
            raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _stop(proc: subprocess.Popen[str]) -> None:
    """SIGTERM first: ``nas`` then closes its record and stops the Ray it started, which a
    SIGKILL would leave running."""
    proc.terminate()
    try:
        proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()


def nas_here(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``nas ARGS`` in this process, in ``cwd``: ``nas.cli.main``, what the program runs,
    without an interpreter's start and the imports (seconds each on 2 cores). For commands that
    start no Ray, server or process of their own; a sweep runs in a subprocess (``run_nas``)."""
    from nas.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exit_:  # argparse's --help and refusals end the process
            code = exit_.code if isinstance(exit_.code, int) else 1
    return subprocess.CompletedProcess(["nas", *args], code, out.getvalue(), err.getvalue())
