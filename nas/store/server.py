"""How to start an MLflow server process (``mlflow server`` or ``mlflow ui``) on a store, one
worker: ``nas ui`` starts one. (The tests' own server, ``tests.tracking_server``, starts the
same way.)

The store's URI goes to the server through its environment, never its command line: a
``postgresql://`` URI carries a password, and every user of a shared login node reads every
process's arguments (``ps``), not its environment. MLflow's CLI takes each of its options from
an environment variable (``envvar=`` in ``mlflow/cli``); the uvicorn worker it starts gets the
store the same way."""

from __future__ import annotations

import os
import sys

BACKEND_ENV = "MLFLOW_BACKEND_STORE_URI"  # what ``mlflow server --backend-store-uri`` reads


def mlflow_command(sub: str, host: str, port: int, *extra: str) -> list[str]:
    """``mlflow server`` or ``mlflow ui``, one worker: the default four cost about 2 GB of
    memory for no gain at this load. No secret may be in ``extra``: the store is in
    ``mlflow_env``."""
    return [
        sys.executable,
        "-m",
        "mlflow",
        sub,
        *extra,
        "--host",
        host,
        "--port",
        str(port),
        "--workers",
        "1",
    ]


def mlflow_env(backend: str) -> dict[str, str]:
    """This process's environment for the server on ``backend``: the store, no background job
    runner (half the start-up time and memory), no telemetry."""
    return {
        **os.environ,
        BACKEND_ENV: backend,
        "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
        "MLFLOW_DISABLE_TELEMETRY": "true",
    }
