"""A sweep's campaign: a **grid** (every valid cell of the space, known before anything runs), a
**tuned grid** (a grid whose arms each train a learning-rate stage first, then their seeds at the
best value) or a **search** (``trials`` points proposed one by one by an Optuna searcher). They
are the only places that know which a sweep is; the plan, the Tune set-up, the trials, the live view and the
summary ask the campaign they hold, through the contract of ``Campaign``.

Made once, where the plan is built (``nas.sweep.plan.plan``), by ``campaign_of``; plain data, so
it pickles to Tune's workers inside the trials' context.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar

from nas.spec import (
    SEED_KEY,
    TrialSpec,
    grid_specs,
    search_models,
    search_spec,
    trial_key,
    trial_label,
)
from record.schema import (
    COMPARABLE,
    GRID_PARAM,
    LR_STAGE_FILE,
    SETTLED,
    STAGE_POINT_KEY,
    Metric,
    Tag,
)
from search_spaces.lr_stage import Choice, LrStage, choose
from search_spaces.space import (
    Cell,
    Kind,
    Skipped,
    Space,
    apply_point,
    collapsed,
    grid_cells,
    partitions,
)
from trainers.config import RunConfig, partition_label
from trainers.identity import unread_fields

if TYPE_CHECKING:
    from nas.store.tracking import RecordedTrial

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
    # The parent run's artifact that keeps what ``state()`` says
    state_file: ClassVar[str] = LR_STAGE_FILE

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

    def given(self, recorded: Recorded) -> Campaign:
        """The campaign once the record holds ``recorded``: a staged campaign plans the trials
        of a later stage from the settled trials of an earlier one. The campaign itself (the
        same object) when that plans nothing new: the sweep runs another Tune experiment only
        for a campaign that changed."""
        return self

    def state(self) -> dict[str, Any]:
        """What the campaign decided as it ran, kept on the parent run (``state_file``);
        empty where it decides nothing."""
        return {}

    def state_tags(self) -> dict[str, str]:
        """The same decisions as parent-run tags, one per arm; empty where it decides nothing."""
        return {}

    def decisions(self) -> list[str]:
        """What the campaign decided as it ran, one line each, for the console; none where it
        decides nothing."""
        return []

    def refuses(self, state: Mapping[str, Any]) -> str:
        """Why the state an earlier invocation recorded (``state()``'s, or empty) means another
        plan than this one; "" when this campaign can continue it."""
        return ""


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
        from nas.campaign.searcher import remaining

        return remaining(self.space, recorded)

    def tune_trials(
        self, recorded: Recorded, study_storage: str | None, study_name: str
    ) -> TuneTrials:
        from nas.campaign.searcher import searcher

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
        from nas.campaign.searcher import RERUN

        out = {k: trial_label(t.arm, t.seed) for k, t in recorded.items()}
        rerun = sum(t.status in RERUN for t in recorded.values())
        missing = self.left(recorded) - repeats - rerun
        return out | {f"proposal {i + 1}": f"proposal {i + 1}" for i in range(max(0, missing))}

    def describe(self) -> list[str]:
        return [f"{self.space.trials} trials, sampler {self.space.sampler}"]

    def models(self) -> list[Any]:
        return search_models(self.space, self.base)


@dataclass(frozen=True)
class TunedGridCampaign(GridCampaign):
    """A grid whose arms each train a learning-rate stage first (``space.tune``: its values x
    its seeds, per arm and context), then the space's seeds at the value with the lowest mean
    final validation loss (``search_spaces.lr_stage.choose``). The stage's trials are ordinary
    trials: their point carries the value and ``STAGE_POINT_KEY``, so each has a key of its own
    and is settled, resumed and refused as any. The stage is known before anything runs; an
    arm's seeds are planned once the record settles its stage (``given``): a first invocation
    runs two Tune experiments, a later one plans both from the record and re-runs no stage."""

    cells: tuple[Cell, ...] = ()  # the final stage's cells, before a learning rate is chosen
    stage_specs: tuple[TrialSpec, ...] = ()
    # arm label -> its choice, or None where every value of its settled stage diverged
    choices: Mapping[str, Choice | None] = field(default_factory=dict)

    @classmethod
    def of(cls, space: Space, base: RunConfig) -> TunedGridCampaign:
        assert space.tune is not None
        cells, skipped = grid_cells(space, base)
        _check_read(space.tune, cells)
        stage = tuple(_stage_specs(space.tune, cells))
        notes = tuple(collapsed(cells))
        return cls(
            space, base, stage, tuple(skipped), notes, partitions(cells), tuple(cells), stage
        )

    @property
    def stage(self) -> LrStage:
        assert self.space.tune is not None
        return self.space.tune

    @property
    def total(self) -> int:
        return len(self.stage_specs) + len(self.cells)

    def _waiting(self) -> list[Cell]:
        """The final-stage cells of the arms whose stage is not settled yet."""
        return [c for c in self.cells if c.arm not in self.choices]

    def left(self, recorded: Recorded) -> int:
        return len(self.todo(recorded)) + len(self._waiting())

    def planned(self, recorded: Recorded, repeats: int = 0) -> dict[str, str]:
        """Every planned trial, and each final-stage trial whose learning rate is still to be
        chosen (under a placeholder key: the record holds none of it yet)."""
        waiting = {f"({c.arm} seed {c.seed})": trial_label(c.arm, c.seed) for c in self._waiting()}
        return super().planned(recorded) | waiting

    def given(self, recorded: Recorded) -> Campaign:
        new = {
            arm: choose(losses)
            for arm, losses in _stage_losses(self.stage.param, self.stage_specs, recorded).items()
            if arm not in self.choices
        }
        if not new:
            return self
        choices = {**self.choices, **new}
        finals = _final_specs(self.stage, self.cells, choices)
        return replace(self, specs=(*self.stage_specs, *finals), choices=choices)

    def state(self) -> dict[str, Any]:
        arms: dict[str, Any] = {}
        for spec in self.stage_specs:
            arm = _arm_of(spec)
            entry = arms.setdefault(arm, {"keys": {}, **_choice_data(self.choices.get(arm))})
            entry["keys"].setdefault(repr(spec.point[self.stage.param]), []).append(spec.key)
        stage = self.stage
        return {"param": stage.param, "values": list(stage.values()), "seeds": stage.seeds} | {
            "arms": arms
        }

    def state_tags(self) -> dict[str, str]:
        return {
            Tag.CHOSEN_PREFIX + _tag_safe(arm): repr(c.best)
            for arm, c in self.choices.items()
            if c is not None
        }

    def decisions(self) -> list[str]:
        lines = []
        for arm, choice in self.choices.items():
            if choice is None:
                lines.append(
                    f"{arm}: no {self.stage.name} of the stage finished; its seeds do not run"
                )
                continue
            doubts = "".join(f"; {w}" for w in choice.warnings)
            lines.append(f"{arm}: {self.stage.param} {choice.best!r} chosen{doubts}")
        return lines

    def refuses(self, state: Mapping[str, Any]) -> str:
        if not state:
            return ""
        old = (state.get("param"), list(state.get("values", [])), state.get("seeds"))
        new = (self.stage.param, list(self.stage.values()), self.stage.seeds)
        if old == new:
            return ""
        return (
            f"the learning-rate stage differs ({old[0]} at {old[1]} x {old[2]} seeds -> "
            f"{new[0]} at {new[1]} x {new[2]} seeds): its choices would mean another plan"
        )

    def describe(self) -> list[str]:
        stage = self.stage
        values = ", ".join(f"{v:g}" for v in stage.values())
        head = (
            f"{self.total} trials: a learning-rate stage of {len(self.stage_specs)} trials "
            f"({stage.param} at {values} x {_seeds(stage.seeds)} per arm), then "
            f"{len(self.cells)} at each arm's best value ({_seeds(len(self.space.seeds))} per "
            "arm); "
            f"{len(self.skipped)} skipped"
        )
        lines = [head] + [f"skipped {s.arm}: {s.reason}" for s in self.skipped]
        return lines + [f"partition {a}: {partition_label(b)}" for a, b in self.blocks.items()]

    def models(self) -> list[Any]:
        return [c.config.model for c in self.cells]


def _seeds(n: int) -> str:
    return f"{n} seed{'' if n == 1 else 's'}"


def _check_read(stage: LrStage, cells: list[Cell]) -> None:
    """A stage of a model field every arm's model reads (a train field every trial reads)."""
    section, _, name = stage.param.partition(".")
    for cell in cells:
        if section == "model" and name in unread_fields(cell.config.model):
            raise ValueError(
                f"tune.{stage.param}: the configuration of arm {cell.arm!r} does not read it; "
                "a stage tunes a field every arm's trial reads (train.lr)"
            )


def _stage_specs(stage: LrStage, cells: list[Cell]) -> list[TrialSpec]:
    """Each arm's stage: its values x the stage's seeds, arm labels naming the value."""
    arms = {c.arm: c for c in cells}  # one cell per arm: the stage sets its seed and value
    out = []
    for cell in arms.values():
        for value in stage.values():
            arm = f"{cell.arm}/{stage.name}={value!r}"
            point = {**cell.point, stage.param: value, STAGE_POINT_KEY: "lr"}
            for seed in stage.seed_list():
                config = apply_point(cell.config, {stage.param: value, SEED_KEY: seed})
                out.append(TrialSpec(trial_key(arm, point, seed), arm, point, seed, config))
    return out


def _arm_of(spec: TrialSpec) -> str:
    """The arm a stage trial tunes: its label without the value it names."""
    return spec.arm.rpartition("/")[0]


def settled_loss(spec: TrialSpec, recorded: Recorded) -> float | None:
    """A trial's final validation loss as a stage compares it: inf where it did not finish
    (diverged, timed out); None while the record has not settled it."""
    trial = recorded.get(spec.key)
    if trial is None or trial.status not in SETTLED:
        return None
    if trial.status not in COMPARABLE:
        return math.inf
    return float(trial.metrics.get(Metric.FINAL_VAL_LOSS, math.inf))


def _stage_losses(
    param: str, specs: tuple[TrialSpec, ...], recorded: Recorded
) -> dict[str, dict[float, list[float]]]:
    """Each arm whose stage the record has settled: value -> each seed's final validation loss
    (``settled_loss``). Arms with a trial unsettled are left out."""
    out: dict[str, dict[float, list[float]]] = {}
    unsettled = set()
    for spec in specs:
        arm, loss = _arm_of(spec), settled_loss(spec, recorded)
        if loss is None:
            unsettled.add(arm)
            continue
        out.setdefault(arm, {}).setdefault(spec.point[param], []).append(loss)
    return {arm: losses for arm, losses in out.items() if arm not in unsettled}


def _final_specs(
    stage: LrStage, cells: tuple[Cell, ...], choices: Mapping[str, Choice | None]
) -> list[TrialSpec]:
    """The space's seeds of every arm with a choice, at its best value."""
    out = []
    for cell in cells:
        choice = choices.get(cell.arm)
        if choice is None:
            continue
        point = {**cell.point, stage.param: choice.best}
        config = apply_point(cell.config, {stage.param: choice.best})
        out.append(
            TrialSpec(trial_key(cell.arm, point, cell.seed), cell.arm, point, cell.seed, config)
        )
    return out


def _choice_data(choice: Choice | None) -> dict[str, Any]:
    if choice is None:
        return {"chosen": None, "curve": {}, "warnings": []}
    curve = {repr(v): (m if math.isfinite(m) else None) for v, m in choice.curve.items()}
    return {"chosen": choice.best, "curve": curve, "warnings": list(choice.warnings)}


def _tag_safe(label: str) -> str:
    """An arm label as MLflow takes it in a tag name (letters, digits, _ - . / space :)."""
    return "".join(ch if ch.isalnum() or ch in "_-./ :" else "_" for ch in label)


CAMPAIGNS: dict[Kind, type[Campaign]] = {"grid": GridCampaign, "search": SearchCampaign}


def campaign_of(space: Space, base: RunConfig) -> Campaign:
    """The campaign of ``space`` (its ``kind`` picks the type; a grid with a learning-rate
    stage is a tuned grid) over ``base``."""
    if space.tune is not None:
        return TunedGridCampaign.of(space, base)
    return CAMPAIGNS[space.kind].of(space, base)
