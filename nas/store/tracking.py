"""The only module that writes MLflow: the sweep's experiment and parent run, one nested child
run per trial (found again, never duplicated, when a trial is retried or resumed), its params,
metrics with steps, artifacts and tags.

MLflow is imported inside the functions: ``nas --help`` must not pay for it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from nas.store.dashboard import experiment_tags, run_name, trial_note
from nas.store.errors import RetryingClient, StoreVerdict, judge, retrying, store_error_line
from nas.store.outbox import (
    Files,
    Item,
    Outbox,
    as_metrics,
    chunks,
    journal_path,
    read_journal,
    unsent,
)
from record.client import mlflow_client
from record.read import child, children, sweep_parents, upgraded
from record.redact import redact
from record.schema import (
    PLANS_FOLDER,
    RECORD_VERSION,
    REPORT_FOLDER,
    ROLE_SWEEP,
    ROLE_TRIAL,
    RUN_STATUS,
    Metric,
    Status,
    Tag,
)


def config_hash(params: Mapping[str, Any]) -> str:
    """A stable short hash of a flattened configuration (seed included)."""
    return hashlib.sha256(json.dumps(dict(params), sort_keys=True).encode()).hexdigest()[:12]


# The tracking URI with its password, for trial workers: what Tune pickles to disk (the
# trainable's parameters, in ``tuner.pkl``) carries the URI redacted, and a worker finds the
# real one here, set for every worker of the sweep through Ray's runtime environment.
SECRET_URI_ENV = "NAS_TRACKING_URI"


def shareable(record: SweepRecord) -> SweepRecord:
    """The record as it may be pickled and written: its URI without the password."""
    return replace(record, uri=redact(record.uri))


def _connect_uri(uri: str) -> str:
    """A redacted URI back in full from the worker's environment (unchanged otherwise)."""
    real = os.environ.get(SECRET_URI_ENV, "")
    return real if real and redact(real) == uri else uri


def _client(uri: str) -> RetryingClient:
    """A client on the store whose every call is repeated while ``nas.store.errors.judge``
    says the failure is passing (an outage, a conflicting concurrent write)."""
    from nas.store.prepare import prepare_store

    real = _connect_uri(uri)
    retrying(lambda: prepare_store(real))  # created and migrated by one process at a time
    return RetryingClient(mlflow_client(real))


def _find_or_create(find: Callable[[], Any], create: Callable[[], Any]) -> Any:
    """``find()``, else ``create()``, repeated as ``judge`` allows. Creating is the one write
    that is not safe to repeat blindly: a create whose answer was lost (the server went down
    after it committed) may have gone through, so each attempt looks for it first."""

    def attempt() -> Any:
        found = find()
        return found if found is not None else create()

    return retrying(attempt)


def store_failure(err: BaseException) -> str | None:
    """The first line of a failure to reach or write the tracking store, found anywhere in the
    chain of ``err`` (Tune wraps what its callbacks raise), once ``judge`` has given up on it;
    None for any other error."""
    if judge(err) is StoreVerdict.FOREIGN:
        return None
    line = store_error_line(err)
    return None if line is None else redact(line)


@dataclass(frozen=True)
class SweepRecord:
    """Where a sweep's runs go; passed to every trial (plain strings, so it pickles)."""

    uri: str
    experiment_id: str
    parent_run_id: str
    sweep: str


@dataclass(frozen=True)
class RecordedTrial:
    """A child run as the driver needs it: to refuse a changed plan, to skip settled trials,
    to summarize."""

    run_id: str
    key: str
    arm: str
    seed: int
    status: Status | None  # None while it runs (or when a crash left it RUNNING)
    run_status: str
    reason: str
    params: dict[str, str]
    metrics: dict[str, float]


@dataclass(frozen=True)
class StoredSweep:
    """What a store already holds of a sweep: its current parent run, the base configuration
    it was started with (flattened, as strings) and its trials by key."""

    record: SweepRecord
    base: dict[str, str]
    trials: dict[str, RecordedTrial]


