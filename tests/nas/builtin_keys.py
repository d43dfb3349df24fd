"""Every built-in space's trial keys, computed as the sweep driver computes them: the data behind
``test_identity``'s check that no built-in space's keys change.

``data/builtin_keys.json`` and ``data/old_records.json`` (what a record of a few built-in sweeps
holds: each trial's key, arm, seed and flattened params, as MLflow's strings, stored as the
differences from the sweep's base) were written by this module's ``main`` on the commit before
fields a configuration does not read took their default (``python -m tests.nas.builtin_keys``);
rewrite them only for a change that means to remap recorded sweeps.
"""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nas.spec import grid_specs, proposal_identity, search_spec
from search_spaces import BUILTIN, Space
from search_spaces.distributions import Choice, FloatRange, IntRange
from search_spaces.space import grid_cells
from trainers.config import flatten
from trainers.config_io import from_dict, nest

DATA = Path(__file__).parent / "data" / "builtin_keys.json"
OLD_RECORDS = Path(__file__).parent / "data" / "old_records.json"
RECORDED_SPACES = ("smoke", "quick", "attnres_ablation")


def _search_points(space: Space) -> list[dict[str, Any]]:
    """Every combination of a search space's choices, each range at its low end, in the
    space's parameter order (the order a proposal's label is written in)."""
    options = [
        d.values
        if isinstance(d, Choice)
        else (d.low,)
        if isinstance(d, IntRange | FloatRange)
        else d.grid()
        for d in space.params.values()
    ]
    return [dict(zip(space.params, values, strict=True)) for values in itertools.product(*options)]


def _search_keys(space: Space, base: Any) -> dict[str, str]:
    keys = {}
    for point in _search_points(space):
        try:
            spec = search_spec(base, space, point, 0)
            keys[spec.key] = spec.label
        except ValueError:
            key, arm = proposal_identity(space, point, 0)
            keys[key] = f"{arm} seed 0 (infeasible)"
    return keys


def builtin_keys() -> dict[str, dict[str, Any]]:
    """space -> {"keys": {trial key: trial label}, "skipped": [arm labels]} for every built-in
    space, over the base the sweep plan builds from the space's own base."""
    out: dict[str, dict[str, Any]] = {}
    for name, space in BUILTIN.items():
        base = from_dict(nest(space.base))
        if space.kind == "search":
            out[name] = {"keys": _search_keys(space, base), "skipped": []}
            continue
        cells, skipped = grid_cells(space, base)
        keys = {s.key: s.label for s in grid_specs(cells)}
        out[name] = {"keys": keys, "skipped": sorted(s.arm for s in skipped)}
    return out


def old_records() -> dict[str, dict[str, Any]]:
    """space -> {"base": flattened base, "trials": {key: {arm, seed, params}}}: what a sweep of
    each of ``RECORDED_SPACES`` recorded, each trial's params as its differences from the base
    (``recorded_params`` puts them back)."""
    out: dict[str, dict[str, Any]] = {}
    for name in RECORDED_SPACES:
        space = BUILTIN[name]
        base = from_dict(nest(space.base))
        flat = {k: str(v) for k, v in flatten(base).items()}
        trials = {}
        for spec in grid_specs(grid_cells(space, base)[0]):
            params = {k: str(v) for k, v in flatten(spec.config).items()}
            diff = {k: v for k, v in params.items() if flat.get(k) != v}
            trials[spec.key] = {"arm": spec.arm, "seed": spec.seed, "params": diff}
        out[name] = {"base": flat, "trials": trials}
    return out


def recorded_params(space: Mapping[str, Any], key: str) -> dict[str, str]:
    """One recorded trial's flattened params, as MLflow holds them."""
    return {**space["base"], **space["trials"][key]["params"]}


def changed_keys(pinned: Mapping[str, Any], now: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """Per space, the pinned keys that ``now`` (``builtin_keys()``) no longer plans under their
    pinned label; spaces with none are left out. Keys ``now`` adds are not changes."""
    out = {}
    for space, found in pinned.items():
        planned = now.get(space, {}).get("keys", {})
        moved = {k: label for k, label in found["keys"].items() if planned.get(k) != label}
        if moved:
            out[space] = moved
    return out


def main() -> None:
    DATA.write_text(json.dumps(builtin_keys(), indent=1, sort_keys=True) + "\n")
    OLD_RECORDS.write_text(json.dumps(old_records(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {DATA}", file=sys.stderr)


if __name__ == "__main__":
    main()
