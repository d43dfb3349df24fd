"""How ``recorded_table4_margins.json`` was made: Table 4's static-query and raw-input-query arms
at CPU size (``attnres_ablation``'s space, ``--max-steps 300``, seeds 0 to 2, as
``docs/results/attnres_ablation`` ran them), trained again with the per-token routing statistics
of issue 50 (runner-up margin, collapsed share) in every profile. The first fixture,
``recorded_routing.json``, holds these arms' profiles as their sweep recorded them, before the
margin was measured; its averages could not settle two static-query (profile, site) pairs.

    PYTHONPATH=. .venv/bin/python -m tests.trainers.data.make_routing_table4

Each cell is built the way ``nas sweep`` builds it (``trainers.settings.under_settings``, then
``search_spaces.space.grid_cells``) and trained in a process of its own, two at a time, one
thread each, as ``--concurrency 2 --cpus-per-trial 1`` runs them."""

from __future__ import annotations

import dataclasses
import json
import multiprocessing as mp
import tempfile
from pathlib import Path
from typing import Any

from search_spaces.builtin import BUILTIN
from search_spaces.space import Cell, grid_cells
from tests.trainers.data.make_routing_margins import _profiles
from trainers.settings import under_settings

OUT = Path(__file__).parent / "recorded_table4_margins.json"
STEPS = 300
ARMS = (
    "attnres",
    "attnres/query=static_input",
    "attnres/window=4",
    "block_attnres",
    "attnres/query=input",
)


def cells() -> list[Cell]:
    """The arms' cells, every seed, as the sweep would run them."""
    space = BUILTIN["attnres_ablation"]
    space = dataclasses.replace(space, arms={a: space.arms[a] for a in ARMS})
    space_base, base, _ = under_settings(space.base, (), STEPS)
    found, skipped = grid_cells(dataclasses.replace(space, base=space_base), base)
    assert not skipped, skipped
    return found


def _run(job: tuple[Cell, str]) -> tuple[str, str, dict[str, Any]]:
    import torch

    from trainers.training.run import train

    cell, root = job
    torch.set_num_threads(1)
    out = Path(root) / f"{cell.arm.replace('/', '_')}-{cell.seed}"
    result, _ = train(cell.config, out, progress=False)
    print(cell.arm, cell.seed, result.status, result.routing_alarm or "no alarm", flush=True)
    return cell.arm, str(cell.seed), {"alarm": result.routing_alarm, "profiles": _profiles(out)}


def main() -> None:
    recorded: dict[str, dict[str, Any]] = {arm: {} for arm in ARMS}
    with tempfile.TemporaryDirectory() as tmp:
        jobs = [(c, tmp) for c in cells()]
        with mp.get_context("spawn").Pool(2) as pool:
            for arm, seed, run in pool.imap_unordered(_run, jobs):
                recorded[arm][seed] = run
    for arm in ARMS:
        recorded[arm] = dict(sorted(recorded[arm].items()))
    OUT.write_text(json.dumps(recorded, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