def find_sweep(uri: str, sweep: str, key: str) -> StoredSweep | None:
    """The stored sweep, read only, from a store that exists (a SQLite file that does not would
    be created by reading it); None when the experiment or the parent run is not there yet."""
    client = _client(uri)
    exp = client.get_experiment_by_name(sweep)
    parents = sweep_parents(client, exp.experiment_id, key) if exp else []
    if not parents:
        return None
    parent = max(parents, key=lambda r: r.info.start_time)
    record = SweepRecord(uri, exp.experiment_id, parent.info.run_id, sweep)
    return StoredSweep(record, dict(parent.data.params), recorded_trials(record))


def open_sweep(
    uri: str, sweep: str, key: str, tags: Mapping[str, str], base: Mapping[str, Any]
) -> SweepRecord:
    """Get or create the sweep's experiment and its parent run, in the driver before any trial
    starts (a fresh SQLite store migrated by two trials at once races). ``key`` identifies this
    sweep's state on disk: a later invocation finds its parent run again by it. A new parent
    records ``base`` as its params: MLflow keeps params immutable, as a sweep's base is."""
    from mlflow.entities import Param

    client = _client(uri)
    exp_id = _experiment_id(client, sweep)
    for name, value in experiment_tags().items():  # also on a sweep recorded before them
        client.set_experiment_tag(exp_id, name, value)
    parents = sweep_parents(client, exp_id, key)
    if parents:
        run_id = max(parents, key=lambda r: r.info.start_time).info.run_id
        client.update_run(run_id, status="RUNNING")
        for name, value in tags.items():
            client.set_tag(run_id, name, value)
        return SweepRecord(uri, exp_id, run_id, sweep)
    all_tags = {Tag.SWEEP: sweep, Tag.SWEEP_KEY: key, Tag.ROLE: ROLE_SWEEP, **tags}
    all_tags[Tag.SCHEMA_VERSION] = str(RECORD_VERSION)
    run = _find_or_create(
        lambda: next(iter(sweep_parents(client.raw, exp_id, key)), None),
        lambda: client.raw.create_run(exp_id, tags=all_tags, run_name=sweep),
    )
    client.log_batch(run.info.run_id, params=[Param(k, str(v)) for k, v in base.items()])
    return SweepRecord(uri, exp_id, run.info.run_id, sweep)


def _experiment_id(client: RetryingClient, sweep: str) -> str:
    """The sweep's experiment, created if need be; two drivers creating it at once both get
    the one that was made."""
    from mlflow.exceptions import MlflowException

    def create() -> Any:
        try:
            client.raw.create_experiment(sweep)
        except MlflowException as err:
            if err.error_code != "RESOURCE_ALREADY_EXISTS":
                raise
        return client.raw.get_experiment_by_name(sweep)

    exp = _find_or_create(lambda: client.raw.get_experiment_by_name(sweep), create)
    return str(exp.experiment_id)


def supersede(stored: StoredSweep) -> None:
    """Archive a sweep's parent run for --restart: tagged superseded (its trials leave the
    sweep's report) and ended; nothing is deleted."""
    client = _client(stored.record.uri)
    run_id = stored.record.parent_run_id
    client.set_tag(run_id, Tag.SUPERSEDED, "true")
    close_sweep(stored.record, {}, "KILLED" if _running(client, run_id) else None)


def _running(client: Any, run_id: str) -> bool:
    return bool(client.get_run(run_id).info.status == "RUNNING")


def log_sweep_text(record: SweepRecord, text: str, name: str) -> None:
    """A text file (the space, as YAML) on the parent run."""
    _client(record.uri).log_text(record.parent_run_id, text, name)


def tag_sweep(record: SweepRecord, tags: Mapping[str, str]) -> None:
    """Tags on the parent run: what the campaign decided as it ran (a tuned grid's choices)."""
    client = _client(record.uri)
    for name, value in tags.items():
        client.set_tag(record.parent_run_id, name, value)


def sweep_text(record: SweepRecord, name: str) -> str | None:
    """A text file on the parent run (``log_sweep_text``'s), or None where it has none."""
    from record.read import artifact_text

    return artifact_text(_client(record.uri).raw, record.parent_run_id, name)


