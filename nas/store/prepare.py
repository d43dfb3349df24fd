"""The first opening of a tracking store, one process at a time: a store that has no tables yet
is created and migrated by exactly one process while every other process that opens it waits.

Why: MLflow 3.17's ``SqlAlchemyStore.__init__`` (``mlflow/store/tracking/sqlalchemy_store.py``)
asks ``_all_tables_exist`` and, when not, runs ``_initialize_tables`` (``create_all`` and
alembic's upgrade to head) with no lock: its locked variant, ``_safe_initialize_tables`` in
``mlflow/store/db/utils.py``, serves only the jobs and workspace stores, and locks a file in the
local temp folder. Eight trials opening a fresh store at once all migrate it, and all but one or
two fail: on SQLite "duplicate column name", "table ... already exists" or alembic's "expected to
match one row"; on PostgreSQL a unique violation creating ``alembic_version``.

The lock is where every opener can see it: a file lock (``flock``) on a file beside the SQLite
file (trials on one machine, whatever their temp folder), a session-level advisory lock in the
PostgreSQL database (trials on any machine of a cluster). Other stores (a tracking server, which
migrates its database once at start, or a folder) are opened unlocked. MLflow is imported inside
the functions, as in ``nas.store.tracking``.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from pathlib import Path

from record.client import mlflow_client
from record.stores import libpq_url
from record.uri import sqlite_file

# The advisory lock's key: any fixed 64-bit number (PostgreSQL scopes advisory locks to the
# database, so one key serves every store).
_PG_LOCK_KEY = int.from_bytes(hashlib.sha256(b"nas.store_init").digest()[:8], "big", signed=True)
CONNECT_TIMEOUT_S = 10

_prepared: set[str] = set()  # stores this process has opened (the lock is needed once)


def prepare_store(uri: str) -> None:
    """Open the MLflow store at ``uri`` (with its password: the URI MLflow connects to) for the
    first time in this process under a lock every other opener of the same store waits for, so
    that its tables are created and migrated once. Cheap after the first call; errors are
    MLflow's or the database driver's, as opening the store unlocked would raise."""
    if uri in _prepared:
        return
    with _init_lock(uri):
        mlflow_client(uri)  # builds (and MLflow caches) the store: tables, migration
    _prepared.add(uri)


def _init_lock(uri: str) -> contextlib.AbstractContextManager[None]:
    sqlite = sqlite_file(uri)
    if sqlite is not None:
        return _file_lock(sqlite.with_name(f"{sqlite.name}.init-lock"))
    url = libpq_url(uri)
    if url is not None:
        return _advisory_lock(url)
    return contextlib.nullcontext()


@contextlib.contextmanager
def _file_lock(lock: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``lock``, which is removed again on success so the store's
    folder keeps only the store. Removing it is safe: a process still waiting on the removed
    file, and one that creates a new one, both open a store that is already migrated (MLflow
    looks for its tables again), so no two processes ever migrate at once."""
    import fcntl

    try:
        lock.parent.mkdir(parents=True, exist_ok=True)  # MLflow would create it for the file
        handle = lock.open("w")
    except OSError:  # a read-only folder: a store there can be read, not created or migrated
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
        lock.unlink(missing_ok=True)
    # closing the file released the lock, on failure too (the file is then left in place)


@contextlib.contextmanager
def _advisory_lock(url: str) -> Iterator[None]:
    """``pg_advisory_lock`` held by a connection of its own; closing the connection releases it
    (and PostgreSQL does so when a holder dies). A database that does not answer is left to
    MLflow, which retries it for a while (a trial starting during a short outage)."""
    import psycopg

    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
    except psycopg.Error:
        yield
        return
    with conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (_PG_LOCK_KEY,))
        yield
