"""A real PostgreSQL for the tests that need one (the project's machines run PostgreSQL 15 on
127.0.0.1:5432): each test gets a database of its own, with a role of its own that has a
password, and both are dropped afterwards. The server comes from ``NAS_TEST_POSTGRES``; where
none answers the test is skipped saying so, except under ``CI=true``, where that is a failure:
CI must never pass by skipping."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from reports.redact import redact

SERVER = os.environ.get("NAS_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")


@dataclass(frozen=True)
class Database:
    url: str  # postgresql://<role>:<password>@host:port/<database>
    password: str


def _admin() -> psycopg.Connection:
    return psycopg.connect(SERVER, autocommit=True, connect_timeout=5)


def _unavailable(reason: str) -> None:
    message = f"no PostgreSQL at {redact(SERVER)} ({reason}); set NAS_TEST_POSTGRES"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture
def postgres_db() -> Iterator[Database]:
    try:
        admin = _admin()
    except psycopg.Error as err:
        _unavailable(str(err).strip().splitlines()[0])
    tag = secrets.token_hex(4)
    role, name, password = f"nas_role_{tag}", f"nas_test_{tag}", f"pw-{secrets.token_hex(8)}"
    with admin:
        admin.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
        admin.execute(f"CREATE DATABASE {name} OWNER {role}")
        info = conninfo_to_dict(SERVER)
        host, port = info.get("host", "127.0.0.1"), info.get("port", "5432")
        try:
            yield Database(f"postgresql://{role}:{password}@{host}:{port}/{name}", password)
        finally:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            admin.execute(f"DROP ROLE IF EXISTS {role}")
