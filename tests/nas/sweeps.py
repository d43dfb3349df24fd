"""Helpers for the campaign tests: a sweep's runs read back from its store, the invariants any
sweep's record keeps, what a real sweep wrote against ``record.schema``, and an invocation of
``nas sweep`` played without Ray (``play``): its plan made and its record opened as the command
does (``nas.sweep.plan.plan``, ``nas.sweep.opening.begin``), then each trial the campaign hands
Tune written by the trials' own writer (``nas.store.tracking.TrialRun``), finished at a given loss,
stage after stage as the command runs them (a tuned grid's seeds once its stage is settled);
the command with each trial trained in this process instead of on Ray (``run_here``); or
an invocation whose time budget ran out before its first trial (``spend``).
What a campaign decides (which cells are left, what is refused, what the summary names) is then
tested on a real MLflow store in a few seconds; what only a trial or Tune writes is not."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from record.schema import GRID_PARAM, RUN_STATUS, Metric, Report, Status, Tag, tune_key
from tests.ray_cluster import shared_env

STEPS = 20  # the campaign spaces' train.max_steps
VAL_EVERY = 10  # and their train.val_every


def store_uri(tmp: Path) -> str:
    """The tracking store a test's sweeps share (``sweep``'s, unless told another)."""
    return f"sqlite:///{tmp / 'mlflow.db'}"


def command(tmp: Path, *args: str) -> list[str]:
    """``nas sweep ARGS`` as argv, recorded in ``tmp`` as the subprocess sweeps are (unless
    ARGS name a store or a storage path)."""
    storage = [] if "--storage-path" in args else ["--storage-path", str(tmp / "ray")]
    store = [] if "--tracking-uri" in args else ["--tracking-uri", store_uri(tmp)]
    return ["sweep", *args, *store, *storage]


def sweep(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``nas sweep ARGS`` on the session's shared Ray cluster, recorded in ``tmp`` (unless
    ARGS name a store)."""
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", **shared_env()}
    storage = [] if "--storage-path" in args else ["--storage-path", str(tmp / "ray")]
    store = [] if "--tracking-uri" in args else ["--tracking-uri", store_uri(tmp)]
    return subprocess.run(
        [sys.executable, "-m", "nas.cli", "sweep", *args, *store, *storage],
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )


def runs(tmp: Path, name: str) -> tuple[list[Any], Any]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=store_uri(tmp))
    exp = client.get_experiment_by_name(name)
    assert exp is not None
    return list(client.search_runs([exp.experiment_id], max_results=1000)), client


def trials(tmp: Path, name: str) -> tuple[list[Any], list[Any], Any]:
    """The sweep's parent runs, its trial runs, and the client that read them."""
    found, client = runs(tmp, name)
    parents = [r for r in found if r.data.tags.get(Tag.ROLE) == "sweep"]
    return parents, [r for r in found if r.data.tags.get(Tag.ROLE) == "trial"], client


def history(client: Any, run: Any, metric: str) -> list[int]:
    return [m.step for m in client.get_metric_history(run.info.run_id, metric)]


def check_record(trials: list[Any], client: Any) -> None:
    """The invariants of any record: no run left RUNNING, one run per key and parent, the run
    status the trial status implies, and no metric step recorded twice."""
    assert not [r for r in trials if r.info.status == "RUNNING"]
    keys = [(r.data.tags[Tag.PARENT], r.data.tags[Tag.TRIAL_KEY]) for r in trials]
    assert len(keys) == len(set(keys))
    for r in trials:
        assert r.info.status == RUN_STATUS[Status(r.data.tags[Tag.STATUS])]
        for metric in (Metric.VAL_LOSS, Metric.TRAIN_LOSS):
            steps = history(client, r, metric)
            assert len(steps) == len(set(steps)), (metric, steps)


def finished_lines(stdout: str) -> int:
    return stdout.count("] finished ")


def tune_dirs(tmp: Path, name: str) -> list[Path]:
    return sorted((tmp / "ray" / name).glob("tune-*"))


def check_schema(tmp: Path, name: str, parents: list[Any], trials: list[Any]) -> None:
    """What a real sweep wrote is what record.schema names: every nas tag, every metric apart
    from the dilution summaries, and every key of every Tune report."""
    from ray.tune.result import AUTO_RESULT_KEYS

    check_tags(parents, trials)
    metrics = {v for k, v in vars(Metric).items() if not k.startswith("_")}
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


def check_tags(parents: list[Any], trials: list[Any]) -> None:
    """Every nas tag the runs carry is one record.schema names."""
    tags = {v for k, v in vars(Tag).items() if not k.startswith("_")}
    for run in [*parents, *trials]:
        written = {k for k in run.data.tags if k.startswith("nas.")}
        assert written <= tags, written - tags


