"""A sweep's campaign: a **grid** (every valid cell of the space, known before anything runs) or a
**search** (``trials`` points proposed one by one by an Optuna searcher). The two are the only
places that know which a sweep is; the plan, the Tune set-up, the trials, the live view and the
summary ask the campaign they hold, through the contract of ``Campaign``.

Made once, where the plan is built (``nas.sweep_plan.plan``), by ``campaign_of``; plain data, so
it pickles to Tune's workers inside the trials' context.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from nas.spec import TrialSpec, grid_specs, search_models, search_spec, trial_label
from record.schema import GRID_PARAM, SETTLED
from search_spaces.space import Kind, Skipped, Space, collapsed, grid_cells, partitions
from trainers.config import RunConfig, partition_label

if TYPE_CHECKING:
    from nas.tracking import RecordedTrial

Recorded = Mapping[str, "RecordedTrial"]  # trial key -> what the record holds of it


@dataclass(frozen=True)
class TuneTrials:
    """What a campaign hands Tune for this invocation (``tune.Tuner`` and ``tune.TuneConfig``
    take them as they are): the param space, the number of samples, the search algorithm."""

    param_space: Mapping[str, Any]
    num_samples: int = 1
    search_alg: Any = None


@dataclass(frozen=True)
class Campaign(ABC):
    """The contract both campaign types keep. ``space`` and ``base`` are the plan's (the space
    with the command line's seeds, trials and ``--set`` applied); ``specs`` are the trials known
    before anything runs (a grid's cells; a search has none) and ``skipped`` the cells the
    configuration rejects, each with its reason. Given what the record holds (``recorded``), a
    campaign says what is left to run, how many trials it has in all and how many are settled,
    what Tune runs, which spec a Tune config is, and what the summary lists."""

    space: Space
    base: RunConfig
    specs: tuple[TrialSpec, ...] = ()
    skipped: tuple[Skipped, ...] = ()
    # What the plan says of itself, e.g. that several cells build one model and run once.
    notes: tuple[str, ...] = ()

    # Whether ASHA stops trials early when the command leaves the scheduler to ``auto``.
    asha_by_default: ClassVar[bool]
    # Whether the campaign has an Optuna study (``--study-storage`` may hold it).
    has_study: ClassVar[bool]

    @classmethod
    @abstractmethod
    def of(cls, space: Space, base: RunConfig) -> Campaign:
        """The campaign of ``space`` over ``base``."""

    @property
    @abstractmethod
    def total(self) -> int:
        """How many trials the campaign has in all."""

    @abstractmethod
    def left(self, recorded: Recorded) -> int:
        """How many trials are left to run, given what the record holds."""

    @property
    def seed(self) -> int:
        """The seed of a trial proposed as the sweep runs (a search's; a grid's cells carry
        their own): the space's first."""
        return self.space.seeds[0]

    def settled(self, recorded: Recorded) -> int:
        """How many of the campaign's trials an earlier invocation settled (not run again)."""
        return self.total - self.left(recorded)

    @abstractmethod
    def tune_trials(
        self, recorded: Recorded, study_storage: str | None, study_name: str
    ) -> TuneTrials:
        """This invocation's trials as Tune takes them."""

    @abstractmethod
    def spec_for(self, config: Mapping[str, Any]) -> TrialSpec:
        """The spec of the trial Tune runs with ``config``; ValueError for a proposal the
        configuration rejects."""

    @abstractmethod
    def worst(self) -> dict[str, float]:
        """Each objective's Tune key -> its worst value, reported for an infeasible or diverged
        trial so a searcher avoids the region; empty where nothing searches."""

    @abstractmethod
    def planned(self, recorded: Recorded, repeats: int = 0) -> dict[str, str]:
        """The summary's plan, key -> label: every trial this invocation's plan names, given
        what the record holds once it ran and how many of its proposals repeated a settled
        point (answered from the record, not recorded again)."""

    @abstractmethod
    def describe(self) -> list[str]:
        """``nas spaces``' lines about what the campaign runs."""

    @abstractmethod
    def models(self) -> list[Any]:
        """The models the campaign's trials may build (``ModelConfig``s, or a model section's
        values by field name): what a ``--set`` of a field must be read by."""


@dataclass(frozen=True)
class GridCampaign(Campaign):
    """Every valid cell of arms x params x seeds, expanded once; Tune gets the keys still to
    run, each trial finds its spec by key. ASHA is never the default: an ablation compares full
    runs."""

    # each AttnRes arm's blocks (sublayers per block): what ``attnres_blocks`` = N means there
    blocks: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    _by_key: dict[str, TrialSpec] = field(init=False, repr=False, compare=False)

    asha_by_default: ClassVar[bool] = False
    has_study: ClassVar[bool] = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_key", {s.key: s for s in self.specs})

    @classmethod
    def of(cls, space: Space, base: RunConfig) -> GridCampaign:
        cells, skipped = grid_cells(space, base)
        specs, notes = tuple(grid_specs(cells)), tuple(collapsed(cells))
        return cls(space, base, specs, tuple(skipped), notes, partitions(cells))

    @property
    def total(self) -> int:
        return len(self.specs)

    def todo(self, recorded: Recorded) -> list[TrialSpec]:
        """The planned trials the record has not settled, in plan order."""
        settled = {k for k, t in recorded.items() if t.status in SETTLED}
        return [s for s in self.specs if s.key not in settled]

    def left(self, recorded: Recorded) -> int:
        return len(self.todo(recorded))

    def tune_trials(
        self, recorded: Recorded, study_storage: str | None, study_name: str
    ) -> TuneTrials:
        from ray import tune

        return TuneTrials({GRID_PARAM: tune.grid_search([s.key for s in self.todo(recorded)])})

    def spec_for(self, config: Mapping[str, Any]) -> TrialSpec:
        return self._by_key[str(config[GRID_PARAM])]

    def worst(self) -> dict[str, float]:
        return {}

    def planned(self, recorded: Recorded, repeats: int = 0) -> dict[str, str]:
        return {s.key: s.label for s in self.specs}

    def describe(self) -> list[str]:
        seeds = len(self.space.seeds)
        lines = [
            f"{self.total} trials ({self.total // seeds} configurations x {seeds} seeds); "
            f"{len(self.skipped)} skipped"
        ]
        lines += [f"skipped {s.arm}: {s.reason}" for s in self.skipped]
        return lines + [f"partition {a}: {partition_label(b)}" for a, b in self.blocks.items()]

    def models(self) -> list[Any]:
        return [s.config.model for s in self.specs]


@dataclass(frozen=True)
class SearchCampaign(Campaign):
    """``space.trials`` points proposed by an Optuna searcher warm-started from the record (a
    settled trial counts against the trials, an interrupted one is proposed again), every one
    with the space's first seed. ASHA by default for a single objective (a multi-objective
    search's front wants the small, cheap models ASHA would cut)."""

    asha_by_default: ClassVar[bool] = True
    has_study: ClassVar[bool] = True

    @classmethod
    def of(cls, space: Space, base: RunConfig) -> SearchCampaign:
        return cls(space, base)

    @property
    def total(self) -> int:
        return self.space.trials

    def left(self, recorded: Recorded) -> int:
        from nas.searcher import remaining

        return remaining(self.space, recorded)

    def tune_trials(
        self, recorded: Recorded, study_storage: str | None, study_name: str
    ) -> TuneTrials:
        from nas.searcher import searcher

        alg = searcher(self.space, recorded, self.worst(), self.seed, study_storage, study_name)
        return TuneTrials({}, num_samples=self.left(recorded), search_alg=alg)

    def spec_for(self, config: Mapping[str, Any]) -> TrialSpec:
        return search_spec(self.base, self.space, config, self.seed)

    def worst(self) -> dict[str, float]:
        return {o.key: math.inf if o.mode == "min" else -math.inf for o in self.space.objectives}

    def planned(self, recorded: Recorded, repeats: int = 0) -> dict[str, str]:
        """Every recorded trial (a search's plan is what it proposed), then one "proposal N"
        per proposal not made yet (the time budget ran out): what is left, less this
        invocation's repeats and the trials to run again (listed already, as recorded)."""
        from nas.searcher import RERUN

        out = {k: trial_label(t.arm, t.seed) for k, t in recorded.items()}
        rerun = sum(t.status in RERUN for t in recorded.values())
        missing = self.left(recorded) - repeats - rerun
        return out | {f"proposal {i + 1}": f"proposal {i + 1}" for i in range(max(0, missing))}

    def describe(self) -> list[str]:
        return [f"{self.space.trials} trials, sampler {self.space.sampler}"]

    def models(self) -> list[Any]:
        return search_models(self.space, self.base)


CAMPAIGNS: dict[Kind, type[Campaign]] = {"grid": GridCampaign, "search": SearchCampaign}


def campaign_of(space: Space, base: RunConfig) -> Campaign:
    """The campaign of ``space`` (its ``kind`` picks the type) over ``base``."""
    return CAMPAIGNS[space.kind].of(space, base)
