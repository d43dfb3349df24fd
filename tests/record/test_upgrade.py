"""The record's one upgrade step (``record.upgrade``): each version's step on a run in that
version's shape, and the chain's properties: a current run is left as it is, upgrading twice is
upgrading once, and an old run reads as the current writer (``nas.store.tracking``) records the same
trial, on a real SQLite store."""

from __future__ import annotations

from pathlib import Path

import pytest

from record.read import load_run
from record.schema import RECORD_VERSION, ROLE_SWEEP, ROLE_TRIAL, Status, Tag
from record.upgrade import (
    FIRST_VERSION,
    LEGACY_INFEASIBLE,
    STEPS,
    RunRecord,
    record_version,
    upgrade,
)

V1_TRIAL = {Tag.ROLE: ROLE_TRIAL, Tag.TRIAL_KEY: "k", Tag.ARM: "a"}
CURRENT = {Tag.SCHEMA_VERSION: str(RECORD_VERSION)}
SEED_PARAMS = {"train.seed": "7", "model.n_layers": "4"}

# Runs in the current shape (and one newer than this code), which no step may touch.
CURRENT_RUNS = [
    RunRecord(SEED_PARAMS, {**V1_TRIAL, **CURRENT, Tag.SEED: "7"}, {"final/val_loss": 3.0}),
    RunRecord(
        {},
        {**V1_TRIAL, **CURRENT, Tag.SEED: "1", Tag.STATUS: "infeasible", Tag.REASON: "r"},
    ),
    # a version-2 run carrying the legacy tag: version 2 never reads it
    RunRecord(SEED_PARAMS, {**V1_TRIAL, **CURRENT, LEGACY_INFEASIBLE: "x"}),
    RunRecord({}, {Tag.ROLE: ROLE_SWEEP, **CURRENT}),
    RunRecord(SEED_PARAMS, {**V1_TRIAL, Tag.SCHEMA_VERSION: str(RECORD_VERSION + 1)}),
]
# Runs in version 1's shape: a finished trial without a seed tag, infeasible ones by the legacy
# tag (with and without a seed), one whose legacy tag is empty, one whose status tag was
# recorded beside the legacy one, and a sweep's parent run.
OLD_RUNS = [
    RunRecord(SEED_PARAMS, dict(V1_TRIAL), {"final/val_loss": 3.0}),
    RunRecord({"model.n_heads": "3"}, {**V1_TRIAL, LEGACY_INFEASIBLE: "n_heads 3"}),
    RunRecord(SEED_PARAMS, {**V1_TRIAL, Tag.SEED: "2", LEGACY_INFEASIBLE: "bad"}),
    RunRecord(SEED_PARAMS, {**V1_TRIAL, LEGACY_INFEASIBLE: ""}),
    RunRecord(SEED_PARAMS, {**V1_TRIAL, Tag.STATUS: "timed_out", LEGACY_INFEASIBLE: "x"}),
    RunRecord(SEED_PARAMS, {Tag.ROLE: ROLE_SWEEP}),
]


def test_a_run_without_the_version_tag_is_version_one() -> None:
    """No tag: a run recorded before the tag existed; a tag that is no number is refused in one
    line naming the tag, by ``record_version`` and by ``upgrade``."""
    assert record_version({}) == FIRST_VERSION == 1
    assert record_version(CURRENT) == RECORD_VERSION == 2
    with pytest.raises(ValueError, match=r"^nas\.schema_version 'two': not a version number$"):
        record_version({Tag.SCHEMA_VERSION: "two"})
    with pytest.raises(ValueError, match=r"^nas\.schema_version 'two': not a version number$"):
        upgrade(RunRecord({}, {Tag.SCHEMA_VERSION: "two"}))
    with pytest.raises(ValueError, match=r"^nas\.schema_version '0': not a version number$"):
        upgrade(RunRecord({}, {Tag.SCHEMA_VERSION: "0"}))


def test_every_version_below_the_current_one_has_its_step() -> None:
    """The chain reaches ``RECORD_VERSION`` from every version there has been."""
    assert sorted(STEPS) == list(range(FIRST_VERSION, RECORD_VERSION))


@pytest.mark.parametrize("run", CURRENT_RUNS)
def test_upgrading_a_current_run_is_the_identity(run: RunRecord) -> None:
    """A run at (or past) the current version comes back as it is, the very object."""
    assert upgrade(run) is run