def log_plan(record: SweepRecord, plan: Mapping[str, Any], again: bool = False) -> None:
    """This invocation's plan (command, space, trial keys) as the next ``plans/NNNN.json``; or,
    ``again``, in place of the latest one (the invocation's campaign planned more trials as it
    ran: a tuned grid's seeds once its learning-rate stage settled)."""
    client = _client(record.uri)
    n = len(client.list_artifacts(record.parent_run_id, PLANS_FOLDER))
    text = json.dumps(dict(plan), indent=1, sort_keys=True)
    client.log_text(record.parent_run_id, text, f"{PLANS_FOLDER}/{n + (not again):04d}.json")


def log_report(uri: str, run_id: str, folder: Path, artifact_path: str = REPORT_FOLDER) -> None:
    """A written report (its folder: pages and figures) on the sweep's parent run."""
    _client(uri).log_artifacts(run_id, str(folder), artifact_path=artifact_path)


def close_sweep(
    record: SweepRecord,
    summary: Mapping[str, float],
    status: str | None,
    folder: Path | None = None,
) -> None:
    """End any child left RUNNING (a trial interrupted mid-way: ``killed``, resumable; what
    its journal under ``folder`` holds and the run lacks sent first) and then the parent run
    (left as it is when ``status`` is None)."""
    client = _client(record.uri)
    for run in children(client, record.experiment_id, record.parent_run_id):
        if run.info.status == "RUNNING":
            key = run.data.tags.get(Tag.TRIAL_KEY, "")
            if folder is not None and key:
                fill_in(client, run.info.run_id, journal_path(folder, key))
            _set_outcome(client, run.info.run_id, Status.KILLED, "", None)
    now = int(time.time() * 1000)
    entries = [(k, float(v), now, 0) for k, v in summary.items() if math.isfinite(v)]
    if entries:
        client.log_batch(record.parent_run_id, metrics=as_metrics(entries))
    if status is not None:
        client.set_terminated(record.parent_run_id, status=status)


def recorded_trials(record: SweepRecord) -> dict[str, RecordedTrial]:
    """The sweep's child runs by trial key (one each: keys are found again, never duplicated)."""
    trials = (
        _recorded(run)
        for run in children(_client(record.uri), record.experiment_id, record.parent_run_id)
    )
    return {t.key: t for t in trials}


def recorded_trial(record: SweepRecord, key: str) -> RecordedTrial | None:
    """One trial's run, if the record has it."""
    found = child(_client(record.uri), record.experiment_id, record.parent_run_id, key)
    return None if found is None else _recorded(found)


def _recorded(run: Any) -> RecordedTrial:
    """A trial run as the campaign reads it, in the current record shape (``record.upgrade``:
    a version-1 trial's legacy infeasible tag and seed param read as its status and seed)."""
    run = upgraded(run)
    tags = run.data.tags
    status = tags.get(Tag.STATUS)
    return RecordedTrial(
        run_id=run.info.run_id,
        key=tags[Tag.TRIAL_KEY],
        arm=tags.get(Tag.ARM, ""),
        seed=int(tags.get(Tag.SEED, "0")),
        status=Status(status) if status else None,
        run_status=run.info.status,
        reason=tags.get(Tag.REASON, ""),
        params=dict(run.data.params),
        metrics=dict(run.data.metrics),
    )


def set_outcome(
    record: SweepRecord,
    key: str,
    status: Status,
    reason: str = "",
    step: int | None = None,
    keep_reason: bool = False,
    journal: Path | None = None,
) -> None:
    """The driver's word on how a trial ended (stopped by the scheduler, failed for good,
    interrupted), for the trials whose own code could not say it, after the steps its journal
    holds and the run lacks are sent. With ``keep_reason``, a reason the trial left itself (its
    exception) wins over ``reason``."""
    client = _client(record.uri)
    found = child(client, record.experiment_id, record.parent_run_id, key)
    if found is None:
        return
    if keep_reason and found.data.tags.get(Tag.REASON):
        reason = ""
    fill_in(client, found.info.run_id, journal)
    _set_outcome(client, found.info.run_id, status, reason, step)


