"""A trial's identity, made once in the driver: ``TrialSpec``. Nothing downstream rebuilds a trial
from a list index or re-derives its label; Tune carries only the key.

The key is a content hash of the arm label, the point and the seed, so the same cell has the same
key in every invocation and in any order: adding seeds or arms to a sweep adds keys and leaves the
existing ones alone, which is what lets a later invocation extend a sweep instead of remapping it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from search_spaces.space import Cell, Space, apply_point, arm_label
from trainers.config import RunConfig

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
    ``config``."""

    key: str
    arm: str
    point: Mapping[str, Any]
    seed: int
    config: RunConfig

    @property
    def label(self) -> str:
        return trial_label(self.arm, self.seed)


def grid_specs(cells: list[Cell]) -> list[TrialSpec]:
    """Every grid cell as a spec (``grid_cells`` already resolved and validated each)."""
    return [
        TrialSpec(trial_key(c.arm, c.point, c.seed), c.arm, dict(c.point), c.seed, c.config)
        for c in cells
    ]


def search_spec(base: RunConfig, space: Space, point: Mapping[str, Any], seed: int) -> TrialSpec:
    """A sampled point as a spec; raises ValueError when the configuration rejects it (an
    infeasible proposal)."""
    point = {k: v for k, v in point.items() if k != SEED_KEY}
    arm = arm_label("", point, space)
    config = apply_point(base, {**point, SEED_KEY: seed})
    return TrialSpec(trial_key(arm, point, seed), arm, point, seed, config)


def proposal_identity(space: Space, point: Mapping[str, Any], seed: int) -> tuple[str, str]:
    """(key, arm label) of a proposal the configuration rejected (it has no config to carry)."""
    point = {k: v for k, v in point.items() if k != SEED_KEY}
    arm = arm_label("", point, space)
    return trial_key(arm, point, seed), arm
