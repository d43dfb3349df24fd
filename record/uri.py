"""Tracking URIs as the harness reads them: the one parser of a ``sqlite:///`` URI (its file,
relative or absolute, with any ``?query`` SQLAlchemy passes to the driver kept apart), and the
URI a run resolves to.

SQLAlchemy's form is ``sqlite:///<path>[?<query>]``: three slashes and a relative path, four
and an absolute one; ``:memory:`` (or nothing) is an in-memory database. The query
(``?timeout=5``) is the driver's, never part of the file name.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

SQLITE_PREFIX = "sqlite:///"
MEMORY = ":memory:"


@dataclass(frozen=True)
class SqliteUri:
    """A ``sqlite:///`` URI taken apart: ``path`` as written (relative to the working directory
    when not absolute; empty or ``:memory:`` for an in-memory database) and ``query`` (without
    its ``?``)."""

    path: str
    query: str

    @property
    def in_memory(self) -> bool:
        return self.path in ("", MEMORY)

    def file(self) -> Path | None:
        """The database file, absolute (from the working directory); None in memory."""
        return None if self.in_memory else Path(self.path).absolute()


def sqlite_uri(uri: str) -> SqliteUri | None:
    """``uri`` taken apart when it is a SQLite URI (a driver may follow a ``+``:
    ``sqlite+pysqlite:///``); None for any other store."""
    scheme, sep, rest = uri.partition(":///")
    if not sep or scheme.split("+")[0].lower() != "sqlite":
        return None
    path, _, query = rest.partition("?")
    return SqliteUri(path, query)


def sqlite_file(uri: str) -> Path | None:
    """The database file of a SQLite URI, absolute; None for other stores and in memory."""
    parsed = sqlite_uri(uri)
    return None if parsed is None else parsed.file()


def missing_sqlite(uri: str) -> bool:
    """Whether ``uri`` is a SQLite file that does not exist: reading it would create it."""
    path = sqlite_file(uri)
    return path is not None and not path.is_file()


def absolute_sqlite(uri: str) -> str:
    """A SQLite URI with a relative path (``sqlite:///mlflow.db``) made absolute from here, its
    query kept: trial workers run in folders of their own, where the relative path names another
    file (their runs would go to a store of their own, or fail to find the sweep's experiment)."""
    parsed = sqlite_uri(uri)
    if parsed is None or parsed.in_memory or Path(parsed.path).is_absolute():
        return uri
    return f"{uri.partition(':///')[0]}:///{Path(parsed.path).resolve()}" + (
        f"?{parsed.query}" if parsed.query else ""
    )


# Every command's --tracking-uri help: the environment first, since a password on a command
# line is readable by every user of the machine (ps, /proc/*/cmdline).
TRACKING_URI_HELP = (
    "MLflow store; give one with a password as MLFLOW_TRACKING_URI (the environment, which "
    "the process list does not show) or keep the password in ~/.pgpass (default: "
    "MLFLOW_TRACKING_URI, else ./mlflow.db)"
)


# A search's Optuna study database where a command line would show it to every user of the
# machine: ``nas sweep`` keeps the study there, ``nas ui --optuna`` serves it.
STUDY_STORAGE_ENV = "NAS_STUDY_STORAGE"


def resolve_tracking_uri(cli: str | None = None) -> str:
    """``--tracking-uri``, else ``MLFLOW_TRACKING_URI``, else MLflow's own default: a SQLite
    file in the working directory, so ``mlflow ui`` there shows the runs."""
    default = f"{SQLITE_PREFIX}{Path.cwd() / 'mlflow.db'}"
    uri = cli or os.environ.get("MLFLOW_TRACKING_URI") or default
    return absolute_sqlite(uri)