@pytest.mark.parametrize("run", OLD_RUNS + CURRENT_RUNS)
def test_upgrading_is_idempotent(run: RunRecord) -> None:
    """An upgraded run is current: a second upgrade leaves it as it is."""
    once = upgrade(run)
    assert upgrade(once) == once
    assert record_version(once.tags) >= RECORD_VERSION


def test_version_one_infeasible_tag_becomes_status_and_reason() -> None:
    """The legacy tag's text is the reason of an infeasible status; the tag is gone, and the
    params, metrics and other tags are as they were."""
    run = OLD_RUNS[1]
    out = upgrade(run)
    assert out.tags == {
        **V1_TRIAL,
        Tag.STATUS: Status.INFEASIBLE.value,
        Tag.REASON: "n_heads 3",
        **CURRENT,
    }
    assert (out.params, out.metrics) == (run.params, run.metrics)
    assert upgrade(OLD_RUNS[2]).tags[Tag.SEED] == "2"  # its own seed tag wins


def test_version_one_empty_or_overridden_legacy_tag_says_nothing() -> None:
    """An empty legacy tag set no status (the run status decides, as for any trial without
    one); a status recorded beside the legacy tag is the trial's, without a reason from it."""
    empty = upgrade(OLD_RUNS[3]).tags
    assert Tag.STATUS not in empty and Tag.REASON not in empty and LEGACY_INFEASIBLE not in empty
    beside = upgrade(OLD_RUNS[4]).tags
    assert beside[Tag.STATUS] == "timed_out" and Tag.REASON not in beside


def test_version_one_seed_param_becomes_the_trials_seed_tag() -> None:
    """A version-1 trial's ``train.seed`` is its seed tag; a parent run gains none (the current
    writer tags only trials with a seed); a version-2 run's missing tag stays missing."""
    assert upgrade(OLD_RUNS[0]).tags[Tag.SEED] == "7"
    assert upgrade(OLD_RUNS[5]).tags == {Tag.ROLE: ROLE_SWEEP, **CURRENT}
    assert Tag.SEED not in upgrade(CURRENT_RUNS[2]).tags


def _as_version_one(tags: dict[str, str]) -> dict[str, str]:
    """A current trial's tags as version 1 wrote the same trial: no version, no seed tag, and
    for an infeasible one the legacy tag holding the reason instead of status and reason."""
    old = {k: v for k, v in tags.items() if k not in (Tag.SCHEMA_VERSION, Tag.SEED)}
    if old.get(Tag.STATUS) == Status.INFEASIBLE.value:
        old[LEGACY_INFEASIBLE] = old.pop(Tag.REASON)
        del old[Tag.STATUS]
    return old


@pytest.mark.parametrize("status", [Status.INFEASIBLE, Status.DIVERGED])
def test_an_old_run_upgrades_to_what_the_current_writer_records(
    tmp_path: Path, status: Status
) -> None:
    """The current writer records a trial on a real store; the same trial in version 1's shape
    (written beside it) reads back, through ``load_run``, with the current one's tags. (Only
    the step of an infeasible trial, 0 by definition, is not restored: the report shows a
    version-1 trial's step as not recorded, as it always did.)"""
    from mlflow.tracking import MlflowClient

    from nas.store.tracking import TrialRun, open_sweep

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    record = open_sweep(uri, "s", "key", {}, {})
    run = TrialRun(record, "k1", {"train.seed": 3}, {Tag.ARM: "a", Tag.SEED: "3"})
    run.end(status, "the reason", 0)
    client = MlflowClient(tracking_uri=uri)
    current = client.get_run(run.run_id)
    old_tags = _as_version_one(dict(current.data.tags))
    if status is Status.INFEASIBLE:
        del old_tags[Tag.STATUS_STEP]
    old = client.create_run(current.info.experiment_id, tags=old_tags)
    client.log_param(old.info.run_id, "train.seed", "3")

    assert record_version(client.get_run(old.info.run_id).data.tags) == 1
    read = load_run(uri, old.info.run_id)
    expected = dict(current.data.tags)
    if status is Status.INFEASIBLE:
        del expected[Tag.STATUS_STEP]
    assert read.tags == expected
    assert read.params == {"train.seed": "3"}
    assert load_run(uri, run.run_id).tags == current.data.tags  # the current one as it is
