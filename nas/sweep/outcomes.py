"""Trial statuses that only the driver can know, written to the record as Tune decides them:
a trial the scheduler stopped (``stopped_early``), one that failed for good after Tune's retries
(``failed``), one ended at its first checkpoint after the time budget ran out (``killed``: the
next invocation resumes it). A trial that ended on its own said its status in its last report;
an interrupted sweep's trials are marked ``killed`` when the driver closes the record.

Also the time budget: past ``--time-budget``, running trials stop at their next report (each
carries a checkpoint) and trials not yet started defer themselves (``nas.trial.run``).
"""

from __future__ import annotations

import time
from typing import Any

from ray import tune
from ray.tune.stopper import Stopper

from nas.store.tracking import set_outcome
from nas.trial.run import SweepContext
from record.errors import first_line
from record.schema import Report, Status


def past(deadline: float | None) -> bool:
    return deadline is not None and time.time() > deadline


def ended_by_driver(deadline: float | None) -> Status:
    """A trial that ended without saying how: stopped by the scheduler, or, past the time
    budget, stopped to be resumed later."""
    return Status.KILLED if past(deadline) else Status.STOPPED_EARLY


class Outcomes(tune.Callback):
    def __init__(self, ctx: SweepContext) -> None:
        self.ctx = ctx

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        last = trial.last_result or {}
        if Report.STATUS in last:
            return  # the trial recorded its own outcome (or deferred itself)
        step = last.get(Report.STEP)
        status = ended_by_driver(self.ctx.deadline)
        key = self.ctx.key_for(trial.config)
        step_ = None if step is None else int(step)
        set_outcome(self.ctx.record, key, status, step=step_, journal=self.ctx.journal(key))

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        error = trial.get_error()
        reason = first_line(error, limit=5000) if error is not None else "the trial's worker failed"
        key = self.ctx.key_for(trial.config)
        journal = self.ctx.journal(key)
        set_outcome(self.ctx.record, key, Status.FAILED, reason, keep_reason=True, journal=journal)


class TimeBudget(Stopper):
    """Past the deadline, stop each running trial at its next report: every validation report
    carries a checkpoint, so nothing trained is lost; the trial's last report (its status) is
    let through."""

    def __init__(self, deadline: float | None) -> None:
        self.deadline = deadline

    def __call__(self, trial_id: str, result: dict) -> bool:
        return past(self.deadline) and Report.STATUS not in result

    def stop_all(self) -> bool:
        return False
