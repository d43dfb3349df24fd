"""A trial's metrics and files on their way to the tracking store, so that an unreachable store
neither stalls training nor loses a step.

Each batch (metrics of a step, or files such as a dilution profile) is first appended to the trial's journal (a JSON-lines file under the sweep's
storage path, shared by the nodes of a cluster), then queued; one background thread sends the
queue in order, retrying a failed send until it goes through (what ``nas.store.errors.judge``
calls retryable; a refusal for good ends the trial with ``StoreRefusal`` at its next step).
Training only waits at the end, for the queue to drain. A batch that has waited longer than the tolerance
(``NAS_TRACKING_OUTAGE_S``, 300 s by default) ends the trial with ``TrackingOutage``; the
journal keeps what was not sent, and the trial's next attempt (Tune's retry, or the next
``nas sweep``) sends the journal's steps the store lacks before it trains (``replay``).

Why not MLflow's own retries alone: its HTTP client retries a refused connection with growing
back-off (7 retries, factor 2, about four minutes in all by default) but inside the call, so the
training loop would stand still for the whole outage, and a killed worker would lose what it
was sending. Its asynchronous logging queues in memory only.
"""

from __future__ import annotations

import collections
import json
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nas.store.errors import (
    OUTAGE_ENV,
    StoreRefusal,
    StoreVerdict,
    TrackingOutage,
    judge,
    tolerance_s,
)
from record.errors import first_line

__all__ = ["OUTAGE_ENV", "Outbox", "StoreRefusal", "TrackingOutage", "tolerance_s"]

MAX_PENDING = 100_000  # batches held in memory (about one per logged step): the buffer's bound
BATCH_LIMIT = 1000  # metrics per MLflow log_batch call (MLflow's own limit)
JOURNAL_FOLDER = "journal"  # under the sweep's storage folder: one file per trial key

Entry = tuple[str, float, int, int]  # (key, value, timestamp in ms, step)


@dataclass(frozen=True)
class Files:
    """Artifacts for the run's ``folder``; sent from where they lie (the trial's folder)."""

    paths: tuple[str, ...]
    folder: str


Item = Sequence[Entry] | Files
Sender = Callable[[Item], None]


def journal_path(folder: Path, key: str) -> Path:
    return folder / JOURNAL_FOLDER / f"{key}.jsonl"


def read_journal(path: Path) -> tuple[list[Entry], list[Files]]:
    """Every metric entry and file batch a journal holds; a last line cut short by a kill is
    skipped."""
    if not path.is_file():
        return [], []
    entries: list[Entry] = []
    files: list[Files] = []
    for line in path.read_text().splitlines():
        try:
            item = json.loads(line)
            if isinstance(item, dict):
                files.append(Files(tuple(str(f) for f in item["files"]), str(item["folder"])))
            else:
                entries.extend((str(k), float(v), int(t), int(s)) for k, v, t, s in item)
        except (ValueError, TypeError, KeyError):
            continue
    return entries, files


def chunks(entries: Sequence[Entry]) -> Iterable[Sequence[Entry]]:
    for i in range(0, len(entries), BATCH_LIMIT):
        yield entries[i : i + BATCH_LIMIT]


