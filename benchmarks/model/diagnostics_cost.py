"""What the dilution diagnostics cost a trial at their default frequency:
``trainers.training.run.train`` with the default ``train.diagnostics_every`` against the same run
with diagnostics off.

    .venv/bin/python -m benchmarks.model.diagnostics_cost [--quick] [--out DIR]

At the default (every validation and the last) a trial of the ``quick`` sweep space profiles
once per validation: a float32 forward with hooks, a backward through ``torch.autograd.grad`` on
``train.diagnostics_batch`` held-out sequences, a JSON file each time and the PNG figure for the
last. The figure is the median over interleaved rounds of wall(on) / wall(off) - 1 within a
round, per arm. The profile runs outside training steps, so the same cost is also given from the
time outside steps (wall - ``step_s``), which takes the steps' noise out: as a fraction of the
trial, and per profile. One warm-up trial, not counted, pays the process's first-use costs
(imports, matplotlib's font cache).
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.common import cli, machine
from search_spaces.builtin import CORE, SMALL
from trainers.config import RunConfig, TrainConfig
from trainers.config_io import from_dict
from trainers.data import DataSource
from trainers.data.module import load_source
from trainers.training.run import train

NAME = "diagnostics_cost"
GOAL = 0.05  # extra fraction of trial wall time

# The quick space's trials at 8 blocks (search_spaces/builtin.py: SMALL, attnres_blocks 4).
FULL = {**SMALL, "model.n_layers": 8, "model.attnres_blocks": 4}
QUICK = {
    **FULL,
    "model.n_layers": 2,
    "model.attnres_blocks": 2,
    "model.seq_len": 64,
    "train.batch_size": 8,
    "train.max_steps": 20,
    "train.val_every": 10,
    "train.val_batches": 2,
    "train.warmup_steps": 2,
}


def config(flat: dict[str, Any], arm: dict[str, Any], diagnostics_every: int) -> RunConfig:
    nested: dict[str, dict[str, Any]] = {"model": {}, "train": {}}
    for key, value in {**flat, **arm, "train.diagnostics_every": diagnostics_every}.items():
        section, name = key.split(".")
        nested[section][name] = value
    nested["train"] |= {"precision": "32-true", "accelerator": "cpu"}
    return from_dict(nested)


def trial(cfg: RunConfig, source: DataSource) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        result, _ = train(cfg, Path(tmp), source, progress=False)
        profiles = len(list((Path(tmp) / "dilution").glob("step-*.json")))
    return {"wall_s": result.wall_s, "step_s": result.step_s, "profiles": profiles}


def run(quick: bool = False) -> dict[str, Any]:
    flat = QUICK if quick else FULL
    arms = {a: CORE[a] for a in ("standard", "block_attnres")}  # attnres profiles like block
    n_rounds = 2  # a full round is four trials of 10-20 s
    default_every = TrainConfig().diagnostics_every
    source = load_source(config(flat, {}, 0).data, config(flat, {}, 0).model)
    warm = {**flat, "train.max_steps": 2, "train.val_every": 1, "train.val_batches": 1}
    trial(config(warm, {}, default_every), source)  # first-use costs, not counted
    rounds: dict[str, list[dict[str, Any]]] = {a: [] for a in arms}
    for i in range(n_rounds):
        for arm, fields in arms.items():
            on, off = config(flat, fields, default_every), config(flat, fields, 0)
            order = (on, off) if i % 2 == 0 else (off, on)  # alternate which goes first
            timed = {c.train.diagnostics_every: trial(c, source) for c in order}
            rounds[arm].append({"on": timed[default_every], "off": timed[0]})
    results = {arm: summary(r) for arm, r in rounds.items()}
    settings = {**flat, "rounds": n_rounds, "diagnostics_every": default_every}
    settings["diagnostics_batch"] = TrainConfig().diagnostics_batch
    return {
        "name": NAME,
        "settings": settings,
        "machine": machine(),
        "goal_fraction": GOAL,
        "results": results,
        "rounds": rounds,
    }


def summary(rounds: list[dict[str, Any]]) -> dict[str, float]:
    on = [r["on"] for r in rounds]
    off = [r["off"] for r in rounds]
    profiles = on[0]["profiles"]
    # The profile runs outside training steps, so the difference in time outside steps is the
    # same cost with the steps' noise taken out.
    outside = [
        (a["wall_s"] - a["step_s"]) - (b["wall_s"] - b["step_s"])
        for a, b in zip(on, off, strict=True)
    ]
    return {
        "wall_on_s": statistics.median(r["wall_s"] for r in on),
        "wall_off_s": statistics.median(r["wall_s"] for r in off),
        "fraction": statistics.median(
            a["wall_s"] / b["wall_s"] - 1 for a, b in zip(on, off, strict=True)
        ),
        "fraction_outside_steps": statistics.median(
            d / b["wall_s"] for d, b in zip(outside, off, strict=True)
        ),
        "profiles": profiles,
        "per_profile_s": statistics.median(d / max(1, profiles) for d in outside),
    }


def markdown(result: dict[str, Any]) -> str:
    s, m = result["settings"], result["machine"]
    lines = [
        f"Dilution diagnostics every {s['diagnostics_every']} validation(s) vs off: "
        f"n_layers={s['model.n_layers']} d_model={s['model.d_model']} "
        f"seq_len={s['model.seq_len']} batch {s['train.batch_size']}, {s['train.max_steps']} "
        f"steps, val_every {s['train.val_every']}, {m['threads']} threads, torch {m['torch']}, "
        f"median of {s['rounds']} rounds.",
        "",
        "| arm | trial, off (s) | trial, on (s) | profiles | per profile (s) | extra | "
        "extra, outside steps | goal |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for arm, r in result["results"].items():
        lines.append(
            f"| `{arm}` | {r['wall_off_s']:.2f} | {r['wall_on_s']:.2f} | {r['profiles']} | "
            f"{r['per_profile_s']:.3f} | {100 * r['fraction']:+.1f}% | "
            f"{100 * r['fraction_outside_steps']:+.1f}% | ≤ {100 * result['goal_fraction']:.0f}% |"
        )
    return "\n".join(lines)


def main() -> None:
    cli(NAME, __doc__ or NAME, run, markdown)


if __name__ == "__main__":
    main()
