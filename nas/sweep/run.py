"""``nas sweep``: every trial of a space trained on Ray Tune (grid or Optuna search, ASHA where
it fits), recorded in MLflow as one parent run with a nested child run per trial.

The steps, in order: load the space and build the base configuration; expand the grid into
trial specs (skipping invalid cells with their reasons) or set up the search; compare the plan
with what the record already holds (extend it, or refuse a change before anything runs); open
the MLflow record in the driver; start or join Ray; run this invocation's Tune experiment over
the trials still to run; close the record and print the summary, read from the record.

Each invocation runs a Tune experiment of its own (``<storage>/<sweep>/tune-NNNN-<tag>``); the
record in MLflow, not Tune's state, says which trials are settled, and a trial interrupted in
one invocation resumes in the next from the newest checkpoint of its key.
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import replace
from pathlib import Path
from typing import Protocol

from nas.exits import Exit
from nas.store.outbox import JOURNAL_FOLDER
from nas.store.tracking import (
    RecordedTrial,
    SweepRecord,
    close_sweep,
    recorded_trials,
    store_failure,
)
from nas.sweep.coordcheck import record_coordchecks
from nas.sweep.opening import begin, context, log_progress
from nas.sweep.plan import Plan, SweepOptions, plan
from nas.sweep.tune_run import TuneRunner
from nas.trial.checkpoints import latest_checkpoints, prune
from nas.trial.run import SweepContext
from record.redact import redact
from record.uri import resolve_tracking_uri

__all__ = ["Runner", "SweepOptions", "plan", "run_stages", "run_sweep"]

EXIT_INTERRUPTED, EXIT_TERMINATED = Exit.INTERRUPTED, Exit.TERMINATED
EXIT_TIME_BUDGET, EXIT_STORE_DOWN = Exit.TIME_BUDGET, Exit.STORE_DOWN


class Runner(Protocol):
    """What runs a stage's trials: Ray Tune (``nas.sweep.tune_run.TuneRunner``, the command's) or
    this process (``nas.sweep.local_run.LocalRunner``, a grid's or a search's, one trial at a
    time, for a debugger and the suite)."""

    def start(self, opts: SweepOptions, p: Plan, seen: dict[str, bool]) -> None:
        """Before the first stage: Ray started or joined, SIGTERM noted in ``seen``."""

    def run(
        self, opts: SweepOptions, p: Plan, ctx: SweepContext, recorded: dict[str, RecordedTrial]
    ) -> int:
        """The trials ``p.campaign`` has left; returns how many search proposals repeated a
        point the record had settled (answered from it, not run)."""


def run_stages(
    opts: SweepOptions,
    p: Plan,
    ctx: SweepContext,
    record: SweepRecord,
    recorded: dict[str, RecordedTrial],
    seen: dict[str, bool],
    runner: Runner,
) -> tuple[Plan, int]:
    """Run this invocation's trials: one Tune experiment, and one more each time the record
    of the last lets the campaign plan trials it could not before (a tuned grid's seeds once
    its learning-rate stage is settled), until the time budget or a signal ends it. Returns
    the plan as the record left it and how many search proposals repeated a point the record
    had settled (answered from it, not run)."""
    from nas.sweep.outcomes import past

    total = p.campaign.total
    if not p.campaign.left(recorded):
        print(
            f"sweep {p.name}: all {total} planned trials are settled in the record; nothing to run"
        )
        return p, 0
    runner.start(opts, p, seen)
    repeats, campaign = 0, None
    while p.campaign is not campaign and not (past(ctx.deadline) or seen["sigterm"]):
        campaign = p.campaign
        if campaign.left(recorded):  # a stage that left nothing to run plans no Tune run
            repeats += runner.run(opts, p, ctx, recorded)
            recorded = recorded_trials(record)
        p = replace(p, campaign=campaign.given(recorded))
        ctx = replace(ctx, campaign=p.campaign)
        if p.campaign is not campaign:
            log_progress(record, p)
    return p, repeats


def _finish(p: Plan, uri: str, record: SweepRecord, repeats: int) -> tuple[dict[str, float], str]:
    """Close the record (trials left RUNNING are killed) and summarize it."""
    from nas.sweep.summary import best, outcomes, print_end, print_next, summarize

    close_sweep(record, {}, None, p.folder)
    recorded = recorded_trials(record)
    results = outcomes(p.campaign.planned(recorded, repeats), recorded)
    summary = summarize(p.name, results, p.space.objectives, p.skipped)
    print_next(p.name, uri, resolve_tracking_uri(None), p.folder)
    print_end(p.name, uri, best(results), p.folder)
    if not summary["sweep/unsettled"]:  # every trial's steps are in the record
        prune(p.folder, {Path(c[0]) for c in latest_checkpoints(p.folder).values()})
        shutil.rmtree(p.folder / JOURNAL_FOLDER, ignore_errors=True)
    return summary, "KILLED" if summary["sweep/unsettled"] else "FINISHED"


def run_sweep(opts: SweepOptions, runner: Runner | None = None) -> int:
    """The command: its trials on Ray Tune unless given another runner."""
    p = plan(opts)  # every bad input surfaces here or in begin, before anything is recorded
    uri = p.uri
    p, record, recorded = begin(uri, p, opts)
    try:
        return _run(opts, p, uri, record, recorded, TuneRunner() if runner is None else runner)
    except Exception as err:
        # The store went away for longer than MLflow's client retries (about four minutes):
        # what reached it stays, the trials' journals keep the rest, and the same command
        # resumes. One line, not a traceback.
        reason = store_failure(err)
        if reason is None:
            raise
        print(
            f"nas: the tracking store {redact(uri)} failed ({reason}); what it "
            "recorded is kept: run the same command again to resume",
            file=sys.stderr,
        )
        return EXIT_STORE_DOWN


def _run(
    opts: SweepOptions,
    p: Plan,
    uri: str,
    record: SweepRecord,
    recorded: dict[str, RecordedTrial],
    runner: Runner,
) -> int:
    ctx = context(opts, p, record)
    seen = {"sigterm": False}
    summary: dict[str, float] = {}
    status = "FAILED"
    try:
        record_coordchecks(record, p)  # a parametrization other than sp: its check, once
        p, repeats = run_stages(opts, p, ctx, record, recorded, seen, runner)
        summary, status = _finish(p, uri, record, repeats)
    except KeyboardInterrupt:  # before or after Tune's own handler
        status = "KILLED"
        print("interrupted: run the same command again to resume", file=sys.stderr)
    finally:
        close_sweep(record, summary, status, p.folder)
    if seen["sigterm"]:
        return EXIT_TERMINATED
    if status == "KILLED":
        from nas.sweep.outcomes import past

        return EXIT_TIME_BUDGET if past(ctx.deadline) else EXIT_INTERRUPTED
    return Exit.TRIAL_FAILED if summary.get("sweep/failed") else Exit.DONE
