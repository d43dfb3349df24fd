"""``nas spaces``: list the built-in search spaces, or show one (built-in or a YAML file)."""

from __future__ import annotations

import argparse
from typing import Any


def add_spaces_parser(sub: Any) -> None:
    p = sub.add_parser(
        "spaces",
        help="list the built-in search spaces, or show one",
        description="Without a name: every built-in space in one line. With a name or a YAML "
        "file: its arms, parameters, seeds, the number of valid and skipped cells, and the "
        "AttnRes blocks (sublayers per block) of each AttnRes configuration.",
    )
    p.add_argument("space", nargs="?", help="a built-in space name or a space YAML file")
    p.set_defaults(run=run_spaces)


def run_spaces(args: argparse.Namespace) -> int:
    from search_spaces import BUILTIN, get_space

    if not args.space:
        width = max(map(len, BUILTIN))
        for name, space in BUILTIN.items():
            print(f"{name:<{width}}  {space.description}")
        return 0
    _show(get_space(args.space))
    return 0


def _show(space: Any) -> None:
    from nas.campaign import campaign_of
    from trainers.settings import under_settings

    print(f"{space.name} ({space.kind}): {space.description}")
    for name, overrides in space.arms.items():
        print(f"  arm {name}: {overrides}")
    for key, dist in space.params.items():
        print(f"  param {key}: {dist.to_data()}")
    print(f"  seeds: {list(space.seeds)}")
    _, base, _ = under_settings(space.base, ())
    campaign = campaign_of(space, base)
    for line in [*campaign.describe(), *campaign.notes]:
        print(f"  {line}")
