"""Real sweeps: Ray (the session's shared cluster, or a local one of their own where a test kills
processes or needs its own), a real MLflow SQLite store, Lightning trials on the smoke space."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.nas import sweeps
from tests.ray_cluster import shared_env
from trainers.config_io import build_config


def test_grid_sweep_records_one_child_run_per_cell_and_resumes_without_duplicates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The smoke grid, the one real grid sweep: a time budget spent before the first trial
    starts runs no trial (exit 75, the parent KILLED, every trial 'not started'); the same
    command without the budget then runs them all, once each: a parent run and one nested
    child per cell, each with the flattened config as params, loss, bits-per-byte and dilution
    metrics with steps, and what it wrote is what record.schema names (every nas tag, every
    metric, every key of every Tune report: ``tests.nas.sweeps.check_schema``); a recorded trial
    retrains from its logged configuration to the same loss; running the same command again,
    in this process, re-runs nothing, starts no Ray and records nothing twice."""
    import ray

    from nas.cli import main

    budget = sweeps.sweep(tmp_path, "smoke", "--time-budget", "0.00001")
    assert budget.returncode == 75, budget.stderr[-3000:]
    assert "2 not started" in budget.stdout
    parents, children, _ = sweeps.trials(tmp_path, "smoke")
    assert len(parents) == 1 and parents[0].info.status == "KILLED" and not children

    proc = sweeps.sweep(tmp_path, "smoke")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "sweep smoke: 2 finished, 0 skipped" in proc.stdout
    runs, client = sweeps.runs(tmp_path, "smoke")
    parents = [r for r in runs if r.data.tags.get("nas.role") == "sweep"]
    children = [r for r in runs if r.data.tags.get("nas.role") == "trial"]
    assert len(parents) == 1 and len(children) == 2
    sweeps.check_record(children, client)
    sweeps.check_schema(tmp_path, "smoke", parents, children)
    parent = parents[0]
    assert parent.info.status == "FINISHED" and parent.data.metrics["sweep/finished"] == 2
    assert parent.data.params["train.max_steps"] == "20"  # the base configuration
    for child in children:
        assert child.data.tags["mlflow.parentRunId"] == parent.info.run_id
        assert child.info.status == "FINISHED" and child.data.tags["nas.status"] == "finished"
        assert child.data.params["model.residual"] in ("standard", "block_attnres")
        assert child.data.params["train.seed"] == "0"
        steps = [m.step for m in client.get_metric_history(child.info.run_id, "val/loss")]
        assert len(steps) >= 2 and steps == sorted(steps)
        assert "dilution/stream_growth" in child.data.metrics and "val/bpb" in child.data.metrics
        assert len(child.data.tags["nas.git_commit"]) in (40, 7)  # a sha, or "unknown"
    assert {c.data.tags["nas.arm"] for c in children} == {"standard", "block_attnres"}
    best_line = next(
        line
        for line in proc.stdout.splitlines()
        if "val_loss" in line and "seed" in line and line.startswith("  ")
    )
    best = build_config(str(tmp_path / "ray" / "smoke" / "best-config.yaml"))
    assert best.model.residual == best_line.split()[2] and best.train.max_steps == 20
    assert "nothing to run" not in proc.stdout
    # the last screen: the arms (one seed each, so no interval, and a line saying so), then
    # where the best configuration was written, not the configuration itself
    end = proc.stdout.splitlines()
    arms = end.index(next(line for line in end if line.startswith("arms by mean final")))
    assert {end[arms + 2].split()[0], end[arms + 3].split()[0]} == {"standard", "block_attnres"}
    assert any(line.startswith("one seed per arm: no interval") for line in end[arms:])
    assert end[-1].startswith("best trial: ") and "best-config.yaml" in end[-1]
    assert not any(line.lstrip().startswith(("model:", "train:")) for line in end)

    # the recorded trial retrains from its logged configuration and seed to the same loss
    child = children[0]
    retrain = subprocess.run(
        [
            sys.executable,
            "-m",
            "nas.cli",
            "train",
            "--from-run",
            child.info.run_id,
            "--tracking-uri",
            f"sqlite:///{tmp_path / 'mlflow.db'}",
            "--out",
            str(tmp_path / "re"),
            "--no-progress",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert retrain.returncode == 0, retrain.stderr[-3000:]
    recorded = child.data.metrics["final/val_loss"]
    retrained = json.loads((tmp_path / "re" / "result.json").read_text())["val_loss"]
    assert abs(retrained - recorded) < 1e-3 * recorded  # thread count may reorder float sums
    assert (
        build_config(str(tmp_path / "re" / "config.yaml")).model.residual
        == (child.data.params["model.residual"])
    )

    capsys.readouterr()
    assert main(sweeps.command(tmp_path, "smoke")) == 0 and not ray.is_initialized()
    again = capsys.readouterr().out
    assert "all 2 planned trials are settled in the record; nothing to run" in again
    runs_after, _ = sweeps.runs(tmp_path, "smoke")
    assert len(runs_after) == len(runs)  # no duplicate runs
    history = client.get_metric_history(children[0].info.run_id, "val/loss")
    assert len(history) == len(steps)  # the finished trial was not trained again


def test_unusable_tracking_store_exits_2(tmp_path: Path) -> None:
    """A tracking store that cannot be opened is one line and exit status 2, before any trial."""
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "nas.cli",
            "sweep",
            "smoke",
            "--tracking-uri",
            "sqlite:////proc/nas-no-store/mlflow.db",
            "--storage-path",
            str(tmp_path / "ray"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.startswith("nas: error: --tracking-uri") and "Traceback" not in proc.stderr
    assert not (tmp_path / "ray").exists()


PARETO_SEARCH = """\
description: validation loss against parameter count; n_heads 3 cannot split d_model 32
kind: search
sampler: random
base: {model.d_model: 32, model.seq_len: 64, train.batch_size: 4, train.max_steps: 10,
       train.val_every: 5, train.val_batches: 2, train.warmup_steps: 2,
       train.diagnostics_batch: 2, data.max_bytes: 1000000}
params:
  model.n_layers: [1, 2, 3]
  model.n_heads: [2, 3]
trials: 6
objectives: [{metric: val/loss}, {metric: params}]
"""


def test_multi_objective_search_reports_infeasible_proposals_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A two-objective search: every distinct proposal gets one child run (a point proposed
    again is answered from the record: same point, same seed, same result); the ones the
    configuration rejects are tagged infeasible with the reason and have no metrics (no
    training spent); the others record both objectives; the summary prints the Pareto front.
    Its trials run in this process (``sweeps.run_here``): nothing here needs Ray."""
    space = tmp_path / "pareto.yaml"
    space.write_text(PARETO_SEARCH)
    code, runner = sweeps.run_here(tmp_path, [str(space), "--name", "pareto"])
    stdout = capsys.readouterr().out
    assert code == 0
    runs, _ = sweeps.runs(tmp_path, "pareto")
    children = [r for r in runs if r.data.tags.get("nas.role") == "trial"]
    points = {(c.data.params["model.n_layers"], c.data.params["model.n_heads"]) for c in children}
    assert len(points) == len(children) <= 6
    assert len(runner.proposals) == 6
    distinct = {tuple(sorted(p.items())) for p in runner.proposals}
    assert len(distinct) == len(children)
    bad = [c for c in children if c.data.params.get("model.n_heads") == "3"]
    good = [c for c in children if c.data.params.get("model.n_heads") == "2"]
    assert bad and good and len(bad) + len(good) == len(children)
    assert all(c.data.tags["nas.status"] == "infeasible" for c in bad)
    assert all("n_heads" in c.data.tags["nas.reason"] and not c.data.metrics for c in bad)
    assert all("final/val_loss" in c.data.metrics for c in good)
    assert f"{len(bad)} infeasible" in stdout
    assert "Pareto front (val/loss min, params min):" in stdout
    # the report of a search: best trials, the front, and the infeasible proposals listed
    from nas.cli import main

    out = tmp_path / "report"
    assert (
        main(["report", "pareto", "--tracking-uri", sweeps.store_uri(tmp_path), "--out", str(out)])
        == 0
    )
    text = (out / "report.md").read_text()
    assert "**best trials**" in text and "**Pareto front**" in text
    assert text.count("| infeasible |") == len(bad)


def test_resume_without_a_stored_sweep_exits_2(tmp_path: Path) -> None:
    proc = sweeps.sweep(tmp_path, "smoke", "--resume")
    assert proc.returncode == 2 and "--resume: no stored sweep" in proc.stderr
    assert not (tmp_path / "mlflow.db").exists()


@pytest.mark.parametrize(
    "args,match",
    [
        (["nonesuch"], "no such space"),
        (["smoke", "--set", "model.depth=2"], "unknown field"),
        (
            ["smoke", "--set", "model.residual=attnres", "--set", "model.placement=post"],
            "model.placement",
        ),
        (["invalid.yaml"], "has no valid configuration"),
        (["smoke", "--seeds", "a,b"], "--seeds"),
        (["smoke", "--address", "127.0.0.1:1"], "no Ray cluster reachable"),
        (["smoke", "--storage-path", "/proc/nas-cannot-write-here"], "not a writable folder"),
        (["smoke", "--workers-per-trial", "3"], "train.batch_size: 4 does not split evenly"),
        (
            ["smoke", "--workers-per-trial", "2", "--set", "train.micro_batch=4"],
            "train.micro_batch: 4 does not divide each worker's share (2)",
        ),
        (["smoke", "--workers-per-trial", "0"], "and --workers-per-trial must be >= 1"),
        (
            ["smoke", "--workers-per-trial", "2", "--strategy", "zero3"],
            "--strategy zero3: unknown; choose from ddp, fsdp",
        ),
        (["smoke", "--strategy", "fsdp"], "--strategy fsdp: shards the model over the workers"),
    ],
)
def test_bad_sweep_input_exits_2_before_anything_is_recorded(
    tmp_path: Path, args: list[str], match: str
) -> None:
    """Bad input: one line, exit status 2, no MLflow store and no Tune state written."""
    (tmp_path / "invalid.yaml").write_text(
        "arms: {a: {model.residual: attnres, model.placement: post}}\n"
    )
    proc = sweeps.sweep(tmp_path, *args)
    assert proc.returncode == 2 and match in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["invalid.yaml"]


INTERRUPTIBLE = """\
description: three trials, long enough to interrupt the last one
base: {model.d_model: 32, model.n_heads: 2, model.seq_len: 64, train.batch_size: 4,
       train.max_steps: 150, train.val_every: 25, train.val_batches: 2, train.warmup_steps: 2,
       train.diagnostics_batch: 2, data.max_bytes: 1000000}
params: {model.n_layers: [1, 2, 3]}
"""


def test_an_interrupted_sweep_resumes_after_sigterm_then_sigkill_without_duplicates(
    tmp_path: Path,
) -> None:
    """One sweep interrupted twice, then finished by the same command.

    SIGTERM (a cluster scheduler's preemption; handled as Ctrl-C) after the first trials
    finish: the interrupted trial's run is marked killed, nothing is left RUNNING, the sweep
    exits 143. The same command resumes only that trial, from its last checkpoint, and its
    driver is SIGKILLed (no chance to clean up) once the trial has reported past it. The same
    command again finishes the sweep: exactly one finished run per trial, every validation
    step logged once (the resumed trial's not from scratch), one checkpoint per trial. (What
    Tune re-runs after SIGKILL depends on when it last saved its state; the record's integrity
    must not.)"""
    space = tmp_path / "space.yaml"
    space.write_text(INTERRUPTIBLE)
    cmd = [
        sys.executable,
        "-m",
        "nas.cli",
        "sweep",
        str(space),
        "--name",
        "cut",
        "--tracking-uri",
        f"sqlite:///{tmp_path / 'mlflow.db'}",
        "--storage-path",
        str(tmp_path / "ray"),
    ]
    # the session's shared cluster: a terminated driver ends its own job's trials, not Ray
    shared = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", **shared_env()}
    deadline = time.monotonic() + 300
    proc = _start(cmd, tmp_path / "first.txt", shared)
    _wait_for(proc, tmp_path / "first.txt", deadline, "] finished ", count=2)
    _wait_for(proc, tmp_path / "first.txt", deadline, "n_layers=3 seed 0")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) == 143
    assert "sweep cut: 2 finished, 1 killed" in (tmp_path / "first.txt").read_text()
    runs, client = sweeps.runs(tmp_path, "cut")
    assert not [r for r in runs if r.info.status == "RUNNING"]
    third = next(r for r in runs if r.data.tags.get("nas.arm", "").endswith("n_layers=3"))
    assert third.info.status == "KILLED" and third.data.tags["nas.status"] == "killed"
    steps_before = [m.step for m in client.get_metric_history(third.info.run_id, "val/loss")]
    assert steps_before and max(steps_before) < 149

    # a local Ray of its own, whose orphans a killed driver leaves and the test must end
    ray_tmp = Path(tempfile.mkdtemp(prefix="nas-kill-", dir="/tmp"))  # names its processes
    own = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "RAY_TMPDIR": str(ray_tmp)}
    try:
        proc = _start(cmd, tmp_path / "second.txt", own)
        _wait_for(proc, tmp_path / "second.txt", deadline + 300, "n_layers=3 seed 0  step ")
        proc.kill()
        proc.wait(timeout=60)
    finally:
        _kill_processes_naming(str(ray_tmp))  # the killed driver's local Ray, orphaned
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert "] finished " not in (tmp_path / "second.txt").read_text()  # only the third ran

    again = subprocess.run(
        cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600, env=shared
    )
    assert again.returncode == 0, again.stderr[-3000:]
    assert "sweep cut: 3 finished, 0 skipped" in again.stdout
    assert again.stdout.count("] finished ") == 1  # only the interrupted trial ran again
    assert "[##############################] 3/3 trials" in again.stdout, again.stdout
    runs, client = sweeps.runs(tmp_path, "cut")
    trials = [r for r in runs if r.data.tags.get("nas.role") == "trial"]
    parents = [r for r in runs if r.data.tags.get("nas.role") == "sweep"]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    assert len(trials) == 3 and all(r.info.status == "FINISHED" for r in trials)
    for r in trials:  # resumed from checkpoints, not from scratch, and no step logged twice
        steps = [m.step for m in client.get_metric_history(r.info.run_id, "val/loss")]
        assert steps and sorted(steps) == [24, 49, 74, 99, 124, 149]
    train_steps = [m.step for m in client.get_metric_history(third.info.run_id, "train/loss")]
    assert len(train_steps) == len(set(train_steps))
    # the settled sweep kept one checkpoint per trial: the newest of its key
    marks = list((tmp_path / "ray" / "cut").glob("tune-*/*/checkpoint_*/nas-checkpoint.json"))
    assert len(marks) == len({json.loads(m.read_text())["key"] for m in marks}) == 3


def _start(cmd: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """The sweep in the background, its output in ``log``."""
    out = log.open("w")
    return subprocess.Popen(cmd, cwd=log.parent, stdout=out, stderr=subprocess.DEVNULL, env=env)


def _wait_for(
    proc: subprocess.Popen[bytes], log: Path, deadline: float, text: str, count: int = 1
) -> None:
    """Until ``log`` holds ``text`` ``count`` times; the sweep must not end first."""
    while log.read_text().count(text) < count:
        assert proc.poll() is None, f"the sweep ended before printing {text!r}"
        assert time.monotonic() < deadline, f"no {text!r} in time"
        time.sleep(0.2)


def _kill_processes_naming(text: str) -> None:
    """SIGKILL every process whose command line contains ``text``, and their descendants."""
    from tests.ray_cluster import pids_naming, stop

    stop(pids_naming(text))
