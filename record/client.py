"""The one MLflow client set-up, for writer and reader alike; the writer's store, resolved and
checked once; and the reader's open: a client on a store that answers, or one line saying why
not."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any

from record.errors import first_line
from record.redact import redact
from record.stores import check_store
from record.uri import missing_sqlite, resolve_tracking_uri


@dataclass(frozen=True)
class Store:
    """A writer's tracking store, resolved and checked once."""

    uri: str  # --tracking-uri, MLFLOW_TRACKING_URI or ./mlflow.db; a relative SQLite path absolute
    exists: bool  # False: a SQLite file not there yet, which the first write creates


def writer_store(cli: str | None) -> Store:
    """The store a writer records in, resolved from ``--tracking-uri`` (``cli``) and checked:
    ValueError, one line, when MLflow has no store for its scheme or a PostgreSQL store cannot
    be reached. A SQLite file that does not exist yet is allowed (nothing is recorded in it
    until the first write) and said so, so that a reader does not create it by looking."""
    uri = resolve_tracking_uri(cli)
    check_store(uri)
    return Store(uri, not missing_sqlite(uri))


def mlflow_client(uri: str) -> Any:
    """An ``MlflowClient`` on ``uri`` (its password included: the URI MLflow connects to),
    quiet: no telemetry, no progress bar per artifact file, no migration chatter."""
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    logging.getLogger("mlflow.store.db.utils").setLevel(logging.WARNING)
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def open_store(uri: str) -> Any:
    """A client whose store answers; ValueError (one line) when it cannot be opened. A SQLite
    file that does not exist is refused rather than created: reading must not write."""
    if missing_sqlite(uri):
        raise ValueError(f"--tracking-uri {uri}: no MLflow store there (no such file)")
    check_store(uri)
    try:
        client = mlflow_client(uri)  # a file that is no database fails here, in MLflow's set-up
        client.search_experiments(max_results=1)
    except Exception as err:  # sqlalchemy, OSError, MLflow's own: all mean "cannot open"
        raise ValueError(unopenable(uri, err)) from None
    return client


def unopenable(uri: str, err: BaseException) -> str:
    """The line for a store that could not be opened, its password redacted."""
    return redact(f"--tracking-uri {uri}: cannot open the MLflow store ({first_line(err)})")
