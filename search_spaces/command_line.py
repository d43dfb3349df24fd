"""A space under a command line's settings (``nas sweep --set``, ``--max-steps``): the space with
its base overridden, and the base configuration every trial starts from."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from search_spaces.space import Space, nest
from trainers.budget import LENGTH_FIELDS, REFERENCE_STEPS, check_one_length
from trainers.config import RunConfig
from trainers.config_io import from_dict, parse_overrides


def under_command_line(
    space: Space, overrides: Sequence[str], max_steps: int | None = None
) -> tuple[Space, RunConfig, dict[str, Any]]:
    """(the space with the settings in its base, the base configuration, the settings by
    dotted key). ValueError, one line, for a setting that is not a field or not a valid value,
    and for two run lengths at once."""
    extra = parse_overrides(overrides)
    if max_steps:
        extra.setdefault("train", {})["max_steps"] = max_steps
    check_one_length(extra)
    # A grid cell's point carries the space's base and is applied over ``base`` again, so a
    # --set of a key the space's base sets must replace it there too, or it is silently lost.
    flat = {
        f"{section}.{name}": v for section, fields in extra.items() for name, v in fields.items()
    }
    space_base = command_line_length(space.base, flat)
    space = replace(
        space, base={**space_base, **{k: v for k, v in flat.items() if k in space_base}}
    )
    return space, from_dict(extra, from_dict(nest(space.base))), flat


def command_line_length(space_base: Mapping[str, Any], flat: Mapping[str, Any]) -> dict[str, Any]:
    """The space's base under a run length given on the command line (``--max-steps``, or a
    ``--set`` of train.max_steps, train.target_flops or train.tokens_per_param): it replaces
    the space's own, so the two never meet in one configuration. When a budget replaces the
    space's max_steps, the space's warm-up and validation interval are rescaled to the 600-step
    schedule a budget scales from (``trainers.budget``), so they keep their fraction of the run."""
    keys = [f"train.{n}" for n in LENGTH_FIELDS]
    given = [k for k in keys if flat.get(k)]
    if not given:
        return dict(space_base)
    # A given length the space's base holds stays there, to be replaced: a trial's key hashes
    # its point, which holds the space's base, so --max-steps keeps the keys it always made.
    out = {k: v for k, v in space_base.items() if k not in keys or k in given}
    steps = space_base.get("train.max_steps")
    if steps and not flat.get("train.max_steps"):
        for key in ("train.warmup_steps", "train.val_every"):
            if key in out:
                out[key] = max(1 if out[key] else 0, round(out[key] * REFERENCE_STEPS / steps))
    return out
