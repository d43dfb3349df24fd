"""A base configuration under a command line's settings (``nas sweep --set``, ``--max-steps``):
the one step that turns a space's flat base and the typed settings into the base every trial
starts from, torch-free."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from trainers.budget import check_one_length, under_length
from trainers.config import RunConfig
from trainers.config_io import from_dict, nest, parse_overrides
from trainers.corpus.vocab import vocab_from_data


def under_settings(
    base: Mapping[str, Any], overrides: Sequence[str], max_steps: int | None = None
) -> tuple[dict[str, Any], RunConfig, dict[str, Any]]:
    """(``base`` with the settings in it, dotted keys; the base configuration; the settings by
    dotted key). ValueError, one line, for a setting that is not a field or not a valid value,
    and for two run lengths at once."""
    extra = parse_overrides(overrides)
    if max_steps:
        extra.setdefault("train", {})["max_steps"] = max_steps
    check_one_length(extra)
    flat = {
        f"{section}.{name}": v for section, fields in extra.items() for name, v in fields.items()
    }
    # A grid cell's point carries the base and is applied over the base configuration again,
    # so a setting of a key the base holds must replace it there too, or it is silently lost.
    lengthened = under_length(base, flat)
    new_base = {**lengthened, **{k: v for k, v in flat.items() if k in lengthened}}
    config = from_dict(extra, from_dict(nest(new_base)))
    return new_base, vocab_from_data(config, {*new_base, *flat}), flat
