"""The command line of an MLflow server process (``mlflow server`` or ``mlflow ui``) on a store,
one worker: ``nas ui`` starts one. (The tests' own server, ``tests.tracking_server``, builds its
command line here too.)"""

from __future__ import annotations

import sys


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
