"""``nas sweep --seeds auto``: a grid in two stages. The pilot (the space's seeds) runs first;
once the record settles it, ``given`` pairs each arm with its baseline seed by seed, sizes every
comparison from the sd of its paired differences (``search_spaces.seed_choice``: variance only,
never the Δ) and plans the extra seeds the largest need asks for, through the grid's extend path
(only new cells run). A later invocation makes the same choice from the same pilot."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from nas.campaign.kinds import GridCampaign, Recorded, settled_loss
from nas.spec import TrialSpec
from record.schema import SEEDS_FILE, Tag
from search_spaces.seed_choice import SeedChoice, SeedRule, choose, lines
from search_spaces.space import Space
from trainers import catalogue
from trainers.config import ModelConfig, RunConfig

WIRING_KEYS = frozenset(catalogue.wiring_keys())


@dataclass(frozen=True)
class AutoSeedsCampaign(GridCampaign):
    """The pilot's cells first; the extra seeds once its choice is made (``choice``)."""

    rule: SeedRule | None = None
    pilot: tuple[TrialSpec, ...] = ()
    choice: SeedChoice | None = None

    state_file: ClassVar[str] = SEEDS_FILE

    @classmethod
    def sized(cls, space: Space, base: RunConfig, rule: SeedRule) -> AutoSeedsCampaign:
        """The pilot's campaign; ValueError for a pilot the rule cannot size from."""
        if space.kind != "grid" or space.tune is not None:
            what = "a search" if space.kind != "grid" else "a grid with a learning-rate stage"
            raise ValueError(f"--seeds auto: {space.name!r} is {what}; it sizes a plain grid")
        rule.check_pilot(space.seeds)
        grid = GridCampaign.of(space, base)
        return cls(space, base, grid.specs, grid.skipped, grid.notes, grid.blocks, rule, grid.specs)

    @property
    def _rule(self) -> SeedRule:
        assert self.rule is not None
        return self.rule

    def given(self, recorded: Recorded) -> AutoSeedsCampaign:
        if self.choice is not None:
            return self
        losses = _pilot_losses(self.pilot, recorded)
        if losses is None:
            return self
        choice = choose(_differences(self.pilot, losses), self._rule, len(self.space.seeds))
        seeds = _extended(self.space.seeds, choice.seeds)
        grid = GridCampaign.of(replace(self.space, seeds=seeds), self.base)
        return replace(self, specs=grid.specs, choice=choice)

    def _inputs(self) -> dict[str, Any]:
        r = self._rule
        pilot = list(self.space.seeds)
        return {"pilot_seeds": pilot, "effect": r.effect, "max_seeds": r.cap, "power": r.power}

    def state(self) -> dict[str, Any]:
        return self._inputs() | ({} if self.choice is None else self.choice.data())

    def state_tags(self) -> dict[str, str]:
        return {} if self.choice is None else {Tag.SEEDS_AUTO: str(self.choice.seeds)}

    def decisions(self) -> list[str]:
        return [] if self.choice is None else lines(self.choice)

    def refuses(self, state: Mapping[str, Any]) -> str:
        old = {k: state.get(k) for k in self._inputs()}
        if not state or old == self._inputs():
            return ""
        return (
            f"--seeds auto was sized from other inputs ({old} -> {self._inputs()}): its choice "
            "would mean another plan"
        )

    def describe(self) -> list[str]:
        r = self._rule
        head = (
            f"--seeds auto: a pilot of {len(self.pilot)} trials, then up to {r.cap} seeds per "
            f"configuration to detect {r.effect:g} nats at {r.power:.0%} power"
        )
        return [head, *super().describe()]


def _pilot_losses(pilot: tuple[TrialSpec, ...], recorded: Recorded) -> dict[str, float] | None:
    """Each pilot trial's final validation loss (``settled_loss``: inf where it did not
    finish); None until the record settles every one."""
    out = {}
    for spec in pilot:
        loss = settled_loss(spec, recorded)
        if loss is None:
            return None
        out[spec.key] = loss
    return out


def is_baseline(model: ModelConfig) -> bool:
    """The arm others are compared with in their context (``catalogue.BASELINE``, which the
    report applies to the record too)."""
    return catalogue.is_baseline(lambda key: getattr(model, key.removeprefix("model.")))


def _context(spec: TrialSpec) -> tuple[tuple[str, str], ...]:
    """What an arm is compared with its baseline within: its point less the wiring's fields."""
    return tuple(sorted((k, repr(v)) for k, v in spec.point.items() if k not in WIRING_KEYS))


def _differences(
    pilot: tuple[TrialSpec, ...], losses: Mapping[str, float]
) -> dict[str, tuple[str, list[float]]]:
    """Each arm with a baseline in its context: (the baseline, arm minus baseline per seed both
    ran)."""
    base = {(_context(s), s.seed): s for s in pilot if is_baseline(s.config.model)}
    out: dict[str, tuple[str, list[float]]] = {}
    for spec in pilot:
        other = base.get((_context(spec), spec.seed))
        if other is None or other.arm == spec.arm:
            continue
        entry = out.setdefault(spec.arm, (other.arm, []))
        entry[1].append(losses[spec.key] - losses[other.key])
    return out


def _extended(pilot: tuple[int, ...], seeds: int) -> tuple[int, ...]:
    """The pilot's seeds, then the next integers after its largest up to ``seeds`` in all."""
    start = max(pilot) + 1
    return (*pilot, *range(start, start + seeds - len(pilot)))
