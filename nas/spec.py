"""A trial's identity, made once in the driver: ``TrialSpec``. Nothing downstream rebuilds a trial
from a list index or re-derives its label; Tune carries only the key.

The key is a content hash of the arm label, the point and the seed, so the same cell has the same
key in every invocation and in any order: adding seeds or arms to a sweep adds keys and leaves the
existing ones alone, which is what lets a later invocation extend a sweep instead of remapping it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from search_spaces.distributions import Choice, Fixed
from search_spaces.space import Cell, Space, apply_point, arm_label
from trainers.config import ModelConfig, RunConfig, to_dict
from trainers.identity import READERS, applies_to, unread_fields

SEED_KEY = "train.seed"


def trial_key(arm: str, point: Mapping[str, Any], seed: int) -> str:
    """A stable 16-hex-digit hash of what makes a trial: its arm, its point (seed excluded) and
    its seed. JSON with sorted keys, so dict order and the invocation do not matter."""
    content = {"arm": arm, "point": {k: v for k, v in point.items() if k != SEED_KEY}}
    text = json.dumps({**content, "seed": int(seed)}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def trial_label(arm: str, seed: int) -> str:
    """The one human-readable name of a trial (the live view, the summary): arm and seed."""
    return f"{arm} seed {seed}"


@dataclass(frozen=True)
class TrialSpec:
    """One trial: ``key`` (its identity), ``arm`` (the label of its configuration without the
    seed), ``point`` (dotted keys applied to the base, seed excluded), ``seed`` and the resolved
    ``config``. ``aliases``: the keys its grid cells had before a field their configuration
    does not read took its default (``Cell.stands_for``); empty where the key is unchanged."""

    key: str
    arm: str
    point: Mapping[str, Any]
    seed: int
    config: RunConfig
    aliases: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return trial_label(self.arm, self.seed)


def grid_specs(cells: list[Cell]) -> list[TrialSpec]:
    """Every grid cell as a spec (``grid_cells`` already resolved and validated each)."""
    return [
        TrialSpec(
            trial_key(c.arm, c.point, c.seed),
            c.arm,
            dict(c.point),
            c.seed,
            c.config,
            tuple(trial_key(arm, point, c.seed) for arm, point in c.stands_for),
        )
        for c in cells
    ]


def search_spec(base: RunConfig, space: Space, point: Mapping[str, Any], seed: int) -> TrialSpec:
    """A sampled point as a spec; raises ValueError when the configuration rejects it (an
    infeasible proposal). Sampled fields the configuration does not read take their default;
    those its sampled values decide leave the point, so such proposals share one key."""
    point = _proposal_point(point)
    arm = arm_label("", point, space)
    config = apply_point(base, {**point, SEED_KEY: seed})
    return TrialSpec(trial_key(arm, point, seed), arm, point, seed, config)


def _proposal_point(point: Mapping[str, Any]) -> dict[str, Any]:
    """A proposal's point, seed excluded, without each sampled model field that the sampled
    values alone show unread (the residual sampled as 'standard' drops a sampled hc_streams).
    Decided from the point only, so ``proposal_identity`` (which has no base) gives the same
    key; a field that only the base leaves unread keeps its value in the key (its
    configuration still takes the default): two keys for one model at worst, never one key
    for two."""
    point = {k: v for k, v in point.items() if k != SEED_KEY}
    sampled = {k.removeprefix("model."): v for k, v in point.items() if k.startswith("model.")}
    decided = {
        f"model.{name}"
        for name, reader in READERS.items()
        if all(k in sampled for k in reader.selectors) and not reader.reads(sampled)
    }
    return {k: v for k, v in point.items() if k not in decided}


def proposal_identity(space: Space, point: Mapping[str, Any], seed: int) -> tuple[str, str]:
    """(key, arm label) of a proposal, also one the configuration rejected (it has no config
    to carry): the key ``search_spec`` gives it."""
    point = _proposal_point(point)
    arm = arm_label("", point, space)
    return trial_key(arm, point, seed), arm


def search_models(space: Space, base: RunConfig) -> list[dict[str, Any]]:
    """A search's model sections as far as what they read: the base under each combination of
    the sampled choices of a field that decides it (a range decides none)."""
    selectors = {f"model.{k}" for reader in READERS.values() for k in reader.selectors}
    choices = {
        k.removeprefix("model."): d.grid()
        for k, d in space.params.items()
        if k in selectors and isinstance(d, Choice | Fixed)
    }
    values = to_dict(base)["model"]
    return [
        {**values, **dict(zip(choices, combo, strict=True))}
        for combo in itertools.product(*choices.values())
    ]


def check_read(space: str, models: Sequence[Any], settings: Mapping[str, Any]) -> None:
    """Refuse a ``--set`` of a model field, away from its default, that none of the sweep's
    ``models`` (its campaign's) reads: the rule ``nas train`` applies to its one configuration
    (a field that only some configurations read takes its default in the others)."""
    defaults = {f.name: f.default for f in dataclasses.fields(ModelConfig)}
    for key, value in settings.items():
        name = key.removeprefix("model.")
        if name not in READERS or not key.startswith("model.") or value == defaults[name]:
            continue
        if all(name in unread_fields(m) for m in models):
            raise ValueError(
                f"{applies_to(name, value)}; no configuration of space "
                f"{space!r} reads it (leave it at {defaults[name]!r})"
            )
