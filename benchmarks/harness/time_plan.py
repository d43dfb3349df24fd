"""The measured time plan (``nas spaces --measure``: ``nas.resources.cell_timing``) against what the trials
then took, beside the FLOP plan (``trainers.measure.time_plan`` at its assumed MFU).

For each cell of a small sweep (3 wirings x 2 depths): the measured plan times a warm-up and a
few steps in a process of its own and extrapolates to the trial's steps; the trial then trains
in full (twice, so that the machine's own run-to-run noise shows), in another process, as ``nas train`` would (its own corpus, validations and dilution
profiles), and records the time inside its training steps (start-up, validation and diagnostics
excluded, as the plan excludes them). Each plan's error is (plan - trial) / trial; the FLOP plan
uses the trial's own measured device peak.

    .venv/bin/python -m benchmarks.harness.time_plan [--quick] [--out DIR]
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import cli, config, machine, md_table
from nas.resources.cell_timing import measure
from trainers.config import RunConfig, TrainConfig, to_dict
from trainers.measure.time_plan import DEFAULT_MFU, time_plan

NAME = "time_plan"
WIRINGS = ("standard", "block_attnres", "mhc")


def settings(quick: bool) -> dict[str, Any]:
    if quick:
        return {
            "wirings": ["standard"],
            "depths": [2],
            "dims": {"d_model": 32, "n_heads": 2, "seq_len": 32},
            "train": {"batch_size": 4, "max_steps": 8, "val_every": 4},
            "measure_steps": 3,
            "repeats": 1,
        }
    return {
        "wirings": list(WIRINGS),
        "depths": [4, 8],
        "dims": {"d_model": 128, "n_heads": 4, "seq_len": 128},
        "train": {"batch_size": 8, "max_steps": 80, "val_every": 40, "warmup_steps": 8},
        "measure_steps": 10,
        "repeats": 2,
    }


def cell(wiring: str, depth: int, s: dict[str, Any]) -> RunConfig:
    model = config(wiring, n_layers=depth, **s["dims"])
    return RunConfig(model=model, train=TrainConfig(**s["train"]))


def trial(cfg: RunConfig) -> dict[str, Any]:
    """``cfg`` trained in full in a child process: its step time total and device peak."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.harness.time_plan", "--trial"],
        input=json.dumps(to_dict(cfg)),
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _trial_child() -> None:
    from trainers.config_io import from_dict
    from trainers.training.run import train

    cfg = from_dict(json.loads(sys.stdin.read()))
    with tempfile.TemporaryDirectory() as out:
        result, _ = train(cfg, Path(out), progress=False)
    peak = result.cost.peak_flops if result.cost else float("nan")
    print(json.dumps({"step_s": result.step_s, "peak_flops": peak, "wall_s": result.wall_s}))


def run(quick: bool = False) -> dict[str, Any]:
    s = settings(quick)
    cells: dict[str, Any] = {}
    start = time.perf_counter()
    for depth in s["depths"]:
        for wiring in s["wirings"]:
            cfg = cell(wiring, depth, s)
            timing = measure(cfg, s["measure_steps"], 900)
            runs = [trial(cfg) for _ in range(s["repeats"])]
            took = [r["step_s"] for r in runs]
            mean = sum(took) / len(took)
            measured = timing.trial_seconds(cfg.train.max_steps)
            flops = time_plan(cfg, runs[0]["peak_flops"], DEFAULT_MFU).seconds
            cells[f"{wiring}|{depth}"] = {
                "trial_s": mean,
                "trial_spread": (max(took) - min(took)) / mean,
                "measured_plan_s": measured,
                "flop_plan_s": flops,
                "measure_wall_s": timing.wall_s,
                "measured_error": (measured - mean) / mean,
                "flop_error": (flops - mean) / mean,
            }
    wall = time.perf_counter() - start
    return {"name": NAME, "settings": s, **machine(), "cells": cells, "wall_s": wall}


def markdown(result: dict[str, Any]) -> str:
    s, cells = result["settings"], result["cells"]
    worst = max(cells.items(), key=lambda kv: abs(kv[1]["measured_error"]))
    d, t = s["dims"], s["train"]
    lines = [
        f"The measured time plan (`nas spaces --measure`, {s['measure_steps']} steps after a "
        f"warm-up, each cell in its own process) against the trial's recorded time inside its "
        f"training steps, beside the FLOP plan at {DEFAULT_MFU:.0%} MFU of the trial's measured "
        f"peak; d_model={d['d_model']}, seq_len={d['seq_len']}, {t['batch_size']} sequences, "
        f"{t['max_steps']} steps; each trial run {s['repeats']} times (trial s: their mean; "
        f"spread: their range over it, the machine's own noise). Worst measured-plan error: "
        f"{100 * worst[1]['measured_error']:+.1f}% ({worst[0].replace('|', ', ')}); "
        f"{result['wall_s']:.0f} s in all.",
        "",
    ]
    rows = []
    for key, c in cells.items():
        wiring, depth = key.split("|")
        rows.append(
            [
                f"`{wiring}`",
                depth,
                f"{c['trial_s']:.2f}",
                f"{100 * c['trial_spread']:.0f}%",
                f"{c['measured_plan_s']:.2f}",
                f"{100 * c['measured_error']:+.1f}%",
                f"{c['flop_plan_s']:.2f}",
                f"{100 * c['flop_error']:+.0f}%",
                f"{c['measure_wall_s']:.1f}",
            ]
        )
    header = [
        "wiring",
        "n_layers",
        "trial s",
        "spread",
        "measured plan s",
        "error",
        "FLOP plan s",
        "error",
        "measuring took s",
    ]
    return "\n".join(lines + md_table(header, rows))


def main() -> None:
    if "--trial" in sys.argv:
        _trial_child()
        return
    cli(NAME, __doc__ or NAME, run, markdown)


if __name__ == "__main__":
    main()
