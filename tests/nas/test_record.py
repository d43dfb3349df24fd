"""The pieces of the trial record that need no Ray: trial keys, the plan check, checkpoints found
by key, the searcher's warm start from recorded trials."""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from pathlib import Path

import pytest

from nas.campaign.plan_check import conflicts, differences
from nas.spec import grid_specs, search_spec, trial_key
from nas.store.tracking import RecordedTrial, StoredSweep, SweepRecord
from nas.trial.checkpoints import CKPT_NAME, latest_checkpoints, next_experiment, write_mark
from record.schema import Status
from search_spaces import BUILTIN, grid_cells
from tests.nas.spaces import SEARCH, recorded
from trainers.config import RunConfig, flatten


def test_trial_key_depends_on_content_not_order_or_invocation() -> None:
    """The same cell has the same key whatever the dict order; arm, point and seed each
    change it; the seed inside the point is not counted twice."""
    a = trial_key("std", {"model.n_layers": 4, "train.lr": 0.01}, 0)
    assert a == trial_key("std", {"train.lr": 0.01, "model.n_layers": 4}, 0)
    assert a == trial_key("std", {"train.lr": 0.01, "model.n_layers": 4, "train.seed": 0}, 0)
    others = {
        trial_key("blk", {"model.n_layers": 4, "train.lr": 0.01}, 0),
        trial_key("std", {"model.n_layers": 8, "train.lr": 0.01}, 0),
        trial_key("std", {"model.n_layers": 4, "train.lr": 0.01}, 1),
    }
    assert a not in others and len(others) == 3


def test_extending_a_grid_keeps_every_existing_key() -> None:
    """More seeds and more arms add keys; the keys of the cells already planned stay the same
    (what lets a later invocation extend a sweep instead of remapping it)."""
    space = BUILTIN["quick"]
    small = replace(space, seeds=(0,), arms={"standard": space.arms["standard"]})
    keys = {s.key for s in grid_specs(grid_cells(small, RunConfig())[0])}
    big = {s.key for s in grid_specs(grid_cells(space, RunConfig())[0])}
    assert keys < big and len(big) == len(grid_specs(grid_cells(space, RunConfig())[0]))


def _stored(base: RunConfig, trials: list[RecordedTrial]) -> StoredSweep:
    record = SweepRecord("sqlite:///nowhere", "1", "p", "s")
    base_params = {k: str(v) for k, v in flatten(base).items()}
    return StoredSweep(record, base_params, {t.key: t for t in trials})


def test_plan_check_refuses_a_changed_base_or_cell_and_allows_an_extension() -> None:
    """A stored sweep continues under the same base with more cells; a changed base key, or a
    recorded cell whose resolved configuration changed, is named with old and new values; a
    key only one side has (a newer field) is not a difference."""
    base = RunConfig()
    cells, _ = grid_cells(BUILTIN["smoke"], base)
    specs = grid_specs(cells)
    stored = _stored(base, [recorded(specs[0], Status.FINISHED, {})])
    assert conflicts(stored, flatten(base), specs) == ""
    lr = replace(base, train=replace(base.train, lr=0.01))
    assert "train.lr: 0.003 -> 0.01" in conflicts(stored, flatten(lr), specs)
    cell = specs[0].config
    edited = [replace(specs[0], config=replace(cell, train=replace(cell.train, lr=0.01)))]
    reason = conflicts(stored, flatten(base), edited)
    assert repr(specs[0].label) in reason and "train.lr: 0.003 -> 0.01" in reason
    assert differences({"a": "1", "old": "x"}, {"a": 1, "new": "y"}) == []
    legacy = _stored(base, [replace(recorded(specs[0], Status.FINISHED, {}), key="cell-00000")])
    assert "has another trial key (cell-00000 ->" in conflicts(legacy, flatten(base), specs)


def test_newest_loadable_checkpoint_is_found_by_key(tmp_path: Path) -> None:
    """Checkpoints of one key across two Tune experiments come newest step first; a folder a
    kill left without its mark or with an empty checkpoint is passed over."""

    def ckpt(exp: str, trial: str, n: int, key: str, step: int, body: bytes = b"x") -> Path:
        folder = tmp_path / exp / trial / f"checkpoint_{n:06d}"
        folder.mkdir(parents=True)
        (folder / CKPT_NAME).write_bytes(body)
        write_mark(folder, key, step)
        return folder / CKPT_NAME

    old = ckpt("tune-0001", "t_a", 0, "a", 25)
    new = ckpt("tune-0002", "t_a2", 0, "a", 50)
    ckpt("tune-0002", "t_a2", 1, "a", 75, body=b"")  # truncated: skipped
    half = tmp_path / "tune-0002" / "t_a2" / "checkpoint_000002"
    half.mkdir()
    (half / CKPT_NAME).write_bytes(b"y")  # no mark: skipped
    other = ckpt("tune-0001", "t_b", 0, "b", 25)
    found = latest_checkpoints(tmp_path)
    assert found == {"a": [new, old], "b": [other]}
    following = next_experiment(tmp_path)  # numbered past both, old (untagged) names too
    assert re.fullmatch(r"tune-0003-[0-9a-f]{8}", following)
    (tmp_path / following).mkdir()
    assert next_experiment(tmp_path).startswith("tune-0004-")
    assert next_experiment(tmp_path) != next_experiment(tmp_path)  # two drivers never share one
    assert json.loads((new.parent / "nas-checkpoint.json").read_text()) == {"key": "a", "step": 50}


