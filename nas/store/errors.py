"""What a failed write to the tracking store means, decided in one place: ``judge`` is the
writer's only judge of whether to try again or to give up, for the driver, the trials and their
outboxes alike; ``retrying`` applies it with back-off.

Why a judge at all: a store that answers with an error is not always a dead store. Through an
``mlflow server`` on PostgreSQL, two writers inserting the same new row at once (a tag key on
one run, a metric's latest value, the same journaled step replayed by two processes) make the
server's SQLAlchemy session fail with ``IntegrityError`` (``UniqueViolation``, sometimes
"raised as a result of Query-invoked autoflush"), which MLflow answers with HTTP 400
``BAD_REQUEST``; its client retries only connection errors and 5xx, so the 400 reached the
driver, which took it for a dead store and ended the sweep (exit 69). Such a conflict is over
the moment the other write commits: writing again succeeds.

The classes (``judge``):

- **retry**: the store cannot be reached or its answer was cut short (connection refused,
  reset or broken mid-answer when the server is killed, a timeout), is busy or
  restarting (5xx, ``TEMPORARILY_UNAVAILABLE``, ``REQUEST_LIMIT_EXCEEDED``, SQLAlchemy's
  ``OperationalError``: a locked SQLite file, a dropped PostgreSQL connection), or refused a
  write because another writer's same row went in first (the conflicts above, a deadlock, a
  serialization failure). Every write the harness makes is safe to repeat: metrics are keyed by
  (name, step, time, value) and MLflow drops an identical row; tags, params (same value), run
  status and artifacts (same path) are set, not added; and the only creates (an experiment, a
  parent or child run) look for what they create first (``nas.store.tracking``).
- **fatal**: anything else the store says (a param changed, a run or experiment that does not
  exist, permission refused, a malformed request), and ``TrackingOutage`` (the store has
  already been unreachable past the tolerance). Trying again cannot help.
- **foreign**: not a store error at all (a bug, a training failure): raised as it is.
"""

from __future__ import annotations

import enum
import os
import time
from collections.abc import Callable
from typing import Any, TypeVar

from record.errors import first_line

OUTAGE_ENV = "NAS_TRACKING_OUTAGE_S"
DEFAULT_OUTAGE_S = 300.0
FIRST_DELAY_S, MAX_DELAY_S = 0.25, 10.0

T = TypeVar("T")


class TrackingOutage(RuntimeError):
    """The tracking store has not taken a batch for longer than the tolerance."""


class StoreRefusal(RuntimeError):
    """The tracking store refused a batch for good (``judge`` said ``FATAL``)."""


class StoreVerdict(enum.Enum):
    """What a store error means for a write: try again, give up, or not a store's error at all."""

    RETRY = "retry"
    FATAL = "fatal"
    FOREIGN = "foreign"


# MLflow error codes that say "not now" rather than "no".
_TRANSIENT_CODES = frozenset(
    {"TEMPORARILY_UNAVAILABLE", "REQUEST_LIMIT_EXCEEDED", "ABORTED", "DEADLINE_EXCEEDED"}
)
# What a conflicting concurrent write, or a store that is restarting, says in the message of an
# error whose code alone does not tell (HTTP 400 BAD_REQUEST, 500 INTERNAL_ERROR): the
# database's and SQLAlchemy's own words, as the server passes them on.
_TRANSIENT_WORDS = (
    "uniqueviolation",
    "duplicate key value",
    "integrityerror",
    "unique constraint failed",  # SQLite's words for the same conflict
    "query-invoked autoflush",
    "deadlock",
    "could not serialize",
    "serializationfailure",
    "database is locked",
    "operationalerror",
    "server closed the connection",
    "connection refused",
    "connection reset",
    "connection aborted",
    "connection broken",  # the server died mid-answer: IncompleteRead, a truncated chunk
    "remote end closed connection",
    "broken pipe",
    "timed out",
    "max retries exceeded",
    "failed to set tags",  # MLflow's own retries of a tag conflict ran out
)


