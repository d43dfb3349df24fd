"""A real ``mlflow server`` as a child process, for the tests and the scale benchmark: a
database store with proxied artifacts, bound to loopback unless told, one worker. The tests start
one on a PostgreSQL database of their own (``pg_server``), kill it by its process id and start it
again on the same port; workers log through ``http://``.

It lives with the tests because only they and ``benchmarks/harness/sweep_scale.py`` (dev tooling) start
a server this way; the product's ``nas ui`` starts its own as this does, from
``nas.store.server`` (the store in the server's environment, not its command line)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from nas.store.server import mlflow_command, mlflow_env
from tests.postgres import Database
from tests.ui import free_port


def server_command(artifacts: Path, host: str, port: int) -> list[str]:
    return mlflow_command("server", host, port, "--artifacts-destination", str(artifacts))


class TrackingServer:
    """One ``mlflow server``; ``kill`` ends it (and the workers it forked) at once, ``start``
    brings it back on the same port and store."""

    def __init__(
        self, backend: str, artifacts: Path, log: Path, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self.backend, self.artifacts, self.log = backend, artifacts, log
        self.host, self.port = host, port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout: float = 120) -> None:
        with self.log.open("a") as log:
            self.proc = subprocess.Popen(
                server_command(self.artifacts, self.host, self.port),
                env=mlflow_env(self.backend),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: kill() reaches its workers
            )
        self.wait_ready(timeout)

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.proc is not None and self.proc.poll() is not None:
                tail = self.log.read_text()[-2000:]
                raise RuntimeError(f"mlflow server exited with {self.proc.returncode}: {tail}")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=5) as response:
                    if response.status == 200:
                        return
            except OSError:
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.25)

    def kill(self) -> None:
        """SIGKILL to the server's process group, as a crashed host would end it."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        self.proc = None


@pytest.fixture
def pg_server(postgres_db: Database, tmp_path: Path) -> Iterator[TrackingServer]:
    with serving(postgres_db, tmp_path) as server:
        yield server


@contextlib.contextmanager
def serving(db: Database, folder: Path) -> Iterator[TrackingServer]:
    """A server on ``db``, its artifacts and log in ``folder``, killed on leaving."""
    server = TrackingServer(db.url, folder / "artifacts", folder / "mlflow-server.log")
    server.start()
    try:
        yield server
    finally:
        server.kill()
