"""``nas spaces``: list the built-in search spaces, or show one (built-in or a YAML file)."""

from __future__ import annotations

import argparse
from typing import Any


def add_spaces_parser(sub: Any) -> None:
    p = sub.add_parser(
        "spaces",
        help="list the built-in search spaces, or show one",
        description="Without a name: every built-in space in one line. With a name or a YAML "
        "file: its arms, parameters, seeds, the number of valid and skipped cells, the "
        "AttnRes blocks (N, and the sublayers in each) of each AttnRes configuration, and "
        "each cell's memory plan per device (trainers/measure/memory_plan.py; 'auto' precision "
        "as on "
        "a GPU).",
    )
    p.add_argument("space", nargs="?", help="a built-in space name or a space YAML file")
    p.add_argument(
        "--device-memory",
        metavar="SIZE",
        help="memory of one device, e.g. 80GiB, 24GB, 512MiB or bytes: also say whether each "
        "cell fits it, and the cheapest --set that would where it does not",
    )
    p.set_defaults(run=run_spaces)


def run_spaces(args: argparse.Namespace) -> int:
    from nas.memory_check import parse_size
    from search_spaces import BUILTIN, get_space

    device = None if args.device_memory is None else parse_size(args.device_memory)
    if not args.space:
        width = max(map(len, BUILTIN))
        for name, space in BUILTIN.items():
            print(f"{name:<{width}}  {space.description}")
        return 0
    _show(get_space(args.space), device)
    return 0


def _show(space: Any, device: int | None) -> None:
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
    _memory(campaign, base, device)


def _memory(campaign: Any, base: Any, device: int | None) -> None:
    """Each cell's (arm's) memory plan on one device, and with ``device`` whether it fits;
    a search's base configuration stands for its sampled ones."""
    from nas.memory_check import Target, cells, plan_line, verdict
    from trainers.measure.memory_plan import memory_plan

    print("  memory per device (1 worker; 'auto' precision as on a GPU):")
    for arm, cfg in cells(campaign.specs, base).items():
        line = f"    {arm}: {plan_line(memory_plan(cfg))}"
        if device is not None:
            line += f"; {verdict(cfg, Target(device_bytes=device, gpu=True))}"
        print(line)
