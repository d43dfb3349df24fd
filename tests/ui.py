"""``nas ui`` as a user starts it, in a subprocess, and what the tests look at from outside: the
lines it prints, the server answering, the process group of the server it started."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tests.cli import env

START_TIMEOUT_S = 120  # a loaded two-core machine takes half a minute to import MLflow twice


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ui_command(uri: str, port: int) -> list[str]:
    """``nas ui --tracking-uri URI --port PORT``, as ``start_ui`` runs it."""
    return [sys.executable, "-m", "nas.cli", "ui", "--tracking-uri", uri, "--port", str(port)]


def start_ui(cwd: Path, uri: str, port: int, log: Path) -> subprocess.Popen[str]:
    """``nas ui --tracking-uri URI --port PORT`` in its own process group (as a terminal runs
    it), stdout piped, stderr to ``log``."""
    with log.open("w") as err:
        return subprocess.Popen(
            ui_command(uri, port),
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            cwd=cwd,
            env=env(),
            start_new_session=True,
        )


def start_study_ui(cwd: Path, url: str, port: int, log: Path) -> subprocess.Popen[str]:
    """``nas ui --optuna --port PORT`` with the study database ``url`` in its environment
    (``NAS_STUDY_STORAGE``), as a user with a password in the URL starts it; otherwise as
    ``start_ui``."""
    from record.uri import STUDY_STORAGE_ENV

    command = [sys.executable, "-m", "nas.cli", "ui", "--optuna", "--port", str(port)]
    with log.open("w") as err:
        return subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            cwd=cwd,
            env=env() | {STUDY_STORAGE_ENV: url},
            start_new_session=True,
        )


def get(url: str, deadline: float) -> bytes:
    """The body at ``url`` once the server answers (until ``deadline``)."""
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return bytes(response.read())
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def children(pid: int) -> list[int]:
    """The process ids whose parent is ``pid`` (from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # exited meanwhile
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def group_gone(pgid: int, timeout_s: float = 10) -> bool:
    """Whether every process of the group has exited within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    return False


def port_free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0
