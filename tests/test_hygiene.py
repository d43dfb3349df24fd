"""The suite cleans up after runs that could not: leftover test databases are dropped when the
next run starts, only those, only when old and unused."""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta, timezone

import psycopg
import pytest

from tests.postgres import LEFTOVER_AGE, SERVER, drop_leftovers


def _exists(admin: psycopg.Connection, name: str) -> bool:
    query = "SELECT 1 FROM pg_database WHERE datname = %s"
    return admin.execute(query, (name,)).fetchone() is not None


def test_leftover_test_databases_are_dropped_when_old_and_unused() -> None:
    """A ``nas_test_*`` database is dropped (with its ``nas_role_*`` owner) only once it is
    older than ``LEFTOVER_AGE`` at the run's start and nobody is connected; another name is
    never touched. The run's start is moved instead of the database's age."""
    try:
        admin = psycopg.connect(SERVER, autocommit=True, connect_timeout=5)
    except psycopg.Error as err:
        pytest.skip(f"no PostgreSQL: {err}")
    tag = secrets.token_hex(4)
    role, name, other = f"nas_role_{tag}", f"nas_test_{tag}", f"keep_{tag}"
    with admin:
        admin.execute(f"CREATE ROLE {role} LOGIN")
        admin.execute(f"CREATE DATABASE {name} OWNER {role}")
        admin.execute(f"CREATE DATABASE {other}")
        try:
            now = datetime.now(timezone.utc)
            later = now + LEFTOVER_AGE + timedelta(minutes=1)
            assert name not in drop_leftovers(now)  # too young: a run beside this one's
            with psycopg.connect(SERVER.rsplit("/", 1)[0] + f"/{name}"):
                assert name not in drop_leftovers(later)  # in use
            assert name in drop_leftovers(later)
            assert not _exists(admin, name) and _exists(admin, other)
            assert (
                admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone()
                is None
            )
        finally:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            admin.execute(f"DROP DATABASE IF EXISTS {other} WITH (FORCE)")
            admin.execute(f"DROP ROLE IF EXISTS {role}")