def _set_outcome(client: Any, run_id: str, status: Status, reason: str, step: int | None) -> None:
    from mlflow.entities import RunTag

    tags = [RunTag(Tag.STATUS, status.value)]
    if reason:
        tags.append(RunTag(Tag.REASON, reason[:5000]))  # MLflow's tag value limit is 8000
    if step is not None:
        tags.append(RunTag(Tag.STATUS_STEP, str(step)))
    client.log_batch(run_id, tags=tags)
    client.set_terminated(run_id, status=RUN_STATUS[status])
    describe(client, run_id, lambda: _outcome_note(client, run_id, status))


def describe(client: Any, run_id: str, note: Callable[[], str]) -> None:
    """Set the run's one-line description (the UI's ``mlflow.note.content``), best effort. A
    conflicting write (the driver and a retried trial at once) is retried like every write
    (``nas.store.errors``); whatever still fails is dropped: a description must never fail a
    trial or the sweep, and the next write corrects it."""
    # MLflow's, HTTP and SQL errors alike: the outcome is already recorded
    with contextlib.suppress(Exception):
        client.set_tag(run_id, Tag.NOTE, note())


def _delete_tag(client: RetryingClient, run_id: str, key: str) -> None:
    """Remove a tag; one already gone (an earlier attempt's delete went through before its
    answer was lost) is what was wanted."""
    from mlflow.exceptions import MlflowException

    try:
        client.delete_tag(run_id, key)
    except MlflowException as err:
        if err.error_code != "RESOURCE_DOES_NOT_EXIST":
            raise


def _outcome_note(client: Any, run_id: str, status: Status) -> str:
    """The run's description once it ended: its status and final validation loss (the latest
    validation's where the trial could not log its final one), and for a finished trial the
    reason it carries all the same (a routing alarm: ``stats.routing``)."""
    data = client.get_run(run_id).data
    loss = data.metrics.get(Metric.FINAL_VAL_LOSS, data.metrics.get(Metric.VAL_LOSS))
    note = trial_note(data.tags.get(Tag.ARM, ""), data.tags.get(Tag.SEED, ""), status.value, loss)
    reason = data.tags.get(Tag.REASON, "")
    return f"{note}; {reason}" if status is Status.FINISHED and reason else note


def _steps(client: Any, run_id: str, keys: Iterable[str]) -> set[tuple[str, int]]:
    """The (metric, step) pairs a run holds for these metrics."""
    return {(k, m.step) for k in set(keys) for m in client.get_metric_history(run_id, k)}


def fill_in(
    client: Any, run_id: str, journal: Path | None, recorded: set[tuple[str, int]] | None = None
) -> set[tuple[str, int]]:
    """Send what a trial journaled and the run lacks (the store was down, or the worker died
    or was stopped before its outbox drained), with the values and times it had, and its
    journaled files again where they still lie (an upload replaces the same path); returns the
    (metric, step) pairs sent. ``recorded``: the run's pairs, when the caller has read them."""
    entries, files = read_journal(journal) if journal is not None else ([], [])
    for batch in files:
        _send_files(client, run_id, batch)
    if not entries:
        return set()
    if recorded is None:
        recorded = _steps(client, run_id, {e[0] for e in entries})
    missing = unsent(entries, recorded)
    for chunk in chunks(missing):
        client.log_batch(run_id, metrics=as_metrics(chunk))
    return {(e[0], e[3]) for e in missing}


def _send_files(client: Any, run_id: str, batch: Files) -> None:
    for f in batch.paths:
        if Path(f).is_file():  # gone with the node that wrote it: its attempt recomputes it
            client.log_artifact(run_id, f, artifact_path=batch.folder)