def test_searcher_warm_start_holds_every_settled_trial_and_reruns_the_killed() -> None:
    """The study starts with each settled trial (worst value for a diverged one, the final
    loss for a finished one), and proposes the killed trial's point again first, so its key
    finds its run and checkpoint; settled trials count against --trials."""
    pytest.importorskip("optuna")
    from nas.campaign.searcher import remaining, searcher

    base = RunConfig()
    done = search_spec(base, SEARCH, {"train.lr": 0.001, "model.d_model": 32}, 0)
    bad = search_spec(base, SEARCH, {"train.lr": 0.009, "model.d_model": 64}, 0)
    cut = search_spec(base, SEARCH, {"train.lr": 0.0003, "model.d_model": 64}, 0)
    record = {
        done.key: recorded(done, Status.FINISHED, {"final/val_loss": 2.5}),
        bad.key: recorded(bad, Status.DIVERGED, {}),
        cut.key: recorded(cut, Status.KILLED, {"val/loss": 3.0}),
    }
    search = searcher(SEARCH, record, {"val_loss": math.inf}, 0)
    study = search._ot_study
    values = sorted(t.value for t in study.trials if t.state.name == "COMPLETE")
    assert values == [2.5, math.inf]
    proposed = search.suggest("t1")
    assert proposed == {"train.lr": 0.0003, "model.d_model": 64}
    again = search_spec(base, SEARCH, proposed, 0)
    assert again.key == cut.key
    assert remaining(SEARCH, record) == 2


def test_time_budget_stops_at_the_next_report_and_lets_the_outcome_through() -> None:
    """Past the deadline a validation report (it carries a checkpoint) stops the trial, the
    trial's own last report does not; before it, or without a budget, nothing stops; a trial
    the driver ends past the deadline is killed (resumable), before it stopped early."""
    import time

    from nas.sweep.outcomes import TimeBudget, ended_by_driver

    report = {"val_loss": 3.0, "step": 10}
    assert TimeBudget(time.time() - 1)("t", report)
    assert not TimeBudget(time.time() - 1)("t", {**report, "nas_status": "finished"})
    assert not TimeBudget(time.time() + 3600)("t", report) and not TimeBudget(None)("t", report)
    assert ended_by_driver(time.time() - 1) == Status.KILLED
    assert ended_by_driver(None) == ended_by_driver(time.time() + 3600) == Status.STOPPED_EARLY


def test_unplanned_trials_are_reported_but_do_not_keep_a_grid_open() -> None:
    """A grid whose plan dropped a seed: the recorded trial of that seed is listed, but its
    status (killed) does not make this invocation's plan unsettled; a planned trial with no
    run is 'not started' and does."""
    from nas.sweep.summary import NOT_STARTED, outcomes

    base = RunConfig()
    specs = grid_specs(grid_cells(BUILTIN["smoke"], base)[0])
    old = replace(recorded(specs[0], Status.KILLED, {}), key="dropped")
    done = recorded(specs[0], Status.FINISHED, {"final/val_loss": 2.0})
    results = outcomes({specs[0].key: specs[0].label}, {"dropped": old, specs[0].key: done})
    assert [(o.status, o.planned) for o in results] == [("finished", True), ("killed", False)]
    results = outcomes({specs[1].key: specs[1].label}, {})
    assert [(o.status, o.planned) for o in results] == [(NOT_STARTED, True)]


def test_set_and_max_steps_reach_every_planned_trial_over_the_space_base(tmp_path: Path) -> None:
    """``--set`` of a key the space's base sets, and ``--max-steps``, reach every trial of a
    grid (its cells' points carry the space's base, which used to win over them silently),
    while each arm's own settings still win over ``--set``."""
    from nas.sweep.plan import SweepOptions, plan

    storage = str(tmp_path / "ray")
    sets = ("train.max_steps=300", "model.d_model=32", "model.residual=rezero")
    p = plan(SweepOptions(space="attnres_ablation", overrides=sets, storage_path=storage))
    assert {s.config.train.max_steps for s in p.specs} == {300}
    assert {s.config.model.d_model for s in p.specs} == {32}
    assert "rezero" not in {s.config.model.residual for s in p.specs}  # the arms choose it
    p = plan(SweepOptions(space="quick", max_steps=50, storage_path=storage))
    assert {s.config.train.max_steps for s in p.specs} == {50}
