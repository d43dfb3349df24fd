"""The results gallery's rule for a study reported again (``benchmarks.harness.gallery``): when
its sweep is settled in the kept store, the gallery's ``nas sweep`` trains nothing, and the
study's ``made.json`` keeps the provenance of the run that trained it (sweep command and time,
commit, machine, date), adding only when it was reported again; a sweep that trains anything
records this run's. Played on a real MLflow store (``tests.nas.sweeps.play``, no Ray)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.harness.gallery import MADE, made_record, trial_runs
from nas.cli import main
from tests.nas.spaces import ONE_ARM
from tests.nas.sweeps import command, play, trials

# made.json as the run that trained the study wrote it (another commit, machine and date)
SWEPT = {
    "sweep": "nas sweep study --tracking-uri=sqlite:///gallery/mlflow.db",
    "report": "nas report study --format md --out docs/results/study",
    "sweep_seconds": 1234,
    "commit": "aaaaaaaaaaaa",
    "hardware": "the machine that trained it, torch 2.0",
    "date": "2026-01-01",
}
# what the re-reporting run would write of itself
NOW = {**SWEPT, "sweep_seconds": 3, "commit": "bbbbbbbbbbbb", "hardware": "this machine",
       "date": "2026-06-30"}  # fmt: skip


def test_a_settled_study_reported_again_keeps_its_sweeps_provenance(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The gallery's steps on a real store: a settled sweep invoked again (which opens and closes
    its parent run) leaves the trial runs as they were, so made.json is the sweep's, plus this
    run's commit and date as 'reported'; a second seed, which trains a trial, makes it this
    run's."""
    space = tmp_path / "study.yaml"
    space.write_text(ONE_ARM)
    args = [str(space), "--name", "study"]
    play(tmp_path, args, {("standard", 0): 3.1, ("standard", 1): 3.3})
    db = tmp_path / "mlflow.db"
    before = trial_runs("study", db)
    parent_before = trials(tmp_path, "study")[0][0].info.end_time
    assert before is not None and len(before) == 1

    assert main(command(tmp_path, *args)) == 0  # the gallery's sweep step: settled, runs nothing
    assert "nothing to run" in capsys.readouterr().out
    assert trials(tmp_path, "study")[0][0].info.end_time != parent_before  # the parent was touched
    kept = {MADE: json.dumps(SWEPT)}
    made = made_record(NOW, kept, ran=trial_runs("study", db) != before)
    assert made == {**SWEPT, "reported": {"commit": NOW["commit"], "date": NOW["date"]}}

    play(tmp_path, [*args, "--seeds", "0,1"], {("standard", 0): 3.1, ("standard", 1): 3.3})
    assert made_record(NOW, kept, ran=trial_runs("study", db) != before) == NOW
    assert made_record(NOW, {}, ran=False) == NOW  # nothing kept: nothing to keep
