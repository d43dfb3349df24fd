"""The normalize step (``reports.normalize``): a trial's status from its tag or, before it
ended, its run status; a field newer than the record read as its default; the writer tags every
new run with the current version; and the view every section reads is derived once, with the
sweep. (Each record version's shape is read by ``record.upgrade``: ``tests/record``.)"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from nas.store.tracking import TrialRun, _client, open_sweep
from record.schema import RECORD_VERSION, Status, Tag
from record.upgrade import record_version
from reports.normalize import recorded, trial_status
from tests.reports.frames import sweep, trial

V2 = {Tag.SCHEMA_VERSION: "2"}


def test_a_trial_without_a_status_reads_its_run_status() -> None:
    """A trial that has not ended yet carries no status, whatever its version: its MLflow run
    status decides (RUNNING: the driver exited without closing it, interrupted)."""
    assert trial_status(V2, "RUNNING") is Status.KILLED
    assert trial_status(V2, "FINISHED") is Status.FINISHED
    assert trial_status({Tag.STATUS: "diverged", **V2}, "FAILED") is Status.DIVERGED


def test_a_field_newer_than_the_record_reads_as_its_default() -> None:
    """A value the record does not hold (absent, NaN, or "nan"/"None" after a round trip
    through text) is the default the run ran; a recorded value is kept."""
    for row in ({}, {"model.laurel_rank": float("nan")}, {"model.laurel_rank": "None"}):
        assert recorded(row, "model.laurel_rank") == 16
    assert recorded({"model.laurel_rank": 4}, "model.laurel_rank") == 4
    assert recorded({}, "model.attnres_gate", "softmax") == "softmax"


def test_the_writer_tags_each_new_run_with_the_current_version(tmp_path: Path) -> None:
    """The parent run and a trial run ``nas.store.tracking`` creates carry ``RECORD_VERSION``."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    record = open_sweep(uri, "s", "key", {}, {})
    run = TrialRun(record, "k1", {"train.lr": 0.01}, {Tag.ARM: "a", Tag.SEED: "0"})
    client = _client(uri)
    for run_id in (record.parent_run_id, run.run_id):
        tags = client.get_run(run_id).data.tags
        assert record_version(tags) == RECORD_VERSION == 2


def test_the_view_is_derived_with_the_sweep_and_follows_a_replace() -> None:
    """Search trials get their arm labelled from the varied axes, the comparable trials are the
    finished ones; a ``dataclasses.replace`` of the trials derives the view again."""
    rows = [
        trial("search", 0, 3.0, **{"train.lr": 0.01}),
        trial("search", 1, None, Status.DIVERGED, **{"train.lr": 0.1}),
        trial("search", 2, None, Status.INFEASIBLE, step=None, **{"train.lr": 1.0}),
    ]
    data = sweep(rows)
    assert list(data.trials["arm"]) == ["search"] * 3  # the record as it was read
    assert list(data.view.labelled["arm"]) == ["lr=0.01", "lr=0.1", "lr=1.0"]
    assert list(data.view.configured["arm"]) == ["lr=0.01", "lr=0.1"]
    assert list(data.view.comparable["arm"]) == ["lr=0.01"]
    assert list(data.view.outcome["arm"]) == ["lr=0.01", "lr=0.1"]
    fewer = dataclasses.replace(data, trials=data.trials.iloc[:1])
    # one trial left: nothing varies, and the arm is the whole (base) configuration
    assert list(fewer.view.labelled["arm"]) == ["base"]
