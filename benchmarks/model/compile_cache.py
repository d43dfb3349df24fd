"""What a sweep's second trial of a cell pays for ``torch.compile`` when the first trial on the
node has compiled it: each trial is its own process (a Ray worker), and Inductor keeps its
compiled graphs (FX graph and AOTAutograd caches) on disk, under ``TORCHINDUCTOR_CACHE_DIR``
(default: ``<tmp>/torchinductor_<user>``, one per node and user), where every later process with
the same graph reads them.

Three trials of one cell (``train.compile=true``, through ``trainers.training.run.train``, as a
sweep trial trains) run one after another, each in a fresh process, on a new empty cache: the
first compiles, the second (another seed: the same graph) and the third (another learning rate)
read the cache. Each reports its fit's wall time and its first training step's; the first step
is where compilation happens.

    .venv/bin/python -m benchmarks.model.compile_cache [--quick] [--out DIR]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.common import cli, machine, md_table

NAME = "compile_cache"
ROOT = Path(__file__).resolve().parents[2]

CELL = {
    "model": {"residual": "block_attnres", "d_model": 64, "n_heads": 4, "n_layers": 4},
    "train": {
        "max_steps": 4,
        "val_every": 4,
        "batch_size": 4,
        "compile": "true",
        "accelerator": "cpu",
        "diagnostics_every": 0,
    },
    "data": {"source": "synthetic"},
}
TRIALS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("first", {}),
    ("another seed", {"seed": 1}),
    ("another lr", {"lr": 1e-3}),
)

# One trial in its own process: prints its wall time and its first step's, as JSON.
TRIAL = """
import json, sys, tempfile
from pathlib import Path
from trainers.config_io import from_dict
from trainers.training.run import train
from trainers.training.step_timer import StepTimer

timer = StepTimer()
cfg = from_dict(json.loads(sys.argv[1]))
result, _ = train(cfg, Path(tempfile.mkdtemp()), callbacks=[timer], progress=False)
print(json.dumps({"wall_s": result.wall_s, "first_step_s": timer.durations[0],
                  "later_step_s": sorted(timer.durations[1:])[len(timer.durations[1:]) // 2]}))
"""


def trial(cell: dict[str, Any], cache: str) -> dict[str, float]:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", TRIAL, json.dumps(cell)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def run(quick: bool) -> dict[str, Any]:
    cell = json.loads(json.dumps(CELL))
    if quick:
        cell["model"] |= {"d_model": 32, "n_heads": 2, "n_layers": 2}
    rows = {}
    with tempfile.TemporaryDirectory() as cache:
        for name, change in TRIALS:
            rows[name] = trial({**cell, "train": {**cell["train"], **change}}, cache)
    return {"machine": machine(), "cell": cell, "trials": rows}


def markdown(result: dict[str, Any]) -> str:
    m = result["cell"]["model"]
    lines = [
        f"Three compiled trials of {m['residual']} (d_model {m['d_model']}, "
        f"n_layers {m['n_layers']}), each a new process on one shared, at first empty, Inductor "
        f"cache, torch {result['machine']['torch']}:",
        "",
    ]
    first = result["trials"]["first"]["first_step_s"]
    lines += md_table(
        ["trial", "first step (s)", "later step (s)", "fit wall (s)", "first step vs the first"],
        (
            [
                name,
                f"{t['first_step_s']:.1f}",
                f"{t['later_step_s']:.3f}",
                f"{t['wall_s']:.1f}",
                f"{t['first_step_s'] / first:.2f}x",
            ]
            for name, t in result["trials"].items()
        ),
    )
    return "\n".join(lines)


if __name__ == "__main__":
    cli(NAME, __doc__ or "", run, markdown)
