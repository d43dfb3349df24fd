"""A real ``mlflow server`` on a PostgreSQL database of its own (``postgres_db``), on
127.0.0.1 and a free port, with proxied artifacts in the test's folder: workers log through
``http://``. The test may kill it by its process id and start it again on the same port."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nas.tracking_server import TrackingServer
from tests.postgres import Database


@pytest.fixture
def pg_server(postgres_db: Database, tmp_path: Path) -> Iterator[TrackingServer]:
    server = TrackingServer(postgres_db.url, tmp_path / "artifacts", tmp_path / "mlflow-server.log")
    server.start()
    try:
        yield server
    finally:
        server.kill()
