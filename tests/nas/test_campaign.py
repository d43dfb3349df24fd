"""A research campaign against the real parts (Ray, MLflow SQLite store, Lightning trials): a
sweep extended by seeds and by arms, a changed plan refused, --restart, a real divergence, a
trial time-out, a time budget, a search continued from its Optuna study in PostgreSQL. (A
trial's worker lost mid-trial is in tests/nas/test_cluster.py: a whole node of it.) Each test
counts runs, statuses and metric steps in the store."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from record.schema import (
    GRID_PARAM,
    PLANS_FOLDER,
    RUN_STATUS,
    Metric,
    Report,
    Status,
    Tag,
    tune_key,
)
from tests.nas.test_sweep import _runs, _sweep
from tests.postgres import Database

BASE = """\
description: a campaign on the smoke base
base: {model.d_model: 32, model.n_heads: 2, model.n_layers: 2, model.seq_len: 64,
       train.batch_size: 4, train.max_steps: 20, train.val_every: 10, train.val_batches: 2,
       train.warmup_steps: 2, train.diagnostics_batch: 2, data.max_bytes: 1000000,
       model.attnres_blocks: 2}
seeds: [0]
"""
ONE_ARM = BASE + "arms: {standard: {model.residual: standard}}\n"
TWO_ARMS = BASE + (
    "arms: {standard: {model.residual: standard}, block: {model.residual: block_attnres}}\n"
)
EDITED = BASE + (
    "arms: {standard: {model.residual: standard, train.lr: 0.01}, "
    "block: {model.residual: block_attnres}}\n"
)


def _trials(tmp: Path, name: str) -> tuple[list[Any], list[Any], Any]:
    runs, client = _runs(tmp, name)
    parents = [r for r in runs if r.data.tags.get(Tag.ROLE) == "sweep"]
    return parents, [r for r in runs if r.data.tags.get(Tag.ROLE) == "trial"], client


def _history(client: Any, run: Any, metric: str) -> list[int]:
    return [m.step for m in client.get_metric_history(run.info.run_id, metric)]


def _check_record(trials: list[Any], client: Any) -> None:
    """The invariants of any record: no run left RUNNING, one run per key and parent, the run
    status the trial status implies, and no metric step recorded twice."""
    assert not [r for r in trials if r.info.status == "RUNNING"]
    keys = [(r.data.tags[Tag.PARENT], r.data.tags[Tag.TRIAL_KEY]) for r in trials]
    assert len(keys) == len(set(keys))
    for r in trials:
        assert r.info.status == RUN_STATUS[Status(r.data.tags[Tag.STATUS])]
        for metric in (Metric.VAL_LOSS, Metric.TRAIN_LOSS):
            steps = _history(client, r, metric)
            assert len(steps) == len(set(steps)), (metric, steps)


def _finished_lines(stdout: str) -> int:
    return stdout.count("] finished ")


def _tune_dirs(tmp: Path, name: str) -> list[Path]:
    return sorted((tmp / "ray" / name).glob("tune-*"))


def test_extend_by_seeds_and_arms_runs_only_the_new_cells(tmp_path: Path) -> None:
    """The campaign of the issue: a one-arm, one-seed sweep; the same command with a second
    seed runs only the new cell; the same plan again runs nothing; an added arm runs only its
    cells; the summary and best-config.yaml name each trial by what it ran (the old index remap
    named a block_attnres trial 'standard'). Every record invariant holds. (A changed plan
    refused and --restart: test_campaign_refusals.py.)"""
    space = tmp_path / "camp.yaml"
    space.write_text(ONE_ARM)
    first = _sweep(tmp_path, str(space), "--name", "camp")
    assert first.returncode == 0, first.stderr[-3000:]
    parents, trials, client = _trials(tmp_path, "camp")
    assert len(parents) == 1 and len(trials) == 1
    seed0_steps = _history(client, trials[0], Metric.VAL_LOSS)

    more_seeds = _sweep(tmp_path, str(space), "--name", "camp", "--seeds", "0,1")
    assert more_seeds.returncode == 0, more_seeds.stderr[-3000:]
    assert _finished_lines(more_seeds.stdout) == 1  # only seed 1 ran
    more_arms = _sweep(tmp_path, str(space), "--name", "camp", "--seeds", "0,1")
    assert "nothing to run" in more_arms.stdout  # the same plan again: settled
    space.write_text(TWO_ARMS)
    more_arms = _sweep(tmp_path, str(space), "--name", "camp", "--seeds", "0,1")
    assert more_arms.returncode == 0, more_arms.stderr[-3000:]
    assert _finished_lines(more_arms.stdout) == 2  # only the new arm's two seeds ran

    parents, trials, client = _trials(tmp_path, "camp")
    assert len(parents) == 1 and len(trials) == 4
    _check_record(trials, client)
    cells = {(r.data.tags[Tag.ARM], r.data.tags[Tag.SEED]): r for r in trials}
    assert set(cells) == {("standard", "0"), ("standard", "1"), ("block", "0"), ("block", "1")}
    assert _history(client, cells["standard", "0"], Metric.VAL_LOSS) == seed0_steps
    for (arm, seed), run in cells.items():
        residual = "standard" if arm == "standard" else "block_attnres"
        assert run.data.params["model.residual"] == residual
        assert run.data.params["train.seed"] == seed
    # every ranked line of the summary names the trial whose loss it prints
    for line in more_arms.stdout.splitlines():
        if line.startswith("  val_loss "):
            _, loss, arm, _, seed, *_ = line.split()
            recorded = cells[arm, seed].data.metrics[Metric.FINAL_VAL_LOSS]
            assert abs(float(loss) - recorded) < 1e-4
    best = min(trials, key=lambda r: r.data.metrics[Metric.FINAL_VAL_LOSS])
    best_config = (tmp_path / "ray" / "camp" / "best-config.yaml").read_text()
    assert f"residual: {best.data.params['model.residual']}" in best_config
    plans = client.list_artifacts(parents[0].info.run_id, PLANS_FOLDER)
    assert len(plans) == 4  # one per invocation that ran
    _check_schema(tmp_path, "camp", parents, trials)


def _check_schema(tmp: Path, name: str, parents: list[Any], trials: list[Any]) -> None:
    """What the sweep wrote is what record.schema names: every nas tag, every metric apart
    from the dilution summaries, and every key of every Tune report."""
    from ray.tune.result import AUTO_RESULT_KEYS

    tags = {v for k, v in vars(Tag).items() if not k.startswith("_")}
    metrics = {v for k, v in vars(Metric).items() if not k.startswith("_")}
    for run in [*parents, *trials]:
        written = {k for k in run.data.tags if k.startswith("nas.")}
        assert written <= tags, written - tags
    for run in trials:
        required = {Tag.TRIAL_KEY, Tag.ARM, Tag.SEED, Tag.STATUS, Tag.CONFIG_HASH, Tag.TRIAL_ID}
        assert required <= run.data.tags.keys()
        for metric in run.data.metrics:
            assert metric in metrics or metric.startswith(Metric.DILUTION_PREFIX), metric
    reported = {v for k, v in vars(Report).items() if not k.startswith("_")}
    reported |= {tune_key(m) for m in metrics} | set(AUTO_RESULT_KEYS)
    reported |= {"done", "trial_id", "experiment_tag", "should_checkpoint", "timesteps_total"}
    seen = 0
    for result in (tmp / "ray").glob(f"{name}*/tune-*/*/result.json"):
        for line in result.read_text().splitlines():
            keys = set(json.loads(line))
            extra = {k for k in keys - reported if not k.startswith(tune_key("dilution/"))}
            assert not extra, extra
            seen += 1
        assert GRID_PARAM in json.loads(result.read_text().splitlines()[0])["config"]
    assert seen


def test_a_diverging_sweep_records_the_divergence_as_a_result(tmp_path: Path) -> None:
    """A learning rate of 1000: every trial ends diverged at the step the loss went bad (not
    retried by Tune, not a crash in the dilution profile), its run FAILED with the reason and
    step, only finite values recorded, and the report counts the divergences."""
    proc = _sweep(tmp_path, "smoke", "--name", "diverge", "--set", "train.lr=1000")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "sweep diverge: 0 finished, 2 diverged" in proc.stdout
    parents, trials, client = _trials(tmp_path, "diverge")
    assert len(trials) == 2
    _check_record(trials, client)
    for run in trials:
        assert run.data.tags[Tag.STATUS] == "diverged" and run.info.status == "FAILED"
        step = int(run.data.tags[Tag.STATUS_STEP])
        assert 0 < step < 20 and f"at step {step}" in run.data.tags[Tag.REASON]
        assert "svd" not in run.data.tags[Tag.REASON]
        assert all(abs(v) < float("inf") for v in run.data.metrics.values())
        assert run.data.metrics[Metric.FINAL_STEPS] == step
    assert parents[0].data.metrics["sweep/diverged"] == 2
    report = subprocess.run(
        [sys.executable, "-m", "nas.cli", "report", "diverge", "--tracking-uri",
         f"sqlite:///{tmp_path / 'mlflow.db'}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert report.returncode == 0, report.stderr[-3000:]
    assert "diverged" in (tmp_path / "nas-reports" / "diverge" / "report.md").read_text()


def test_trial_timeout_ends_each_trial_timed_out(tmp_path: Path) -> None:
    """--trial-timeout shorter than one step: every trial ends timed_out after its first step,
    its run FAILED with the reason, and the sweep is settled (the same command runs nothing)."""
    proc = _sweep(tmp_path, "smoke", "--name", "slow", "--trial-timeout", "0.0001")
    assert proc.returncode == 0, proc.stderr[-3000:]
    _, trials, client = _trials(tmp_path, "slow")
    assert len(trials) == 2
    _check_record(trials, client)
    for run in trials:
        assert run.data.tags[Tag.STATUS] == "timed_out" and run.info.status == "FAILED"
        assert "limit" in run.data.tags[Tag.REASON]
        assert int(run.data.tags[Tag.STATUS_STEP]) < 20
    again = _sweep(tmp_path, "smoke", "--name", "slow", "--trial-timeout", "0.0001")
    assert "nothing to run" in again.stdout


def test_time_budget_defers_trials_and_the_same_command_continues(tmp_path: Path) -> None:
    """A time budget spent before the first trial starts: no trial runs, the sweep exits 75
    with its parent KILLED and every trial 'not started'; the same command without the budget
    then runs them all, once each."""
    proc = _sweep(tmp_path, "smoke", "--name", "budget", "--time-budget", "0.00001")
    assert proc.returncode == 75, proc.stderr[-3000:]
    assert "2 not started" in proc.stdout
    parents, trials, _ = _trials(tmp_path, "budget")
    assert len(parents) == 1 and parents[0].info.status == "KILLED" and not trials
    again = _sweep(tmp_path, "smoke", "--name", "budget")
    assert again.returncode == 0, again.stderr[-3000:]
    parents, trials, client = _trials(tmp_path, "budget")
    assert len(trials) == 2 and parents[0].info.status == "FINISHED"
    _check_record(trials, client)


def test_more_trials_continue_the_same_search(tmp_path: Path, postgres_db: Database) -> None:
    """A TPE search with ASHA over a YAML space, its study kept in a PostgreSQL database
    (--study-storage, with a password), runs its 3 trials, each a child run with its sampled
    values as params, finished or stopped early by ASHA (a trial reaching the last step
    finishes); with the storage path deleted, --trials 5 runs only the 2 new proposals, the
    earlier 3 in the study and their runs untouched: the record and the stored study hold the
    same 5 distinct trials. The password is in no file under the folder (Tune pickles the
    searcher)."""
    from tests.nas.test_sweep import TINY_SEARCH

    space = tmp_path / "search.yaml"
    space.write_text(TINY_SEARCH)
    study = ("--study-storage", postgres_db.url)
    first = _sweep(tmp_path, str(space), "--name", "more", *study)
    assert first.returncode == 0, first.stderr[-3000:]
    _, before, client = _trials(tmp_path, "more")
    assert len(before) == 3
    assert all(3e-4 <= float(r.data.params["train.lr"]) <= 1e-2 for r in before)
    for run in before:
        status = run.data.tags[Tag.STATUS]
        assert status in ("finished", "stopped_early") and not run.data.tags.get(Tag.REASON)
        if status == "finished":
            assert run.data.metrics[Metric.FINAL_STEPS] == 20
    shutil.rmtree(tmp_path / "ray")
    more = _sweep(tmp_path, str(space), "--name", "more", "--trials", "5", *study)
    assert more.returncode == 0, more.stderr[-3000:]
    assert "3 settled earlier" in more.stdout
    _, after, client = _trials(tmp_path, "more")
    assert len(after) == 5 and {r.info.run_id for r in before} < {r.info.run_id for r in after}
    _check_record(after, client)
    for run in before:
        again = next(r for r in after if r.info.run_id == run.info.run_id)
        assert again.data.metrics == run.data.metrics
    assert len({r.data.params["train.lr"] for r in after}) == 5
    import optuna

    stored = optuna.load_study(study_name="more", storage=study[1])
    assert [t.state.name for t in stored.trials] == ["COMPLETE"] * 5
    assert {t.params["train.lr"] for t in stored.trials} == {
        float(r.data.params["train.lr"]) for r in after
    }
    secret = postgres_db.password.encode()
    assert not [f for f in tmp_path.rglob("*") if f.is_file() and secret in f.read_bytes()]
    assert postgres_db.password not in more.stdout + more.stderr
