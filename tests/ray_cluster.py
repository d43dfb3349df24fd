"""Ray clusters of the tests' own: the processes of one (found by its temp folder, which
their command lines or environments name, and their descendants) and the arguments that give a
node its own ports; and one cluster shared by the sweeps of a test session.

Every ``nas sweep`` on its own starts a local Ray and stops it again, about 7 s of each test
sweep on 2 cores. The sweeps that need nothing of their own (no per-test environment for the
workers, no processes to kill) join ``shared_env()`` instead, started on first use and
stopped when the session ends (``conftest.pytest_sessionfinish``). Ray's ``ray stop`` would stop
every Ray process of the user, so these are stopped by process id."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pids_naming(text: str) -> list[int]:
    """Processes whose command line or environment contains ``text`` (our temp folder), and
    their descendants (the raylet's workers and agents rename themselves ``ray::...``, and are
    orphaned when a driver is killed); this one excluded."""
    named, parent = set(), {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes() + (entry / "environ").read_bytes()
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
        if text.encode() in cmdline:  # in its arguments or its environment
            named.add(int(entry.name))
    found = set(named)
    while True:
        more = {pid for pid, ppid in parent.items() if ppid in found} - found
        if not more:
            return sorted(found)
        found |= more


def stop(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def node_args(name: str, root: Path, cpus: int = 1, gpus: int = 0) -> list[str]:
    """Own ports and temp folder for one node: two raylets on one machine must not share the
    fixed default ports (the dashboard agent's 52365 among them). ``gpus``: logical GPUs, which
    Ray assigns (and names in CUDA_VISIBLE_DEVICES) whether or not the machine has any."""
    return [
        f"--temp-dir={root / name}",
        f"--node-manager-port={free_port()}",
        f"--object-manager-port={free_port()}",
        f"--dashboard-agent-listen-port={free_port()}",
        f"--dashboard-agent-grpc-port={free_port()}",
        f"--metrics-export-port={free_port()}",
        f"--runtime-env-agent-port={free_port()}",
        f"--num-cpus={cpus}",
        f"--num-gpus={gpus}",
        "--disable-usage-stats",
    ]


_shared: dict[str, str] = {}


def shared_env() -> dict[str, str]:
    """What a sweep's environment needs to join the session's shared cluster (one node, 2
    CPUs, token authentication as Ray's ``ray start`` requires), started on first use."""
    if "RAY_ADDRESS" not in _shared:
        # Ray's Unix sockets live in the temp folder, whose path must stay short (108 bytes).
        root = Path(tempfile.mkdtemp(prefix="nas-ray-shared-", dir="/tmp"))
        port = free_port()
        auth = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}
        env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", **auth}
        head = [str(BIN / "ray"), "start", "--head", "--node-ip-address=127.0.0.1",
                f"--port={port}", "--include-dashboard=false", *node_args("head", root, cpus=2)]  # fmt: skip
        _shared["root"] = str(root)
        subprocess.run(head, env=env, check=True, capture_output=True, timeout=180)
        _shared.update(auth, RAY_ADDRESS=f"127.0.0.1:{port}")
    return {k: v for k, v in _shared.items() if k != "root"}


def shared_root() -> Path | None:
    """The shared cluster's temp folder (its sessions' logs), if it was started."""
    root = _shared.get("root")
    return None if root is None else Path(root)


def stop_shared() -> None:
    root = _shared.get("root")
    _shared.clear()
    if root is not None:
        stop(pids_naming(root))
        shutil.rmtree(root, ignore_errors=True)