def tolerance_s() -> float:
    """The outage a writer outlasts, from ``NAS_TRACKING_OUTAGE_S``."""
    raw = os.environ.get(OUTAGE_ENV, "")
    try:
        value = float(raw) if raw else DEFAULT_OUTAGE_S
    except ValueError:
        raise ValueError(f"{OUTAGE_ENV}={raw!r}: expected a number of seconds") from None
    if not value > 0:
        raise ValueError(f"{OUTAGE_ENV}={raw!r}: expected a positive number of seconds")
    return value


def _chain(err: BaseException) -> list[BaseException]:
    """``err`` and its causes (Tune and MLflow wrap what they catch)."""
    out: list[BaseException] = []
    current: BaseException | None = err
    while current is not None and all(current is not e for e in out):
        out.append(current)
        current = current.__cause__ or current.__context__
    return out


def _store_kinds() -> tuple[type[BaseException], ...]:
    from http.client import HTTPException

    from mlflow.exceptions import MlflowException
    from requests.exceptions import RequestException
    from sqlalchemy.exc import SQLAlchemyError

    # the socket's own errors, where a client lets them through unwrapped
    sockets = (ConnectionError, TimeoutError, HTTPException)
    return (
        MlflowException,
        RequestException,
        SQLAlchemyError,
        TrackingOutage,
        StoreRefusal,
        *sockets,
    )


def _verdict(err: BaseException) -> StoreVerdict:
    from http.client import HTTPException

    from mlflow.exceptions import MlflowException
    from requests.exceptions import (
        InvalidHeader,
        InvalidSchema,
        InvalidURL,
        MissingSchema,
        RequestException,
    )
    from sqlalchemy.exc import OperationalError

    if isinstance(err, TrackingOutage | StoreRefusal):
        return StoreVerdict.FATAL
    malformed = (InvalidURL, InvalidSchema, MissingSchema, InvalidHeader)
    if isinstance(err, RequestException) and not isinstance(err, malformed):
        return StoreVerdict.RETRY  # the request did not get its answer: refused, reset, cut short
    if isinstance(err, (OperationalError, ConnectionError, TimeoutError, HTTPException)):
        return StoreVerdict.RETRY
    if isinstance(err, MlflowException) and err.error_code in _TRANSIENT_CODES:
        return StoreVerdict.RETRY
    text = str(err).lower()
    return StoreVerdict.RETRY if any(w in text for w in _TRANSIENT_WORDS) else StoreVerdict.FATAL


def judge(err: BaseException) -> StoreVerdict:
    """Whether a failed write is worth repeating (``RETRY``), is the store's final answer
    (``FATAL``), or is no store error (``FOREIGN``): the first store error in the chain of
    ``err`` decides."""
    kinds = _store_kinds()
    for e in _chain(err):
        if isinstance(e, kinds):
            return _verdict(e)
    return StoreVerdict.FOREIGN


def store_error_line(err: BaseException) -> str | None:
    """The first line of the first store error in the chain of ``err``; None for an error that
    is not the store's."""
    kinds = _store_kinds()
    return next((first_line(e) for e in _chain(err) if isinstance(e, kinds)), None)


def retrying(
    call: Callable[[], T],
    tolerance: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """``call()`` again, with doubling back-off, for as long as ``judge`` says ``RETRY`` and the
    first failure is under ``tolerance`` seconds old (``tolerance_s()`` by default); then the
    last error is raised."""
    limit = tolerance_s() if tolerance is None else tolerance
    first: float | None = None
    delay = FIRST_DELAY_S
    while True:
        try:
            return call()
        except Exception as err:
            now = time.monotonic()
            first = now if first is None else first
            if judge(err) is not StoreVerdict.RETRY or now - first + delay > limit:
                raise
        sleep(delay)
        delay = min(delay * 2, MAX_DELAY_S)


class RetryingClient:
    """An ``MlflowClient`` whose every call goes through ``retrying``: what the driver and the
    trials write with. ``raw`` is the client itself, for a caller that retries on its own (the
    outbox, which must not block past its tolerance inside one call)."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.raw, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            return retrying(lambda: attr(*args, **kwargs))

        return call
