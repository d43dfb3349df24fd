"""A grid's trials in the calling process, one after another, without Ray: each by the trial
function a Tune worker runs (``nas.trial.run.run_trial``) on a ``nas.trial.host.LocalHost``. Given
to ``nas.sweep.run.run_sweep`` in place of Tune, the rest of the command (plan, record, stages,
summary, exit status) is as it is on Ray; a trial can then be stepped through in a debugger,
and the suite tests what a trial and the command make of its outcome without starting Ray.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nas.store.tracking import RecordedTrial
from nas.sweep.plan import Plan, SweepOptions
from nas.trial.host import LocalHost
from nas.trial.run import SweepContext, run_trial
from record.schema import GRID_PARAM


@dataclass
class LocalRunner:
    """``hosts``: every trial's host (its reports) by key; ``stages``: how many times the
    command handed it trials (a Tune experiment each, on Ray)."""

    hosts: dict[str, LocalHost] = field(default_factory=dict)
    stages: int = 0

    def start(self, opts: SweepOptions, p: Plan, seen: dict[str, bool]) -> None:
        if opts.workers_per_trial != 1:
            raise ValueError("a trial over several workers runs on Ray Train, not in-process")

    def run(
        self, opts: SweepOptions, p: Plan, ctx: SweepContext, recorded: dict[str, RecordedTrial]
    ) -> int:
        trials = p.campaign.tune_trials(recorded, opts.study_storage, p.name)
        if trials.search_alg is not None or GRID_PARAM not in trials.param_space:
            raise ValueError("a search's proposals come from Tune's searcher: run it on Ray")
        self.stages += 1
        for key in trials.param_space[GRID_PARAM]["grid_search"]:
            host = LocalHost(p.folder / "local" / key, id=f"local-{len(self.hosts)}")
            self.hosts[key] = host
            # A trial that raises ends the command with its traceback (no retry): the record
            # keeps its reason, and closing it marks the trial killed, to resume.
            run_trial({GRID_PARAM: key}, ctx, host)
        return 0
