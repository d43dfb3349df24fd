"""The harness's cost per training step: ``trainers.training.run.train`` (Lightning, CSV logging, no
diagnostics, one validation batch at the end) against a bare PyTorch loop over the same model,
batches, optimizer, schedule, clipping and precision (float32 on the CPU).

    .venv/bin/python -m benchmarks.harness.harness_overhead [--quick] [--out DIR]

Rounds interleave one harness run and one bare run; each figure is the median over rounds of
harness / bare within a round, so machine noise hits both alike. Three figures:

- in-step, steady state: mean time inside a training step (StepTimer's boundaries: batch start
  to batch end) over the steps after warm-up, against the bare loop's whole iteration (batch
  fetch, step, schedule) over the same steps. Means, not medians, so that the periodic cost
  (a log write every ``log_every`` steps) counts.
- in-step, all steps: ``TrainResult.step_s`` over every step, warm-up included.
- whole fit: ``TrainResult.wall_s`` (Lightning's set-up, loaders, the steps, the final
  one-batch validation) against the bare loop from optimizer and loader creation to its last step.

Both runs start from the same seed, so they train the same weights: the largest parameter
difference at the end is reported as a check that the two loops do the same work.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import lightning as L
import torch

from benchmarks.common import cli, machine
from trainers.config import RunConfig
from trainers.config_io import from_dict
from trainers.data import DataSource
from trainers.data.module import LMDataModule, load_source
from trainers.training.module import LanguageModelModule, lm_loss
from trainers.training.run import train
from trainers.training.step_timer import StepTimer

NAME = "harness_overhead"
GOAL = 1.05  # harness / bare, in-step steady state

FULL = {"n_layers": 8, "d_model": 256, "n_heads": 4, "seq_len": 256, "batch": 8}
QUICK = {"n_layers": 2, "d_model": 64, "n_heads": 4, "seq_len": 128, "batch": 8}


def config(s: dict[str, Any]) -> RunConfig:
    total = s["warmup"] + s["steps"]
    return from_dict(
        {
            "model": {k: s[k] for k in ("n_layers", "d_model", "n_heads", "seq_len")},
            "train": {
                "max_steps": total,
                "val_every": total,  # one validation, at the end
                "val_batches": 1,
                "batch_size": s["batch"],
                "diagnostics_every": 0,
                "precision": "32-true",
                "accelerator": "cpu",
            },
        }
    )


def harness_run(cfg: RunConfig, source: DataSource, warmup: int) -> dict[str, Any]:
    steps = StepTimer()
    with tempfile.TemporaryDirectory() as tmp:
        result, model = train(cfg, Path(tmp), source, callbacks=[steps], progress=False)
    return {
        "steady_s": statistics.fmean(steps.durations[warmup:]),
        "all_s": result.step_s / result.steps,
        "wall_s": result.wall_s / result.steps,
        "params": {k: v.detach().clone() for k, v in model.state_dict().items()},
    }


def bare_run(cfg: RunConfig, source: DataSource, warmup: int) -> dict[str, Any]:
    """The same step written out in plain PyTorch, with the module's own optimizer and schedule."""
    t = cfg.train
    L.seed_everything(t.seed, workers=True, verbose=False)  # as train() does: the same init
    module = LanguageModelModule(cfg, source.bytes_per_token)
    model = module.model.train()
    start = time.perf_counter()
    opts = module.configure_optimizers()
    opt, schedule = opts["optimizer"], opts["lr_scheduler"]["scheduler"]
    durations = []
    step_start = time.perf_counter()
    for x, y in LMDataModule(cfg, source).train_dataloader():
        loss = lm_loss(model(x), y)
        loss.backward()
        if t.grad_clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), t.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        schedule.step()
        now = time.perf_counter()
        durations.append(now - step_start)
        step_start = now
    return {
        "steady_s": statistics.fmean(durations[warmup:]),
        "all_s": statistics.fmean(durations),
        "wall_s": (time.perf_counter() - start) / len(durations),
        "params": model.state_dict(),
    }


def max_param_diff(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    return max(float((a[k] - b[k]).abs().max()) for k in a)


FIGURES = {
    "steady_s": "in-step, steady state",
    "all_s": "in-step, all steps (TrainResult.step_s)",
    "wall_s": "whole fit (TrainResult.wall_s)",
}


def run(quick: bool = False) -> dict[str, Any]:
    # Full: about 2 minutes on 2 cores (each run ~0.7 s/step); the rounds agreed within 2%.
    s = {**(QUICK if quick else FULL), "warmup": 5, "steps": 10 if quick else 20}
    s["rounds"] = 2 if quick else 3
    cfg = config(s)
    source = load_source(cfg.data, cfg.model)  # once: both loops read the same tokens
    short = config(s | {"steps": 1})
    harness_run(short, source, s["warmup"]), bare_run(short, source, s["warmup"])  # first-run costs
    rounds, diffs = [], []
    for i in range(s["rounds"]):
        if i % 2:  # alternate which loop goes first
            b = bare_run(cfg, source, s["warmup"])
            h = harness_run(cfg, source, s["warmup"])
        else:
            h = harness_run(cfg, source, s["warmup"])
            b = bare_run(cfg, source, s["warmup"])
        diffs.append(max_param_diff(h.pop("params"), b.pop("params")))
        rounds.append({"harness": h, "bare": b})
    results = {
        key: {
            "harness_ms": 1000 * statistics.median(r["harness"][key] for r in rounds),
            "bare_ms": 1000 * statistics.median(r["bare"][key] for r in rounds),
            "ratio": statistics.median(r["harness"][key] / r["bare"][key] for r in rounds),
        }
        for key in FIGURES
    }
    return {
        "name": NAME,
        "settings": s | {"data": cfg.data.source, "precision": cfg.train.precision},
        "machine": machine(),
        "goal_ratio": GOAL,
        "results": results,
        "max_param_diff": max(diffs),
        "rounds": rounds,
    }


def markdown(result: dict[str, Any]) -> str:
    s, m = result["settings"], result["machine"]
    lines = [
        f"Harness (`trainers.training.run.train`) vs bare PyTorch loop: n_layers={s['n_layers']} "
        f"d_model={s['d_model']} seq_len={s['seq_len']} batch {s['batch']}, {s['steps']} steps "
        f"after {s['warmup']} warm-up, {m['threads']} threads, torch {m['torch']}, median of "
        f"{s['rounds']} rounds; final weights differ by at most {result['max_param_diff']:.1e}.",
        "",
        "| per step | harness (ms) | bare (ms) | harness / bare | goal |",
        "| --- | --- | --- | --- | --- |",
    ]
    for key, label in FIGURES.items():
        r = result["results"][key]
        goal = f"≤ {result['goal_ratio']:.2f}x" if key == "steady_s" else ""
        lines.append(
            f"| {label} | {r['harness_ms']:.1f} | {r['bare_ms']:.1f} | {r['ratio']:.3f}x | {goal} |"
        )
    return "\n".join(lines)


def main() -> None:
    cli(NAME, __doc__ or NAME, run, markdown)


if __name__ == "__main__":
    main()
