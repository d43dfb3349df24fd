"""A sweep's trials in the calling process, one after another, without Ray: each by the trial
function a Tune worker runs (``nas.trial.run.run_trial``) on a ``nas.trial.host.LocalHost``. A
grid's trials are the keys it has left; a search's are the proposals of the searcher the
campaign would hand Tune (``nas.campaign.searcher``), asked and told through its own
``Searcher`` API as Tune asks and tells it one trial at a time. Given to
``nas.sweep.run.run_sweep`` in place of Tune, the rest of the command (plan, record, stages,
summary, exit status) is as it is on Ray; a trial can then be stepped through in a debugger,
and the suite tests what a trial and the command make of its outcome without starting Ray.

What only Ray does stays there: ASHA (a trial here runs to its end, so ``--scheduler asha`` is
refused and ``auto`` stops nothing), a running trial stopped by the time budget (here it ends,
and the trials after it defer themselves), a failed trial's retries, data-parallel workers.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from nas.campaign.kinds import TuneTrials
from nas.store.tracking import RecordedTrial
from nas.sweep.plan import Plan, SweepOptions
from nas.trial.host import LocalHost
from nas.trial.run import SweepContext, run_trial
from record.schema import GRID_PARAM, Report


@dataclass
class LocalRunner:
    """``hosts``: the host (its reports) of each trial key, the latest where a search proposed
    a key twice; ``proposals``: a search's points in the order its searcher proposed them;
    ``stages``: how many times the command handed it trials (a Tune experiment each, on Ray);
    ``repeats``: the proposals of a point the record had settled (answered from it)."""

    hosts: dict[str, LocalHost] = field(default_factory=dict)
    proposals: list[dict[str, Any]] = field(default_factory=list)
    stages: int = 0
    repeats: int = 0
    _started: int = field(default=0, init=False)  # the trial ids handed out

    def start(self, opts: SweepOptions, p: Plan, seen: dict[str, bool]) -> None:
        if opts.workers_per_trial != 1:
            raise ValueError("a trial over several workers runs on Ray Train, not in-process")
        if opts.scheduler == "asha":
            raise ValueError("ASHA stops trials on Ray Tune; an in-process trial runs to its end")

    def run(
        self, opts: SweepOptions, p: Plan, ctx: SweepContext, recorded: dict[str, RecordedTrial]
    ) -> int:
        trials = p.campaign.tune_trials(recorded, opts.study_storage, p.name)
        # The context's record is the one Tune pickles, its URI without the password; a trial
        # here is never pickled, so it writes with the URI the command was given.
        ctx = replace(ctx, record=replace(ctx.record, uri=p.uri))
        self.stages += 1
        if trials.search_alg is None:
            for key in trials.param_space[GRID_PARAM]["grid_search"]:
                self._trial(self._next_id(), {GRID_PARAM: key}, p, ctx)
            return 0
        return self._search(trials, p, ctx)

    def _next_id(self) -> str:
        self._started += 1
        return f"local-{self._started - 1}"

    def _trial(
        self, trial_id: str, config: dict[str, Any], p: Plan, ctx: SweepContext
    ) -> LocalHost:
        """One trial of ``config`` on a host of its own. A trial that raises ends the command
        with its traceback (no retry): the record keeps its reason, and closing it marks the
        trial killed, to resume."""
        key = ctx.key_for(config)
        host = LocalHost(p.folder / "local" / key, id=trial_id)
        self.hosts[key] = host
        run_trial(config, ctx, host)
        return host

    def _search(self, trials: TuneTrials, p: Plan, ctx: SweepContext) -> int:
        """``num_samples`` proposals, each trained before the next is asked for, as Tune runs
        them at concurrency 1; returns how many repeated a point the record had settled."""
        searcher, repeats = trials.search_alg, 0
        for _ in range(trials.num_samples):
            trial_id = self._next_id()
            config = searcher.suggest(trial_id)
            if not isinstance(config, dict):  # None (wait) or Searcher.FINISHED: no proposal
                break
            self.proposals.append(dict(config))
            last = self._told(searcher, trial_id, dict(config), p, ctx)
            repeats += bool(last.get(Report.REPEAT))
        self.repeats += repeats
        return repeats

    def _told(
        self, searcher: Any, trial_id: str, config: dict[str, Any], p: Plan, ctx: SweepContext
    ) -> dict[str, Any]:
        """Train one proposal and tell the searcher what Tune tells it once the trial ended:
        its last report (its status and objectives; a deferred trial's has none, and the
        study prunes it), or that it failed. The validations before it, which Tune passes to
        ``on_trial_result``, would only be the study's intermediate values, which neither the
        sampler nor a pruner (the searcher has none) reads: not passed. Returns the last
        report."""
        try:
            host = self._trial(trial_id, config, p, ctx)
        except Exception:
            searcher.on_trial_complete(trial_id, error=True)  # Tune's call once a trial failed
            raise
        last = host.reports[-1]
        searcher.on_trial_complete(trial_id, result=dict(last))
        return last
