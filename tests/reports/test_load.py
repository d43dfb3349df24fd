"""``reports.load`` on a real MLflow store written here run by run (no Ray sweep): the trial
status from ``nas.status`` or, for old records, derived (through ``record.upgrade``); archived
parents left out; the plans read in order; a damaged record refused in one line; and ``nas report
--plan``."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from record.read import list_sweeps
from record.schema import ROLE_TRIAL, Status, Tag
from record.upgrade import LEGACY_INFEASIBLE, RunRecord, upgrade
from reports.load import load_sweep
from reports.normalize import trial_status
from tests.cli import run_nas as _nas
from tests.reports.store import Store, new


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """Three sweeps: ``restarted`` (an archived parent, then a live one with two plans),
    ``old`` (recorded before statuses and plans), ``damaged`` (a trial without its seed)."""
    root = tmp_path_factory.mktemp("store")
    s = Store(f"sqlite:///{root / 'mlflow.db'}")
    archived = s.parent("restarted", 1000, **{Tag.SUPERSEDED: "true"})
    s.trial(archived, "k-old", "FINISHED", **new(Status.FINISHED))
    live = s.parent("restarted", 2000)
    s.trial(live, "k1", "FINISHED", **new(Status.FINISHED))
    s.trial(live, "k2", "FAILED", **new(Status.DIVERGED, 7, "loss is nan"))
    s.plans(
        live,
        root,
        {"command": "nas sweep restarted", "space": "x", "keys": ["k1", "k2"]},
        {"command": "nas sweep restarted --seeds 0", "space": "x", "keys": ["k2"]},
    )
    old = s.parent("old", 1000)
    s.trial(old, "o1", "FINISHED", **{Tag.SEED: "0"})
    s.trial(old, "o2", "FINISHED", **{LEGACY_INFEASIBLE: "n_heads 3 does not divide 32"})
    s.trial(old, "o3", "FAILED", **{Tag.SEED: "1"})
    s.trial(old, "o4", None, **{Tag.SEED: "2"})
    damaged = s.parent("damaged", 1000)
    s.trial(damaged, "d1", "FINISHED", **{Tag.STATUS: "finished", Tag.STATUS_STEP: "20"})
    return s


def test_archived_parent_and_its_trials_are_left_out(store: Store) -> None:
    """A parent ``--restart`` archived is not part of the sweep: neither it nor its trials."""
    data = load_sweep(store.uri, "restarted")
    assert sorted(data.trials["key"]) == ["k1", "k2"]
    assert len(data.parents) == 1 and data.superseded == 1
    assert ("restarted", 2) in list_sweeps(store.uri)


def test_new_records_carry_status_reason_and_step(store: Store) -> None:
    """Rows take status, reason and step from the tags, and keep MLflow's status apart."""
    t = load_sweep(store.uri, "restarted").trials.set_index("key")
    assert t.loc["k2", "status"] == Status.DIVERGED and t.loc["k2", "run_status"] == "FAILED"
    assert t.loc["k2", "reason"] == "loss is nan" and t.loc["k2", "status_step"] == 7
    assert t.loc["k1", "status"] == Status.FINISHED and pd.isna(t.loc["k1", "reason"])
    assert "infeasible" not in t.columns


def test_plans_are_read_in_invocation_order(store: Store) -> None:
    """Each invocation's plan file, oldest first, as recorded."""
    data = load_sweep(store.uri, "restarted")
    assert [p["keys"] for p in data.plans] == [["k1", "k2"], ["k2"]]
    assert data.parents["plans"].tolist() == [2]


def test_old_records_derive_their_status(store: Store) -> None:
    """Without ``nas.status``: the infeasible tag, else MLflow's FINISHED, FAILED, or a run
    left RUNNING (killed); no plans."""
    data = load_sweep(store.uri, "old")
    t = data.trials.set_index("key")
    assert t["status"].to_dict() == {
        "o1": Status.FINISHED,
        "o2": Status.INFEASIBLE,
        "o3": Status.FAILED,
        "o4": Status.KILLED,
    }
    assert t.loc["o2", "reason"] == "n_heads 3 does not divide 32"
    assert pd.isna(t.loc["o1", "node"])  # not recorded: missing, not ""
    assert data.plans == []


@pytest.mark.parametrize(
    "tags,run_status,expected",
    [
        ({Tag.STATUS: "timed_out", LEGACY_INFEASIBLE: "x"}, "FAILED", Status.TIMED_OUT),
        ({LEGACY_INFEASIBLE: "bad point"}, "FINISHED", Status.INFEASIBLE),
        ({LEGACY_INFEASIBLE: ""}, "FINISHED", Status.FINISHED),
        ({}, "FAILED", Status.FAILED),
        ({}, "KILLED", Status.KILLED),
        ({}, "RUNNING", Status.KILLED),
    ],
)
def test_trial_status_prefers_the_tag_and_derives_the_rest(
    tags: dict[str, str], run_status: str, expected: Status
) -> None:
    """``nas.status`` where present; otherwise a version-1 record's legacy infeasible tag (by
    the upgrade step the loader reads every run through), else the run status."""
    current = upgrade(RunRecord({}, {Tag.ROLE: ROLE_TRIAL, **tags})).tags
    assert trial_status(current, run_status) is expected


def test_unknown_status_is_refused_with_the_valid_ones() -> None:
    """A status the schema does not name is an error listing the statuses it does."""
    with pytest.raises(ValueError, match="'exploded': unknown; valid: finished, diverged"):
        trial_status({Tag.STATUS: "exploded"}, "FINISHED")


def test_missing_required_tag_is_refused_in_one_line(store: Store) -> None:
    """A new record's trial without its seed tag is named, not read as an empty value."""
    with pytest.raises(
        ValueError, match=r"sweep 'damaged': 1 trial runs lack tags: run \w+ lacks nas.seed$"
    ):
        load_sweep(store.uri, "damaged")


def test_plan_latest_without_plans_exits_2_with_one_line(store: Store, tmp_path: Path) -> None:
    """``nas report old --plan latest``: refused before anything is written."""
    proc = _nas(tmp_path, "report", "old", "--plan", "latest", "--tracking-uri", store.uri)
    assert proc.returncode == 2, proc.stderr
    assert "--plan latest: sweep 'old' recorded no plans" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and list(tmp_path.iterdir()) == []


def test_plan_flag_is_on_the_report_command(tmp_path: Path) -> None:
    """``--plan`` takes ``all`` (the default) or ``latest``; anything else exits 2."""
    help_text = _nas(tmp_path, "report", "--help").stdout
    assert "--plan {all,latest}" in help_text
    proc = _nas(tmp_path, "report", "x", "--plan", "first")
    assert proc.returncode == 2 and "--plan" in proc.stderr
