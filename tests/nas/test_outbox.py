"""The outbox between a trial and its tracking store: batches arrive in order, each once, while
the store refuses for a while; past the tolerance the trial gets one line and the journal keeps
every step; the journal's replay sends exactly what the store lacks."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from nas.store.outbox import (
    OUTAGE_ENV,
    Entry,
    Files,
    Item,
    Outbox,
    TrackingOutage,
    read_journal,
    tolerance_s,
    unsent,
)


class FlakyStore:
    """A store that refuses every send until ``open`` is set, then records each batch."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.received: list[Entry] = []
        self.refused = 0

    def send(self, batch: Item) -> None:
        if not self.open.is_set():
            self.refused += 1
            raise ConnectionError("Connection refused\nsecond line")
        assert not isinstance(batch, Files)
        self.received.extend(batch)


def _batch(step: int) -> list[Entry]:
    return [("train/loss", float(step), 1000 + step, step), ("lr", 0.1, 1000 + step, step)]


def test_an_outage_within_the_tolerance_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refused sends are retried until the store answers: every batch arrives in order, once,
    and the journal held each before it was sent."""
    monkeypatch.setenv(OUTAGE_ENV, "60")
    store = FlakyStore()
    box = Outbox(store.send, tmp_path / "j.jsonl", "http://127.0.0.1:1")
    for step in range(25):
        box.put(_batch(step))
    deadline = time.monotonic() + 30
    while store.refused < 2:  # the first batch refused, then refused again on its retry
        assert time.monotonic() < deadline, "the sender never tried"
        time.sleep(0.05)
    for step in range(25, 50):
        box.put(_batch(step))
    assert store.received == []
    store.open.set()
    box.close()
    assert store.received == [e for s in range(50) for e in _batch(s)]  # in order, each once
    assert read_journal(tmp_path / "j.jsonl") == (store.received, [])
    box.discard_journal()
    assert not (tmp_path / "j.jsonl").exists()


def test_put_returns_while_a_send_hangs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Training does not wait on the network: with the sender stuck inside a send (a store
    that does not answer), fifty more batches are queued at once."""
    monkeypatch.setenv(OUTAGE_ENV, "60")
    entered, release = threading.Event(), threading.Event()
    sent: list[Item] = []

    def hang(batch: Item) -> None:
        entered.set()
        release.wait()
        sent.append(batch)

    box = Outbox(hang, None, "http://127.0.0.1:1")
    box.put(_batch(0))
    assert entered.wait(timeout=30)

    def produce() -> None:
        for step in range(1, 51):
            box.put(_batch(step))

    producer = threading.Thread(target=produce)
    producer.start()
    producer.join(timeout=30)
    assert not producer.is_alive() and sent == []  # all queued while the first send hangs
    release.set()
    box.close()
    # in order, each once; the fifty that waited went in one call
    assert [e for b in sent for e in b] == [e for s in range(51) for e in _batch(s)]
    assert len(sent) == 2


def test_a_store_slower_than_training_is_not_an_outage(monkeypatch: pytest.MonkeyPatch) -> None:
    """A store that takes 0.1 s a call while training logs a step every 2 ms: the backlog goes
    in few calls (up to MLflow's 1000 metrics each), so no batch waits past a 2 s tolerance
    (a wait here is about two calls, 0.2 s) although one call per step would need 60 s for the
    600 steps. Once such a backlog made a
    live server look dead (TrackingOutage on every attempt of a trial, seen under load)."""
    monkeypatch.setenv(OUTAGE_ENV, "2")
    calls: list[Item] = []

    def slow(batch: Item) -> None:
        time.sleep(0.1)
        calls.append(batch)

    box = Outbox(slow, None, "http://127.0.0.1:1")
    for step in range(600):
        box.put(_batch(step))
        time.sleep(0.002)
    box.close()
    assert [e for b in calls for e in b] == [e for s in range(600) for e in _batch(s)]
    assert len(calls) < 60


def test_an_outage_past_the_tolerance_is_one_line_and_the_journal_keeps_the_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(OUTAGE_ENV, "0.3")
    store = FlakyStore()
    box = Outbox(store.send, tmp_path / "j.jsonl", "http://127.0.0.1:1")
    box.put(_batch(0))
    time.sleep(0.4)
    with pytest.raises(TrackingOutage) as raised:
        box.put(_batch(1))
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith("tracking store http://127.0.0.1:1 unreachable")
    assert "Connection refused" in message and str(tmp_path / "j.jsonl") in message
    with pytest.raises(TrackingOutage):
        box.close()
    assert read_journal(tmp_path / "j.jsonl") == (_batch(0) + _batch(1), [])


def test_replay_sends_what_the_store_lacks_first_value_kept(tmp_path: Path) -> None:
    journal = tmp_path / "j.jsonl"
    journal.write_text(
        '[["a", 1.0, 10, 0], ["b", 2.0, 10, 0]]\n'
        '[["a", 3.0, 11, 1]]\n'
        '[["a", 9.0, 12, 1], ["a", 4.0, 12, 2]]\n'  # step 1 again (a resumed attempt)
        '[["a", 5.0, 13'  # cut short by a kill
    )
    entries, files = read_journal(journal)
    assert files == []
    assert entries == [("a", 1.0, 10, 0), ("b", 2.0, 10, 0), ("a", 3.0, 11, 1),
                       ("a", 9.0, 12, 1), ("a", 4.0, 12, 2)]  # fmt: skip
    missing = unsent(entries, {("a", 0)})
    assert missing == [("b", 2.0, 10, 0), ("a", 3.0, 11, 1), ("a", 4.0, 12, 2)]


@pytest.mark.parametrize("raw", ["soon", "0", "-5"])
def test_a_bad_tolerance_is_refused_with_what_is_allowed(
    raw: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(OUTAGE_ENV, raw)
    with pytest.raises(ValueError, match="expected a positive number of seconds|expected a number"):
        tolerance_s()


def test_files_queue_behind_the_metrics_before_them_and_are_journaled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(OUTAGE_ENV, "60")
    sent: list[Item] = []
    box = Outbox(sent.append, tmp_path / "j.jsonl", "sqlite:///x.db")
    profile = Files((str(tmp_path / "step-000010.json"),), "dilution")
    box.put(_batch(9))
    box.put(profile)
    box.put(_batch(10))
    box.close()
    assert sent == [_batch(9), profile, _batch(10)]
    assert read_journal(tmp_path / "j.jsonl") == (_batch(9) + _batch(10), [profile])
