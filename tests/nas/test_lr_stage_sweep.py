"""A tuned-learning-rate sweep: its campaign on a real MLflow SQLite store without Ray
(``tests.nas.sweeps.play``: the stage's points, each arm's choice by the losses its stage trials
finished at, its seeds at it; a new seed extending it without re-running the stage; a changed
learning-rate grid refused in one line before anything is written); the command training the
stage, then the seeds at the choice, in one invocation (real Lightning trials on smoke-sized
models, in this process: ``tests.nas.sweeps.run_here``); a bad ``tune`` block refused before anything is written; and,
without Ray, a time budget spent in the stage."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from record.schema import LR_STAGE_FILE, PLANS_FOLDER, Metric, Report, Tag
from search_spaces.lr_stage import choose
from tests.nas import sweeps
from tests.nas.spaces import ARMS, BASE

ONE_ARM = "arms: {standard: {model.residual: standard}}\n"
TUNE = "tune: {train.lr: {float: [1e-3, 1e-2], log: true}, points: 3}\n"
TUNED = BASE + ARMS + TUNE
VALUES = (0.001, 0.00316228, 0.01)
# the stage's losses by arm, one per value: standard's lowest in the middle, block's at the top
STAGE_LOSSES = {"standard": (3.0, 2.5, 2.8), "block": (2.9, 3.1, 2.7)}
LOSSES = {
    (f"{arm}/lr={v!r}", 0): loss
    for arm, ls in STAGE_LOSSES.items()
    for v, loss in zip(VALUES, ls, strict=True)
}
LOSSES |= {(arm, seed): 3.3 for arm in STAGE_LOSSES for seed in (0, 1)}


def _stage_and_final(trials: list[Any]) -> tuple[list[Any], list[Any]]:
    """The stage's runs (arm labels naming their value) and the final stage's (the arm)."""
    stage = [r for r in trials if "/lr=" in r.data.tags[Tag.ARM]]
    return stage, [r for r in trials if r not in stage]


def _artifact(client: Any, run_id: str, tmp: Path) -> dict[str, Any]:
    return dict(json.loads(Path(client.download_artifacts(run_id, LR_STAGE_FILE, tmp)).read_text()))


def _check_first(tmp: Path, arms: int = 2) -> tuple[dict[str, float], dict[str, str]]:
    """Three stage runs per arm (its three values, seed 0), each at its value; one final run
    per arm at the value with its stage's lowest final loss; the choice, its curve and keys on
    the parent run (artifact and tag). Returns each arm's choice and the stage's run ids by key."""
    parents, trials, client = sweeps.trials(tmp, "tuned")
    assert len(parents) == 1 and len(trials) == 4 * arms
    sweeps.check_record(trials, client)
    stage, final = _stage_and_final(trials)
    assert len(stage) == 3 * arms
    losses: dict[str, dict[float, list[float]]] = {}
    for r in stage:
        arm, _, value = r.data.tags[Tag.ARM].partition("/lr=")
        assert float(r.data.params["train.lr"]) == float(value) and r.data.tags[Tag.SEED] == "0"
        losses.setdefault(arm, {})[float(value)] = [r.data.metrics[Metric.FINAL_VAL_LOSS]]
    assert len(losses) == arms
    assert {a: sorted(v) for a, v in losses.items()} == {a: list(VALUES) for a in losses}
    chosen = {}
    for arm, by_value in losses.items():
        choice = choose(by_value)
        assert choice is not None and math.isfinite(choice.curve[choice.best])
        chosen[arm] = choice.best
    assert {(r.data.tags[Tag.ARM], float(r.data.params["train.lr"])) for r in final} == set(
        chosen.items()
    )
    state = _artifact(client, parents[0].info.run_id, tmp)
    assert (state["param"], state["values"], state["seeds"]) == ("train.lr", list(VALUES), 1)
    for arm, best in chosen.items():
        assert state["arms"][arm]["chosen"] == best
        assert parents[0].data.tags[Tag.CHOSEN_PREFIX + arm] == repr(best)
    # the invocation's one plan file names every trial it ran, the seeds planned as it ran too
    plans = client.list_artifacts(parents[0].info.run_id, PLANS_FOLDER)
    assert len(plans) == 1
    plan = json.loads(
        Path(client.download_artifacts(parents[0].info.run_id, plans[0].path, tmp)).read_text()
    )
    assert sorted(plan["keys"]) == sorted(r.data.tags[Tag.TRIAL_KEY] for r in trials)
    return chosen, {r.data.tags[Tag.TRIAL_KEY]: r.info.run_id for r in stage}


def test_a_tuned_campaign_records_points_choice_and_seeds_extends_and_refuses_a_new_grid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On a real store without Ray (``tests.nas.sweeps.play``): the first invocation hands Tune
    the stage, then each arm's seed at the value its stage's losses chose (a different one per
    arm); the same command with a second seed hands Tune only the two new seeds, at the
    recorded choices (no stage trial again); a four-point grid is refused in one line, exit
    status 2, before Ray starts, and writes nothing."""
    import ray

    from nas.cli import main

    space = tmp_path / "tuned.yaml"
    space.write_text(TUNED)
    capsys.readouterr()
    first = sweeps.play(tmp_path, [str(space), "--name", "tuned"], LOSSES)
    assert [(s.arm, s.seed) for s in first[6:]] == [("standard", 0), ("block", 0)]
    assert sorted((s.arm, s.seed) for s in first[:6]) == sorted(k for k in LOSSES if "/" in k[0])
    assert capsys.readouterr().out.count(" chosen") == 2  # one line per arm once it settled
    chosen, stage_runs = _check_first(tmp_path)
    assert chosen == {"standard": 0.00316228, "block": 0.01}  # each arm's lowest stage loss

    seeds = [str(space), "--name", "tuned", "--seeds", "0,1"]
    more = sweeps.play(tmp_path, seeds, LOSSES)
    assert sorted((s.arm, s.seed) for s in more) == [("block", 1), ("standard", 1)]
    parents, trials, client = sweeps.trials(tmp_path, "tuned")
    assert len(parents) == 1 and len(trials) == 10
    sweeps.check_record(trials, client)
    stage, final = _stage_and_final(trials)
    assert {r.data.tags[Tag.TRIAL_KEY]: r.info.run_id for r in stage} == stage_runs
    cells = {(r.data.tags[Tag.ARM], r.data.tags[Tag.SEED]): r for r in final}
    assert set(cells) == {(arm, seed) for arm in chosen for seed in ("0", "1")}
    for (arm, _), run in cells.items():
        assert float(run.data.params["train.lr"]) == chosen[arm]

    plans = len(client.list_artifacts(parents[0].info.run_id, PLANS_FOLDER))
    before = (len(trials), len(sweeps.tune_dirs(tmp_path, "tuned")), plans)
    space.write_text(TUNED.replace("points: 3", "points: 4"))
    capsys.readouterr()
    assert main(sweeps.command(tmp_path, *seeds)) == 2 and not ray.is_initialized()
    stderr = capsys.readouterr().err
    assert "Traceback" not in stderr and len(stderr.strip().splitlines()) == 1
    assert "learning-rate stage differs" in stderr
    assert "[0.001, 0.00316228, 0.01]" in stderr and "--restart" in stderr
    parents, trials, client = sweeps.trials(tmp_path, "tuned")
    plans = len(client.list_artifacts(parents[0].info.run_id, PLANS_FOLDER))
    assert (len(trials), len(sweeps.tune_dirs(tmp_path, "tuned")), plans) == before


