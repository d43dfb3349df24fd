"""How ``recorded_margins.json`` was made: short seeded runs of Full AttnRes with the paper's static
query and with the raw input-dependent query (``model.attnres_query=input``), at 8 and at 48
blocks (the 48-block output site reads 97 sources), seeds 0, 1 and 2, each profile's per-site
routing statistics as the mixing probe measured them per token (issue 50: the runner-up margin
and the collapsed share beside the top-1 mass and the spread). Seed 0's runs are named by arm and
depth (``attnres/query=input/L8``), the others with the seed after (``.../L8/seed=1``).

    PYTHONPATH=. .venv/bin/python -m tests.trainers.data.make_routing_margins

The 8-block runs are ``tests/trainers/test_routing_alarm.py``'s shape (d_model 64, seq_len 32,
batch 8) run twice as long (160 steps, a profile every 40); the 48-block runs are narrower
(d_model 32, 2 heads) to stay a few CPU minutes.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from trainers.config import RunConfig
from trainers.config_io import from_dict
from trainers.training.run import train

OUT = Path(__file__).parent / "recorded_margins.json"
STEPS = 160
KEPT = ("top1", "spread", "margin", "collapsed")
SEEDS = (0, 1, 2)
# arm and depth -> (d_model, n_heads, n_layers, query)
SHAPES = {
    "attnres/L8": (64, 4, 8, "static"),
    "attnres/query=input/L8": (64, 4, 8, "input"),
    "attnres/L48": (32, 2, 48, "static"),
    "attnres/query=input/L48": (32, 2, 48, "input"),
}
# run name -> (seed, shape)
RUNS = {
    name if seed == 0 else f"{name}/seed={seed}": (seed, shape)
    for seed in SEEDS
    for name, shape in SHAPES.items()
}


def _cfg(
    cache: Path, seed: int, d_model: int, n_heads: int, n_layers: int, query: str
) -> RunConfig:
    model = {"d_model": d_model, "n_heads": n_heads, "n_layers": n_layers, "seq_len": 32}
    return from_dict(
        {
            "model": {**model, "residual": "attnres", "attnres_query": query},
            "train": {
                "seed": seed,
                "max_steps": STEPS,
                "batch_size": 8,
                "val_every": 40,
                "val_batches": 1,
                "diagnostics_batch": 4,
                "log_every": 40,
            },
            "data": {"max_bytes": 1_000_000, "cache_dir": str(cache)},
        }
    )


def _profiles(out: Path) -> list[dict[str, Any]]:
    """Each profile's step, per-site statistics (4 decimals) and sources per site."""
    found = []
    for f in sorted((out / "dilution").glob("step-*.json")):
        data = json.loads(f.read_text())
        row: dict[str, Any] = {"step": int(f.stem.split("-")[1])}
        for k in KEPT:
            row[k] = [None if v is None else round(v, 4) for v in data[f"routing_{k}"]]
        row["sources"] = [sum(w is not None for w in ws) for ws in data["depth_weights"]]
        found.append(row)
    return found


def main() -> None:
    """Run each of ``RUNS`` the file does not hold yet (delete it to make every run again)."""
    recorded: dict[str, Any] = json.loads(OUT.read_text()) if OUT.is_file() else {}
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "cache"
        for name, (seed, shape) in RUNS.items():
            if name in recorded:
                continue
            out = Path(tmp) / name.replace("/", "_")
            result, _ = train(_cfg(cache, seed, *shape), out, progress=False)
            recorded[name] = {"alarm": result.routing_alarm, "profiles": _profiles(out)}
            print(name, result.status, result.routing_alarm or "no alarm", flush=True)
    ordered = {name: recorded[name] for name in RUNS}
    OUT.write_text(json.dumps(ordered, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
