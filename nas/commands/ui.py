"""``nas ui``: the MLflow UI on the store the sweeps wrote, or with ``--optuna`` the Optuna
dashboard on a search's study database, bound to loopback unless told. Either server gets its
store's URL through its environment, never its command line."""

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

from record.uri import STUDY_STORAGE_ENV, TRACKING_URI_HELP

# What ends ``nas ui``: Ctrl-C, a supervisor's ``kill``, a closed terminal.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# Each server's usual port: the two can run side by side with no --port.
MLFLOW_PORT, OPTUNA_PORT = 5000, 8080


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "ui",
        help="start the MLflow UI on the sweeps' store, or the Optuna dashboard on a search's "
        "study (127.0.0.1 by default)",
        description="Serve the MLflow UI for the same store `nas sweep` writes "
        "(--tracking-uri, else MLFLOW_TRACKING_URI, else ./mlflow.db) and print the URL of "
        "each sweep's runs table; with --optuna, serve the Optuna dashboard for the searches' "
        f"study database ({STUDY_STORAGE_ENV}, else --study-storage) and print each study's "
        "page. Ctrl-C (or SIGTERM, SIGHUP) stops it and every process it started.",
    )
    p.add_argument("--tracking-uri", help=f"{TRACKING_URI_HELP}; the store to show")
    p.add_argument(
        "--optuna",
        action="store_true",
        help="serve the Optuna dashboard on the study database `nas sweep --study-storage` "
        "kept, instead of the MLflow UI",
    )
    p.add_argument(
        "--study-storage",
        metavar="URL",
        help=f"with --optuna, the study database; give one with a password as "
        f"{STUDY_STORAGE_ENV} (the environment, which the process list does not show) or keep "
        f"the password in ~/.pgpass (default: {STUDY_STORAGE_ENV})",
    )
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    p.add_argument(
        "--port",
        type=int,
        help=f"port (default {MLFLOW_PORT}, or {OPTUNA_PORT} with --optuna)",
    )
    p.set_defaults(run=run_ui)


def run_ui(args: argparse.Namespace) -> int:
    port = args.port or (OPTUNA_PORT if args.optuna else MLFLOW_PORT)
    if not 0 < port < 65536:
        raise ValueError(f"--port {port}: expected 1 to 65535")
    if args.optuna:
        command, env = _study_server(args, port)
    elif args.study_storage:
        raise ValueError("--study-storage: only with --optuna (the Optuna dashboard)")
    else:
        command, env = _mlflow_server(args, port)
    return _serve(command, env)


def _mlflow_server(args: argparse.Namespace, port: int) -> tuple[list[str], dict[str, str]]:
    """``mlflow ui`` on the tracking store, after its first lines are printed."""
    from nas.store.server import mlflow_command, mlflow_env
    from record.client import writer_store
    from record.redact import redact

    # checked first: else the server retries a dead database for minutes, or prints a traceback
    uri = writer_store(args.tracking_uri).uri
    base = f"http://{args.host}:{port}"
    print(f"MLflow UI for {redact(uri)} at {base} (Ctrl-C stops it)", flush=True)
    for line in sweep_lines(uri, base):
        print(line, flush=True)
    return mlflow_command("ui", args.host, port), mlflow_env(uri)  # no password in argv


def _study_server(args: argparse.Namespace, port: int) -> tuple[list[str], dict[str, str]]:
    """The Optuna dashboard on the study database, after its first lines are printed."""
    from nas.store.study_dashboard import study_command, study_env, study_urls
    from record.redact import redact

    url = _study_storage(args.study_storage or os.environ.get(STUDY_STORAGE_ENV))
    base = f"http://{args.host}:{port}"
    studies = study_urls(url, base)
    if not studies:
        raise ValueError(
            redact(
                f"--study-storage {url}: no Optuna study there; a search keeps one with "
                f"`nas sweep --study-storage` (or {STUDY_STORAGE_ENV})"
            )
        )
    print(f"Optuna dashboard for {redact(url)} at {base} (Ctrl-C stops it)", flush=True)
    for name, page in studies:
        print(f"  {name}: {page}", flush=True)
    return study_command(args.host, port), study_env(url)  # no password in argv


def _study_storage(url: str | None) -> str:
    """The study database's URL, checked: SQLite that exists (reading a missing file would
    create it) or a PostgreSQL database that takes the login."""
    from record.stores import check_study_storage
    from record.uri import absolute_sqlite, missing_sqlite

    if not url:
        raise ValueError(
            f"--optuna: no study database; set {STUDY_STORAGE_ENV} (or --study-storage) to the "
            "URL `nas sweep --study-storage` was given"
        )
    check_study_storage(url)
    if missing_sqlite(url):
        raise ValueError(f"--study-storage {url}: no such file")
    return absolute_sqlite(url)


def _serve(command: list[str], env: dict[str, str]) -> int:
    """Run the server ``command`` until it ends or a stop signal arrives; its whole process
    group gone either way."""
    # Its own session: the server's workers are found by the group id whatever ends us, and a
    # terminal's Ctrl-C reaches us only, so one shutdown stops the whole tree. The handlers
    # are in place before the server starts: no signal can end us and leave it behind.
    with _stop_on(STOP_SIGNALS):
        proc = None
        try:
            proc = subprocess.Popen(command, env=env, start_new_session=True)
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
