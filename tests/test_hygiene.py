"""The suite cleans up after runs that could not: leftover test databases are dropped when the
next run starts, only those, only when old and unused."""

from __future__ import annotations

import inspect
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import psycopg
import pytest

from tests.postgres import LEFTOVER_AGE, SERVER, drop_leftovers


def _exists(admin: psycopg.Connection, name: str) -> bool:
    query = "SELECT 1 FROM pg_database WHERE datname = %s"
    return admin.execute(query, (name,)).fetchone() is not None


def test_leftover_test_databases_are_dropped_when_old_and_unused() -> None:
    """A ``nas_test_*`` database is dropped (with its ``nas_role_*`` owner) only once it is
    older than ``LEFTOVER_AGE`` at the run's start and nobody is connected; another name is
    never touched. The run's start is moved instead of the database's age, so the call looks
    at this test's names only (``like``): moved, it would take a test run going on beside this
    one for an old one (seen: it dropped the fault test's database during its outage)."""
    try:
        admin = psycopg.connect(SERVER, autocommit=True, connect_timeout=5)
    except psycopg.Error as err:
        pytest.skip(f"no PostgreSQL: {err}")
    tag = secrets.token_hex(4)
    role, name, other = f"nas_role_{tag}", f"nas_test_{tag}", f"nas_keep_{tag}"
    mine = rf"nas\_test\_{tag}"  # this test's database, no other run's
    with admin:
        admin.execute(f"CREATE ROLE {role} LOGIN")
        admin.execute(f"CREATE DATABASE {name} OWNER {role}")
        admin.execute(f"CREATE DATABASE {other}")
        try:
            now = datetime.now(timezone.utc)
            later = now + LEFTOVER_AGE + timedelta(minutes=1)
            assert name not in drop_leftovers(now, mine)  # too young: a run beside this one's
            with psycopg.connect(SERVER.rsplit("/", 1)[0] + f"/{name}"):
                assert name not in drop_leftovers(later, mine)  # in use
            assert drop_leftovers(later, mine) == [name]
            default = inspect.signature(drop_leftovers).parameters["like"].default
            matches = "SELECT %s LIKE %s, %s LIKE %s"
            assert admin.execute(matches, (name, default, other, default)).fetchone() == (
                True,
                False,
            )  # the run's own pattern takes nas_test_* only
            assert not _exists(admin, name) and _exists(admin, other)
            assert (
                admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone()
                is None
            )
        finally:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            admin.execute(f"DROP DATABASE IF EXISTS {other} WITH (FORCE)")
            admin.execute(f"DROP ROLE IF EXISTS {role}")


INNER = """
import json, os, time

def test_holds_a_server(pg_server, postgres_db):
    info = {"url": pg_server.url, "pid": pg_server.proc.pid, "db": postgres_db.url.rsplit("/", 1)[1]}
    (__import__("pathlib").Path(os.environ["NAS_HYGIENE_OUT"])).write_text(json.dumps(info))
    time.sleep(300)
"""


def test_a_test_run_ended_by_sigterm_stops_its_server_and_drops_its_database(
    tmp_path: Path,
) -> None:
    """``timeout 600 pytest`` sends SIGTERM: the run tears down as on Ctrl-C. A test holding
    an MLflow server on a database of its own is ended that way; afterwards the server's
    process is gone, its port is free and its database is dropped."""
    root = Path(__file__).resolve().parents[1]
    (tmp_path / "test_inner.py").write_text(INNER)
    out = tmp_path / "held.json"
    env = {**os.environ, "NAS_HYGIENE_OUT": str(out)}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest",
           "--rootdir", str(tmp_path), "-o", "addopts=", str(tmp_path / "test_inner.py")]  # fmt: skip
    proc = subprocess.Popen(
        cmd, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    deadline = time.monotonic() + 180
    while not out.exists():
        assert proc.poll() is None, proc.stdout.read().decode()[-3000:] if proc.stdout else ""
        assert time.monotonic() < deadline, "the inner test never held its server"
        time.sleep(0.2)
    held = json.loads(out.read_text())
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=120)
    assert not Path(f"/proc/{held['pid']}").exists(), "the server outlived the run"
    host, port = held["url"].removeprefix("http://").split(":")
    with socket.socket() as s:
        assert s.connect_ex((host, int(port))) != 0, "the server's port still answers"
    with psycopg.connect(SERVER, autocommit=True, connect_timeout=5) as admin:
        assert not _exists(admin, held["db"]), "the run's database was left behind"