@dataclass
class PlayedRunner:
    """A runner (``nas.sweep.run.Runner``) that trains nothing: each trial the campaign hands
    Tune is written finished at its cell's loss in ``losses`` ((arm, seed) -> final validation
    loss; a stage trial's arm names its value), as a trial writes it. ``written``: the specs of
    the trials it wrote, in the order the campaign handed them."""

    losses: Mapping[tuple[str, int], float]
    written: list[Any] = field(default_factory=list)

    def start(self, opts: Any, p: Any, seen: dict[str, bool]) -> None:
        pass

    def run(self, opts: Any, p: Any, ctx: Any, recorded: dict[str, Any]) -> int:
        handed = p.campaign.tune_trials(recorded, None, p.name).param_space[GRID_PARAM]
        for key in handed["grid_search"]:
            spec = p.campaign.spec_for({GRID_PARAM: key})
            write_trial(ctx.record, spec, self.losses[spec.arm, spec.seed])
            self.written.append(spec)
        return 0


def play(tmp: Path, args: list[str], losses: Mapping[tuple[str, int], float]) -> list[Any]:
    """One invocation of ``nas sweep ARGS`` (a grid) without Ray: the plan and the record as
    the command makes and opens them (a changed plan raises its refusal), then the command's
    own stage loop (``nas.sweep.run.run_stages``) with every trial it hands over written by a
    ``PlayedRunner``, stage after stage (a tuned grid's seeds once its stage is settled, its
    decisions logged and printed); the parent run closed. Returns the specs of the trials it
    wrote, in the order the campaign handed them."""
    from nas.cli import build_parser
    from nas.commands.sweep import options
    from nas.store.tracking import close_sweep
    from nas.sweep.opening import begin, context
    from nas.sweep.plan import plan
    from nas.sweep.run import run_stages

    opts = options(build_parser().parse_args(command(tmp, *args)))
    p, record, recorded = begin(store_uri(tmp), plan(opts), opts)
    runner = PlayedRunner(losses)
    ctx = context(opts, p, record)
    p, _ = run_stages(opts, p, ctx, record, recorded, {"sigterm": False}, runner)
    close_sweep(record, {}, "FINISHED", p.folder)
    return runner.written


def run_here(tmp: Path, args: list[str]) -> tuple[int, Any]:
    """``nas sweep ARGS`` (a grid or a search) as the command runs it, with its trials trained
    in this process instead of on Ray Tune (``nas.sweep.local_run.LocalRunner``: Tune's trial
    function on a local host, a search's points proposed by its searcher): what a trial and the
    command make of its outcome, without Ray. (What Tune does with the trials' reports: the
    real sweeps.) The record's command is ``nas sweep ARGS``, as typed. Returns the exit status
    and the runner (each trial's reports, by key; a search's proposals; how many stages it was
    handed and how many proposals repeated a settled point)."""
    from nas.cli import build_parser
    from nas.commands.sweep import options
    from nas.sweep.local_run import LocalRunner
    from nas.sweep.run import run_sweep

    runner, argv, typed = LocalRunner(), command(tmp, *args), sys.argv
    sys.argv = ["nas", *argv]  # what the parent run records as the command (nas.sweep.opening)
    try:
        code = run_sweep(options(build_parser().parse_args(argv)), runner)
    finally:
        sys.argv = typed
    return code, runner


def spend(tmp: Path, args: list[str]) -> None:
    """One invocation of ``nas sweep ARGS`` whose time budget ran out before its first trial,
    without Ray: the plan and the record as the command makes and opens them, nothing handed to
    Tune, and the record closed and summarized (printed) as ``nas.sweep.run`` closes it then. (That
    the command exits 75 then, with Ray: the real grid sweep of test_sweep.py.)"""
    from nas.cli import build_parser
    from nas.commands.sweep import options
    from nas.store.tracking import close_sweep
    from nas.sweep.opening import begin
    from nas.sweep.plan import plan
    from nas.sweep.run import _finish

    opts = options(build_parser().parse_args(command(tmp, *args)))
    p, record, _ = begin(store_uri(tmp), plan(opts), opts)
    summary, status = _finish(p, store_uri(tmp), record, 0)
    close_sweep(record, summary, status, p.folder)


def write_trial(record: Any, spec: Any, loss: float) -> None:
    """A finished trial of ``spec`` as ``nas.trial.run`` records it: its run (params, the arm and
    seed tags), training and validation losses by step, the final loss, steps and parameter
    count, its outcome."""
    from nas.store.tracking import TrialRun
    from trainers.config import flatten
    from trainers.measure.memory_plan import param_count

    tags = {Tag.ARM: spec.arm, Tag.SEED: str(spec.seed)}
    run = TrialRun(record, spec.key, flatten(spec.config), tags)
    for step in range(VAL_EVERY, STEPS + 1, VAL_EVERY):
        run.log_metrics({Metric.TRAIN_LOSS: loss + 0.1, Metric.VAL_LOSS: loss}, step)
    params = float(param_count(spec.config.model))  # counted from the config, not a built model
    final = {Metric.FINAL_VAL_LOSS: loss, Metric.FINAL_STEPS: float(STEPS)}
    run.log_metrics({**final, Metric.FINAL_PARAMS: params}, STEPS)
    run.end(Status.FINISHED, "", STEPS)
