"""The normalize step (``reports.normalize``): each record version is read as it was written,
the writer tags every new run with the current version, and the view every section reads is
derived once, with the sweep."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from nas.tracking import TrialRun, _client, open_sweep
from record.schema import LEGACY_INFEASIBLE, RECORD_VERSION, Status, Tag
from reports.normalize import FIRST_VERSION, record_version, recorded, trial_seed, trial_status
from tests.reports.frames import sweep, trial

V2 = {Tag.SCHEMA_VERSION: "2"}


def test_a_run_without_the_tag_is_version_one() -> None:
    """No tag: the records from before it existed; a tag that is no number is refused in one
    line naming the tag."""
    assert record_version({}) == FIRST_VERSION == 1
    assert record_version(V2) == 2
    with pytest.raises(ValueError, match=r"^nas\.schema_version 'two': not a version number$"):
        record_version({Tag.SCHEMA_VERSION: "two"})


def test_the_legacy_infeasible_tag_is_read_on_version_one_only() -> None:
    """A version-1 trial without a status tag and with the legacy infeasible tag was infeasible;
    a version-2 run has no such tag to read, so its MLflow status decides."""
    legacy = {LEGACY_INFEASIBLE: "n_heads must divide d_model"}
    assert trial_status(legacy, "FINISHED") is Status.INFEASIBLE
    assert trial_status({**legacy, **V2}, "FINISHED") is Status.FINISHED
    # a trial not ended yet carries no status, whatever its version
    assert trial_status(V2, "RUNNING") is Status.KILLED
    assert trial_status({Tag.STATUS: "diverged", **V2}, "FAILED") is Status.DIVERGED


def test_the_seed_param_stands_in_for_the_tag_on_version_one_only() -> None:
    """A version-1 trial without a seed tag ran its ``train.seed``; a version-2 one has none."""
    params = {"train.seed": "7"}
    assert trial_seed({}, params) == 7
    assert trial_seed(V2, params) is None
    assert trial_seed({Tag.SEED: "3", **V2}, params) == 3


def test_a_field_newer_than_the_record_reads_as_its_default() -> None:
    """A value the record does not hold (absent, NaN, or "nan"/"None" after a round trip
    through text) is the default the run ran; a recorded value is kept."""
    for row in ({}, {"model.laurel_rank": float("nan")}, {"model.laurel_rank": "None"}):
        assert recorded(row, "model.laurel_rank") == 16
    assert recorded({"model.laurel_rank": 4}, "model.laurel_rank") == 4
    assert recorded({}, "model.attnres_gate", "softmax") == "softmax"


def test_the_writer_tags_each_new_run_with_the_current_version(tmp_path: Path) -> None:
    """The parent run and a trial run ``nas.tracking`` creates carry ``RECORD_VERSION``."""
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
