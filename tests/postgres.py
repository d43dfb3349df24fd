"""A real PostgreSQL for the tests that need one (the project's machines run PostgreSQL 15 on
127.0.0.1:5432): each test gets a database of its own, with a role of its own that has a
password, and both are dropped afterwards. The server comes from ``NAS_TEST_POSTGRES``; where
none answers the test is skipped saying so, except under ``CI=true``, where that is a failure:
CI must never pass by skipping."""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from record.redact import redact

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
    with database() as db:
        yield db


@contextlib.contextmanager
def database() -> Iterator[Database]:
    """A database and role of their own, dropped on leaving (``postgres_db``'s, for a fixture
    of a wider scope)."""
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


# Each leftover's name and owner with the time its folder was made (pg_stat_file needs a
# superuser, as the default server's postgres role is; elsewhere nothing is found).
_LEFTOVERS = r"""
SELECT d.datname, r.rolname, (pg_stat_file('base/' || d.oid || '/PG_VERSION')).modification
FROM pg_database d JOIN pg_roles r ON r.oid = d.datdba
WHERE d.datname LIKE %s
"""


# A test's database lives no longer than its test, which pytest-timeout ends at 600 s: one made
# longer ago than this before a run started belongs to no test still running.
LEFTOVER_AGE = timedelta(minutes=15)


def drop_leftovers(started: datetime, like: str = r"nas\_test\_%") -> list[str]:
    """Drop the ``nas_test_*`` databases (and their ``nas_role_*`` owners) made more than
    ``LEFTOVER_AGE`` before ``started`` that nobody is connected to: what an earlier test run
    killed before its teardown left behind. Only those: a test run going on beside this one
    keeps its databases (one whose server is down for an outage test has no connection for a
    while; its age protects it). Returns the names dropped; a server that does not answer
    drops nothing. ``like``: the names considered (a test of this narrows it to its own)."""
    try:
        admin = _admin()
    except psycopg.Error:
        return []
    dropped = []
    with admin:
        try:
            rows = admin.execute(_LEFTOVERS, (like,)).fetchall()
        except psycopg.Error:  # not a superuser: the ages cannot be read
            return []
        for name, owner, made in rows:
            if made >= started - LEFTOVER_AGE:
                continue
            with contextlib.suppress(psycopg.Error):  # in use: another run's, kept
                admin.execute(f'DROP DATABASE "{name}"')
                dropped.append(name)
                if owner.startswith("nas_role_"):
                    admin.execute(f'DROP ROLE IF EXISTS "{owner}"')
    return dropped