class Outbox:
    """Batches sent in order by one background thread; ``close`` waits for all of them."""

    def __init__(self, send: Sender, journal: Path | None, what: str) -> None:
        self.send, self.journal, self.what = send, journal, what
        self.tolerance = tolerance_s()
        self.pending: collections.deque[tuple[float, Item]] = collections.deque()
        self.cond = threading.Condition()
        self.error = ""  # the last failed send's first line, for the outage message
        self.refused = ""  # set when the store refused a batch for good (``judge``: fatal)
        self.closing = False
        # when the store last took a batch: an outage is a store that takes nothing, not one
        # that is slower than training (a backlog whose oldest batch waits while sends succeed)
        self.taken = time.monotonic()
        if journal is not None:
            journal.parent.mkdir(parents=True, exist_ok=True)
        self.thread = threading.Thread(target=self._run, name="nas-outbox", daemon=True)
        self.thread.start()

    def put(self, batch: Item) -> None:
        """Journal the batch and queue it; TrackingOutage when the store has been unreachable
        for longer than the tolerance (training stops there rather than run on unrecorded)."""
        if not (batch.paths if isinstance(batch, Files) else batch):
            return
        if self.journal is not None:
            line: Any = (
                {"files": list(batch.paths), "folder": batch.folder}
                if isinstance(batch, Files)
                else [list(e) for e in batch]
            )
            with self.journal.open("a") as f:
                f.write(json.dumps(line) + "\n")
        with self.cond:
            self._check(time.monotonic())
            if len(self.pending) >= MAX_PENDING:
                raise TrackingOutage(self._outage(f"{MAX_PENDING} batches waiting"))
            self.pending.append((time.monotonic(), batch))
            self.cond.notify_all()

    def close(self) -> None:
        """Wait until every batch is sent; TrackingOutage if that takes past the tolerance,
        StoreRefusal if the store refused one for good."""
        with self.cond:
            while self.pending:
                self._check(time.monotonic())
                self.cond.wait(timeout=0.5)
            self.closing = True
            self.cond.notify_all()

    def discard_journal(self) -> None:
        """Everything is in the store: the journal is no longer needed."""
        if self.journal is not None:
            self.journal.unlink(missing_ok=True)

    def _check(self, now: float) -> None:
        if self.refused:
            what = f"tracking store {self.what}: a write failed for good"
            raise StoreRefusal(f"{what} ({self.refused}){self._kept()}")
        if self.pending and now - max(self.pending[0][0], self.taken) > self.tolerance:
            raise TrackingOutage(self._outage(f"nothing sent for {self.tolerance:.0f} s"))

    def _outage(self, what: str) -> str:
        cause = f": {self.error}" if self.error else ""
        return f"tracking store {self.what} unreachable ({what}){cause}{self._kept()}"

    def _kept(self) -> str:
        """Where the steps not sent are, for the line that ends the trial."""
        return f"; unsent steps kept in {self.journal}" if self.journal else ""

    def _run(self) -> None:
        delay = 0.5
        while True:
            with self.cond:
                while not self.pending and not self.closing:
                    self.cond.wait()
                if self.closing and not self.pending:
                    return
                taken, batch = _coalesced(b for _, b in self.pending)
            try:
                self.send(batch)
            except Exception as err:
                self.error = first_line(err)
                if judge(err) is not StoreVerdict.RETRY:  # refused, or no store error: say so
                    with self.cond:
                        self.refused = self.error
                        self.cond.notify_all()
                    return
                time.sleep(delay)  # the store is down, busy or in a conflict: try again
                delay = min(delay * 2, 10.0)
                continue
            delay = 0.5
            with self.cond:
                for _ in range(taken):
                    self.pending.popleft()
                self.taken = time.monotonic()
                self.error = ""
                self.cond.notify_all()


def _coalesced(pending: Iterable[Item]) -> tuple[int, Item]:
    """(how many of the first pending batches go in one send, that send): consecutive metric
    batches are merged up to MLflow's limit per call, so that a store answering slower than
    training logs (one call per step) catches up instead of falling ever further behind; a
    file batch goes alone, in its place."""
    batches = iter(pending)
    first = next(batches)
    if isinstance(first, Files):
        return 1, first
    merged = list(first)
    n = 1
    for batch in batches:
        if isinstance(batch, Files) or len(merged) + len(batch) > BATCH_LIMIT:
            break
        merged.extend(batch)
        n += 1
    return n, merged


def unsent(entries: Sequence[Entry], recorded: set[tuple[str, int]]) -> list[Entry]:
    """The journal's entries whose (metric, step) the store lacks, first value of each kept."""
    out: list[Entry] = []
    seen = set(recorded)
    for entry in entries:
        if (entry[0], entry[3]) not in seen:
            seen.add((entry[0], entry[3]))
            out.append(entry)
    return out


def as_metrics(entries: Sequence[Entry]) -> list[Any]:
    from mlflow.entities import Metric

    return [Metric(k, v, t, s) for k, v, t, s in entries]
