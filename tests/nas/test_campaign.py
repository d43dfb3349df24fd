"""A research campaign: a sweep extended by seeds and by arms (its decisions on a real MLflow
SQLite store without Ray: ``tests.nas.sweeps.play``); a real divergence and a trial time-out
(the command with real Lightning trials in this process: ``tests.nas.sweeps.run_here``).
(A search continued from its Optuna study in PostgreSQL, against every real part, is in
tests/nas/test_postgres.py; a changed plan refused and --restart are in tests/nas/test_campaign_refusals.py;
a time budget, in the real grid sweep of tests/nas/test_sweep.py; a trial's worker lost
mid-trial in tests/nas/test_cluster.py: a whole node of it.) Each test counts runs, statuses
and metric steps in the store."""

from __future__ import annotations

from pathlib import Path

import pytest

from record.schema import PLANS_FOLDER, Metric, Report, Tag
from tests.nas.spaces import ONE_ARM, TWO_ARMS
from tests.nas.sweeps import (
    check_record,
    check_tags,
    command,
    history,
    play,
    run_here,
    store_uri,
    trials,
)


def test_extend_by_seeds_and_arms_plans_only_the_new_cells(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The campaign of the issue, on a real store without Ray (``tests.nas.sweeps.play``): a
    one-arm, one-seed sweep; the same command with a second seed hands Tune only the new cell
    and leaves the first trial's run as it was; the same plan again runs nothing and starts no
    Ray; an added arm hands Tune only its cells; each trial's configuration is its arm's and
    seed's; the summary and best-config.yaml name each trial by what it ran (the old index
    remap named a block_attnres trial 'standard'); every invocation logs its plan; every record
    invariant holds. (What a real sweep writes: the grid sweep of test_sweep.py; a changed plan
    refused and --restart: test_campaign_refusals.py.)"""
    import ray

    from nas.cli import main

    space = tmp_path / "camp.yaml"
    space.write_text(ONE_ARM)
    losses = {("standard", 0): 3.1, ("standard", 1): 3.3, ("block", 0): 3.2, ("block", 1): 2.9}
    first = play(tmp_path, [str(space), "--name", "camp"], losses)
    assert [(s.arm, s.seed) for s in first] == [("standard", 0)]
    parents, runs, client = trials(tmp_path, "camp")
    assert len(parents) == 1 and len(runs) == 1
    seed0 = runs[0]
    seed0_steps = history(client, seed0, Metric.VAL_LOSS)

    seeds = [str(space), "--name", "camp", "--seeds", "0,1"]
    assert [(s.arm, s.seed) for s in play(tmp_path, seeds, losses)] == [("standard", 1)]
    capsys.readouterr()
    assert main(command(tmp_path, *seeds)) == 0  # the same plan again: settled
    settled = "sweep camp: all {} planned trials are settled in the record; nothing to run"
    assert settled.format(2) in capsys.readouterr().out and not ray.is_initialized()
    space.write_text(TWO_ARMS)
    more_arms = play(tmp_path, seeds, losses)
    assert sorted((s.arm, s.seed) for s in more_arms) == [("block", 0), ("block", 1)]
    capsys.readouterr()
    assert main(command(tmp_path, *seeds)) == 0
    summary = capsys.readouterr().out
    assert settled.format(4) in summary and not ray.is_initialized()

    parents, runs, client = trials(tmp_path, "camp")
    assert len(parents) == 1 and len(runs) == 4
    check_record(runs, client)
    cells = {(r.data.tags[Tag.ARM], r.data.tags[Tag.SEED]): r for r in runs}
    assert set(cells) == {("standard", "0"), ("standard", "1"), ("block", "0"), ("block", "1")}
    assert cells["standard", "0"].info.run_id == seed0.info.run_id
    assert history(client, cells["standard", "0"], Metric.VAL_LOSS) == seed0_steps
    assert cells["standard", "0"].data.metrics == seed0.data.metrics
    for (arm, seed), run in cells.items():
        residual = "standard" if arm == "standard" else "block_attnres"
        assert run.data.params["model.residual"] == residual
        assert run.data.params["train.seed"] == seed
    # every ranked line of the summary names the trial whose loss it prints
    ranked = [line for line in summary.splitlines() if line.startswith("  val_loss ")]
    assert len(ranked) == 4
    for line in ranked:
        _, loss, arm, _, seed, *_ = line.split()
        recorded = cells[arm, seed].data.metrics[Metric.FINAL_VAL_LOSS]
        assert abs(float(loss) - recorded) < 1e-4
    best = min(runs, key=lambda r: r.data.metrics[Metric.FINAL_VAL_LOSS])
    assert best.data.tags[Tag.ARM] == "block"  # the best is not the first arm's
    best_config = (tmp_path / "ray" / "camp" / "best-config.yaml").read_text()
    assert f"residual: {best.data.params['model.residual']}" in best_config
    plans = client.list_artifacts(parents[0].info.run_id, PLANS_FOLDER)
    assert len(plans) == 5  # one per invocation


def test_a_diverging_sweep_records_the_divergence_as_a_result(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A learning rate of 1000, the command run with its trials trained in this process
    (``run_here``): every trial ends diverged at the step the loss went bad (not a crash in the
    dilution profile), its run FAILED with the reason and step, only finite values recorded; it
    returns normally with its status and the worst objectives in its last report (so Tune
    records it as reported rather than retrying a failure); the summary and the parent count
    the divergences, and so does the report."""
    code, runner = run_here(tmp_path, ["smoke", "--name", "diverge", "--set", "train.lr=1000"])
    assert code == 0 and "sweep diverge: 0 finished, 2 diverged" in capsys.readouterr().out
    hosts = runner.hosts
    parents, runs, client = trials(tmp_path, "diverge")
    assert len(runs) == 2 and len(hosts) == 2
    check_record(runs, client)
    check_tags(parents, runs)
    for run in runs:
        assert run.data.tags[Tag.STATUS] == "diverged" and run.info.status == "FAILED"
        step = int(run.data.tags[Tag.STATUS_STEP])
        assert 0 < step < 20 and f"at step {step}" in run.data.tags[Tag.REASON]
        assert "svd" not in run.data.tags[Tag.REASON]
        assert all(abs(v) < float("inf") for v in run.data.metrics.values())
        assert run.data.metrics[Metric.FINAL_STEPS] == step
        last = hosts[run.data.tags[Tag.TRIAL_KEY]].reports[-1]
        assert last[Report.STATUS] == "diverged" and last[Report.VAL_LOSS] == float("inf")
        assert Report.STEP not in last  # ASHA leaves it out of its rungs
    assert parents[0].data.metrics["sweep/diverged"] == 2
    from nas.cli import main

    out = tmp_path / "report"
    assert (
        main(["report", "diverge", "--tracking-uri", store_uri(tmp_path), "--out", str(out)]) == 0
    )
    assert "diverged" in (out / "report.md").read_text()


def test_trial_timeout_ends_each_trial_timed_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--trial-timeout shorter than one step, the command run with its trials trained in this
    process (``run_here``): every trial ends timed_out after its first step, its run
    FAILED with the reason, its last report saying so, and the sweep is settled: the same
    command runs nothing and starts no Ray."""
    import ray

    from nas.cli import main

    args = ["smoke", "--name", "slow", "--trial-timeout", "0.0001"]
    code, runner = run_here(tmp_path, args)
    assert code == 0
    hosts = runner.hosts
    _, runs, client = trials(tmp_path, "slow")
    assert len(runs) == 2
    check_record(runs, client)
    for run in runs:
        assert run.data.tags[Tag.STATUS] == "timed_out" and run.info.status == "FAILED"
        assert "limit" in run.data.tags[Tag.REASON]
        assert int(run.data.tags[Tag.STATUS_STEP]) < 20
        assert hosts[run.data.tags[Tag.TRIAL_KEY]].reports[-1][Report.STATUS] == "timed_out"
    capsys.readouterr()
    assert main(command(tmp_path, *args)) == 0
    assert "nothing to run" in capsys.readouterr().out and not ray.is_initialized()
