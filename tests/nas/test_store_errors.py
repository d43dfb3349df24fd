"""The writer's judge of a failed write (``nas.store.errors``): what is retried, what ends the
writer, and that a retried write is repeated only while the store may yet take it."""

from __future__ import annotations

from pathlib import Path

import pytest
import requests
import sqlalchemy.exc
from mlflow.exceptions import MlflowException, RestException

from nas.store.errors import (
    StoreRefusal,
    StoreVerdict,
    TrackingOutage,
    judge,
    retrying,
    store_error_line,
)
from nas.store.outbox import Outbox


def _rest(code: str, message: str) -> RestException:
    """What the MLflow client raises for a server's JSON error answer."""
    return RestException({"error_code": code, "message": message})


def _wrapped(inner: BaseException) -> RuntimeError:
    """``inner`` as Tune hands a callback's error on: the cause of another exception."""
    try:
        raise RuntimeError("Tune: a callback failed") from inner
    except RuntimeError as outer:
        return outer


CONFLICT = (
    '(psycopg.errors.UniqueViolation) duplicate key value violates unique constraint "tag_pk"'
)
AUTOFLUSH = (
    "(raised as a result of Query-invoked autoflush; consider using a session.no_autoflush "
    "block if this flush is occurring prematurely) (psycopg.errors.UniqueViolation)"
)


@pytest.mark.parametrize(
    "err",
    [
        _rest("BAD_REQUEST", CONFLICT),  # two writers inserted one new tag
        _rest("BAD_REQUEST", AUTOFLUSH),  # ... or one new latest-metric row
        _rest("TEMPORARILY_UNAVAILABLE", "database is locked"),
        _rest("INTERNAL_ERROR", "(psycopg.OperationalError) server closed the connection"),
        MlflowException(
            "API request to endpoint /api/2.0/mlflow/runs/log-batch failed with "
            "exception HTTPConnectionPool: Max retries exceeded"
        ),
        requests.exceptions.ConnectionError("Connection refused"),
        requests.exceptions.ChunkedEncodingError("Connection broken: IncompleteRead"),
        # what MLflow's client raises when the server is killed mid-answer (seen in the race
        # test's loop)
        MlflowException(
            "API request to http://127.0.0.1:1/api/2.0/mlflow/runs/set-tag failed with "
            "exception ('Connection broken: IncompleteRead(0 bytes read, 2 more expected)')"
        ),
        requests.exceptions.ReadTimeout("read timed out"),
        sqlalchemy.exc.OperationalError("SELECT 1", {}, Exception("database is locked")),
        ConnectionResetError("reset by peer"),
        _wrapped(_rest("BAD_REQUEST", CONFLICT)),
    ],
)
def test_a_passing_failure_is_retried(err: BaseException) -> None:
    """An unreachable or busy store, and a write refused because another writer's same row
    went in first, are worth trying again, also when wrapped."""
    assert judge(err) is StoreVerdict.RETRY


@pytest.mark.parametrize(
    "err",
    [
        _rest("INVALID_PARAMETER_VALUE", "Changing param values is not allowed."),
        _rest("RESOURCE_DOES_NOT_EXIST", "Run with id=abc not found"),
        _rest("PERMISSION_DENIED", "forbidden"),
        _rest("BAD_REQUEST", "Invalid value for metric"),
        requests.exceptions.InvalidURL("no host supplied"),
        TrackingOutage("tracking store http://x unreachable (nothing sent for 3 s)"),
        StoreRefusal("a write failed for good"),
        _wrapped(TrackingOutage("unreachable")),
    ],
)
def test_the_stores_final_answer_is_not_retried(err: BaseException) -> None:
    """What the store will answer again however often it is asked ends the writer, as does
    an outage already past the tolerance."""
    assert judge(err) is StoreVerdict.FATAL


def test_an_error_that_is_not_the_stores_is_foreign() -> None:
    """A bug or a training failure is no store error: neither retried nor named as one."""
    err = _wrapped(ValueError("n_heads must divide d_model"))
    assert judge(err) is StoreVerdict.FOREIGN
    assert store_error_line(err) is None
    assert store_error_line(_wrapped(_rest("BAD_REQUEST", CONFLICT))) == (
        f"BAD_REQUEST: {CONFLICT}"
    )


class Calls:
    """A write that fails with ``errors`` in turn, then succeeds; sleeps recorded, not slept."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors, self.calls, self.slept = list(errors), 0, []

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "written"

    def sleep(self, s: float) -> None:
        self.slept.append(s)


def test_retrying_repeats_a_passing_failure_with_growing_back_off() -> None:
    conflict = _rest("BAD_REQUEST", CONFLICT)
    call = Calls(conflict, conflict, requests.exceptions.ConnectionError("refused"))
    assert retrying(call, tolerance=60, sleep=call.sleep) == "written"
    assert call.calls == 4
    assert call.slept == sorted(call.slept) and call.slept[0] < call.slept[-1]


def test_retrying_gives_up_on_a_refusal_at_once() -> None:
    call = Calls(_rest("INVALID_PARAMETER_VALUE", "Changing param values is not allowed."))
    with pytest.raises(RestException, match="Changing param"):
        retrying(call, tolerance=60, sleep=call.sleep)
    assert call.calls == 1 and call.slept == []


def test_retrying_gives_up_past_the_tolerance() -> None:
    """A store that stays down is given up on once the next wait would pass the tolerance
    (real time: a tolerance of 0.3 s and the first back-off 0.25 s allow one retry)."""
    down = requests.exceptions.ConnectionError("refused")
    call = Calls(*[down] * 50)
    with pytest.raises(requests.exceptions.ConnectionError):
        retrying(call, tolerance=0.3)
    assert 1 < call.calls < 5


def test_an_outbox_ends_the_trial_on_a_refusal(tmp_path: Path) -> None:
    """A batch the store refuses for good is not retried until the tolerance: the next step's
    ``put`` (or ``close``) raises ``StoreRefusal`` with the store's line, and the journal keeps
    the batch."""
    import time

    sent: list[object] = []

    def send(batch: object) -> None:
        sent.append(batch)
        raise _rest("RESOURCE_DOES_NOT_EXIST", "Run with id=abc not found")

    box = Outbox(send, tmp_path / "j.jsonl", "http://127.0.0.1:1")
    box.put([("train/loss", 1.0, 1000, 0)])
    deadline = time.monotonic() + 30
    while not box.refused:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    with pytest.raises(StoreRefusal, match="Run with id=abc not found"):
        box.put([("train/loss", 0.9, 1001, 1)])
    with pytest.raises(StoreRefusal):
        box.close()
    assert len(sent) == 1
    assert len((tmp_path / "j.jsonl").read_text().splitlines()) == 2
