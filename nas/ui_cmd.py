"""``nas ui``: the MLflow UI on the store the sweeps wrote, bound to loopback unless told."""

from __future__ import annotations

import argparse
import os
import subprocess
from typing import Any


def add_ui_parser(sub: Any) -> None:
    p = sub.add_parser(
        "ui",
        help="start the MLflow UI on the sweeps' store (127.0.0.1 by default)",
        description="Serve the MLflow UI for the same store `nas sweep` writes "
        "(--tracking-uri, else MLFLOW_TRACKING_URI, else ./mlflow.db). Ctrl-C stops it.",
    )
    p.add_argument("--tracking-uri", help="the MLflow store to show")
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=5000, help="port (default 5000)")
    p.set_defaults(run=run_ui)


def ui_command(uri: str, host: str, port: int) -> list[str]:
    from nas.tracking_server import mlflow_command

    return mlflow_command("ui", uri, host, port)


def run_ui(args: argparse.Namespace) -> int:
    from nas.tracking import resolve_tracking_uri
    from reports.redact import redact
    from reports.stores import check_store

    if not 0 < args.port < 65536:
        raise ValueError(f"--port {args.port}: expected 1 to 65535")
    uri = resolve_tracking_uri(args.tracking_uri)
    check_store(uri)  # else the server retries a dead database for minutes, or prints a traceback
    env = {
        **os.environ,
        "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
        "MLFLOW_DISABLE_TELEMETRY": "true",
    }
    print(
        f"MLflow UI for {redact(uri)} at http://{args.host}:{args.port} (Ctrl-C stops it)",
        flush=True,
    )
    proc = subprocess.Popen(ui_command(uri, args.host, args.port), env=env)
    try:
        return proc.wait()
    except KeyboardInterrupt:
        proc.terminate()
        proc.wait(timeout=30)
        return 0