def test_a_tuned_sweep_trains_the_stage_then_the_seeds_in_one_invocation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command with real Lightning trials, trained in this process instead of on Ray
    (``tests.nas.sweeps.run_here``), one arm: the stage's three trials handed over in one
    stage, then the seed at the chosen value in a second of the same invocation (a Tune
    experiment each, on Ray), its choice printed once; every trial finished; the record as the
    campaign test above checks it."""
    space = tmp_path / "tuned.yaml"
    space.write_text(BASE + ONE_ARM + TUNE)
    code, runner = sweeps.run_here(tmp_path, [str(space), "--name", "tuned"])
    assert code == 0 and capsys.readouterr().out.count(" chosen") == 1
    assert runner.stages == 2 and len(runner.hosts) == 4
    assert all(h.reports[-1][Report.STATUS] == "finished" for h in runner.hosts.values())
    _check_first(tmp_path, arms=1)


@pytest.mark.parametrize(
    ("tune", "match"),
    [
        ("{train.lr: {float: [1e-3, 1e-2]}, points: 2}", "tune.points: 2"),
        ("{train.lr: {float: [0, 1e-2]}, points: 3}", "bounds must be positive"),
        ("{model.mix_ln_alpha: {float: [1e-3, 1e-1]}}", "does not read it"),
        ("{train.lr: {float: [1e-3, 1e-2]}, steps: 3}", "'steps': unknown key"),
    ],
)
def test_a_bad_tune_block_exits_2_before_anything_is_written(
    tmp_path: Path, tune: str, match: str
) -> None:
    """Fewer than 3 points, a non-positive bound, a field no arm's trial reads, an unknown key:
    one line, exit status 2, no MLflow store and no Tune state."""
    (tmp_path / "bad.yaml").write_text(BASE + ARMS + f"tune: {tune}\n")
    proc = sweeps.sweep(tmp_path, str(tmp_path / "bad.yaml"))
    assert proc.returncode == 2 and match in proc.stderr, proc.stderr[-2000:]
    assert len(proc.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.yaml"]


def test_a_time_budget_spent_in_the_stage_leaves_the_seeds_not_started(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A budget spent before the first trial (``tests.nas.sweeps.spend``: the invocation opened
    and closed as the command does, without Ray): no stage trial ran, so no learning rate is
    chosen and no seed runs; the summary counts the stage's six trials and the two arms' seeds
    as not started, and the parent is KILLED. (The exit status 75: the real grid sweep of
    test_sweep.py.)"""
    space = tmp_path / "tuned.yaml"
    space.write_text(TUNED)
    capsys.readouterr()
    sweeps.spend(tmp_path, [str(space), "--name", "tuned", "--time-budget", "0.00001"])
    out = capsys.readouterr().out
    assert "8 not started" in out and " chosen" not in out
    parents, trials, client = sweeps.trials(tmp_path, "tuned")
    assert len(parents) == 1 and parents[0].info.status == "KILLED" and not trials
    state = _artifact(client, parents[0].info.run_id, tmp_path)
    assert {arm: entry["chosen"] for arm, entry in state["arms"].items()} == {
        "standard": None,
        "block": None,
    }
