"""``nas ui``: the MLflow UI on the store the sweeps wrote, bound to loopback unless told."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from types import FrameType
from typing import Any

from record.uri import TRACKING_URI_HELP

# What ends ``nas ui``: Ctrl-C, a supervisor's ``kill``, a closed terminal.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "ui",
        help="start the MLflow UI on the sweeps' store (127.0.0.1 by default)",
        description="Serve the MLflow UI for the same store `nas sweep` writes "
        "(--tracking-uri, else MLFLOW_TRACKING_URI, else ./mlflow.db) and print the URL of "
        "each sweep's runs table. Ctrl-C (or SIGTERM, SIGHUP) stops it and every process it "
        "started.",
    )
    p.add_argument("--tracking-uri", help=f"{TRACKING_URI_HELP}; the store to show")
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=5000, help="port (default 5000)")
    p.set_defaults(run=run_ui)


def run_ui(args: argparse.Namespace) -> int:
    from nas.store.server import mlflow_command, mlflow_env
    from record.client import writer_store
    from record.redact import redact

    if not 0 < args.port < 65536:
        raise ValueError(f"--port {args.port}: expected 1 to 65535")
    # checked first: else the server retries a dead database for minutes, or prints a traceback
    uri = writer_store(args.tracking_uri).uri
    base = f"http://{args.host}:{args.port}"
    print(f"MLflow UI for {redact(uri)} at {base} (Ctrl-C stops it)", flush=True)
    for line in sweep_lines(uri, base):
        print(line, flush=True)
    # Its own session: the server's workers are found by the group id whatever ends us, and a
    # terminal's Ctrl-C reaches us only, so one shutdown stops the whole tree. The handlers
    # are in place before the server starts: no signal can end us and leave it behind.
    with _stop_on(STOP_SIGNALS):
        proc = None
        try:
            proc = subprocess.Popen(
                mlflow_command("ui", args.host, args.port),
                env=mlflow_env(uri),  # the store's password in no command line
                start_new_session=True,
            )
            return proc.wait()
        except _Stopped:
            return 0
        finally:
            if proc is not None:
                _end_group(proc)


def sweep_lines(uri: str, base: str) -> list[str]:
    """One line per sweep in the store: its name and its runs table's URL."""
    from nas.store.dashboard import runs_url
    from record.read import sweep_experiments

    return [
        f"  {name}: {runs_url(base, exp_id, tags)}" for name, exp_id, tags in sweep_experiments(uri)
    ]


class _Stopped(Exception):
    """A stop signal arrived (raised in the main thread by the handler)."""


@contextlib.contextmanager
def _stop_on(signals: tuple[signal.Signals, ...]) -> Iterator[None]:
    """Turn the first of ``signals`` to arrive into ``_Stopped`` while inside (later ones are
    ignored: they must not cut the shutdown short); the old handlers back after."""
    arrived: list[int] = []

    def stop(signum: int, frame: FrameType | None) -> None:
        if not arrived:
            arrived.append(signum)
            raise _Stopped(signum)

    old = {sig: signal.signal(sig, stop) for sig in signals}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def _end_group(proc: subprocess.Popen[bytes], grace_s: float = 20) -> None:
    """Stop every process of the server's group: SIGTERM, then SIGKILL to what outlives
    ``grace_s``. Waits on the group, not the leader: uvicorn's worker may outlive it."""
    _signal_group(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while _group_alive(proc) and time.monotonic() < deadline:
        time.sleep(0.1)
    if _group_alive(proc):
        _signal_group(proc.pid, signal.SIGKILL)
    proc.wait()


def _group_alive(proc: subprocess.Popen[bytes]) -> bool:
    proc.poll()  # reap the leader, else it counts as alive while a zombie
    try:
        os.killpg(proc.pid, 0)
    except ProcessLookupError:
        return False
    return True


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)
