"""An MLflow tracking server as a child process: ``mlflow server`` on a database store with
proxied artifacts, bound to loopback unless told, one worker. The tests and the scale benchmark
start one on PostgreSQL, kill it by its process id and start it again on the same port."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now (the caller binds it soon after)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def mlflow_command(sub: str, backend: str, host: str, port: int, *extra: str) -> list[str]:
    """``mlflow server`` or ``mlflow ui`` on a store, one worker: the default four cost about
    2 GB of memory for no gain at this load."""
    return [
        sys.executable,
        "-m",
        "mlflow",
        sub,
        "--backend-store-uri",
        backend,
        *extra,
        "--host",
        host,
        "--port",
        str(port),
        "--workers",
        "1",
    ]


def server_command(backend: str, artifacts: Path, host: str, port: int) -> list[str]:
    return mlflow_command("server", backend, host, port, "--artifacts-destination", str(artifacts))


class TrackingServer:
    """One ``mlflow server``; ``kill`` ends it (and the workers it forked) at once, ``start``
    brings it back on the same port and store."""

    def __init__(
        self, backend: str, artifacts: Path, log: Path, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self.backend, self.artifacts, self.log = backend, artifacts, log
        self.host, self.port = host, port or free_port(host)
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout: float = 120) -> None:
        env = {
            **os.environ,
            "MLFLOW_DISABLE_TELEMETRY": "true",
            "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
        }
        with self.log.open("a") as log:
            self.proc = subprocess.Popen(
                server_command(self.backend, self.artifacts, self.host, self.port),
                env=env,
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