class TrialRun:
    """A trial's child run: found by (parent, trial key) or created once, params logged once.
    A run found again (a retried or resumed trial) is continued: RUNNING again, its earlier
    outcome tag (``killed``) removed, the steps its journal holds and the store lacks sent
    first, and the (metric, step) pairs it holds never logged twice.

    Metrics and files go through an ``Outbox``: a store that is down stalls neither training
    nor loses a step; ``end`` waits for them (``TrackingOutage`` past the tolerance).
    """

    def __init__(
        self,
        record: SweepRecord,
        trial_key: str,
        params: Mapping[str, Any],
        tags: Mapping[str, str],
        journal: Path | None = None,
    ) -> None:
        from mlflow.entities import Param

        self.client = _client(record.uri)
        arm, seed = tags.get(Tag.ARM, trial_key), tags.get(Tag.SEED, "")
        note = trial_note(arm, seed, "running")
        found = child(self.client, record.experiment_id, record.parent_run_id, trial_key)
        if found is not None:
            self.run_id = found.info.run_id
            self.client.update_run(self.run_id, status="RUNNING")
            if Tag.STATUS in found.data.tags:
                _delete_tag(self.client, self.run_id, Tag.STATUS)
            for name, value in tags.items():
                self.client.set_tag(self.run_id, name, value)
            describe(self.client, self.run_id, lambda: note)
            self.logged = self._history(found.data.metrics)
        else:
            all_tags = {
                Tag.PARENT: record.parent_run_id,
                Tag.SWEEP: record.sweep,
                Tag.TRIAL_KEY: trial_key,
                Tag.ROLE: ROLE_TRIAL,
                Tag.SCHEMA_VERSION: str(RECORD_VERSION),
                Tag.CONFIG_HASH: config_hash(params),
                **tags,
                Tag.NOTE: note,
            }
            raw = self.client.raw
            run = _find_or_create(
                lambda: child(raw, record.experiment_id, record.parent_run_id, trial_key),
                lambda: raw.create_run(
                    record.experiment_id, tags=all_tags, run_name=run_name(arm, seed)
                ),
            )
            self.run_id = run.info.run_id
            params_ = [Param(k, str(v)) for k, v in params.items()]
            self.client.log_batch(self.run_id, params=params_)
            self.logged = set()
        self.logged |= fill_in(self.client, self.run_id, journal, self.logged)
        self.outbox = Outbox(self._send, journal, redact(record.uri))

    @classmethod
    def attach(cls, record: SweepRecord, run_id: str, journal: Path | None = None) -> TrialRun:
        """The run another process opened, written from here too: a data-parallel trial's
        rank 0 logs the training of the run its trial process opened and will end. Nothing
        about the run changes (status, tags, params); the pairs it holds are not logged
        again, and what is logged here goes through this process's own outbox and the same
        journal."""
        run = cls.__new__(cls)
        run.client = _client(record.uri)
        run.run_id = run_id
        run.logged = run._history(run.client.get_run(run_id).data.metrics)
        run.outbox = Outbox(run._send, journal, redact(record.uri))
        return run

    def flush(self) -> None:
        """Wait until everything logged here is in the store (``TrackingOutage`` past the
        tolerance), leaving the run open."""
        self.outbox.close()

    def _history(self, keys: Mapping[str, float]) -> set[tuple[str, int]]:
        """(metric, step) pairs the run already holds."""
        return _steps(self.client, self.run_id, keys)

    def _send(self, item: Item) -> None:
        """One attempt (the outbox judges a failure and tries again itself)."""
        if isinstance(item, Files):
            _send_files(self.client.raw, self.run_id, item)
        else:
            self.client.raw.log_batch(self.run_id, metrics=as_metrics(item))

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        """Log each finite metric once per step: a trial resumed from a checkpoint recomputes
        steps it had logged before the interruption (and re-runs the validation it was saved
        in); the first value recorded for a step is kept. A non-finite value (a diverging
        loss) is left out: the record keeps the last finite one and the status says why."""
        new = {
            k: v for k, v in metrics.items() if (k, step) not in self.logged and math.isfinite(v)
        }
        self.logged.update((k, step) for k in new)
        now = int(time.time() * 1000)
        self.outbox.put([(k, float(v), now, step) for k, v in new.items()])

    def log_files(self, files: Sequence[Path], folder: str) -> None:
        """Queued behind the metrics logged before them (the files must stay where they are)."""
        self.outbox.put(Files(tuple(str(Path(f).resolve()) for f in files), folder))

    def end(self, status: Status, reason: str = "", step: int | None = None) -> None:
        """The trial's outcome, once every metric is in the store: ``nas.status`` (with reason
        and step) and the run status."""
        self.outbox.close()
        _set_outcome(self.client, self.run_id, status, reason, step)
        self.outbox.discard_journal()
