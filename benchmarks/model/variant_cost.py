"""Training-step time and peak memory of each residual type relative to ``standard`` (pre-norm),
at several depths.

A step is forward + cross-entropy + backward + AdamW update on random tokens
(``benchmarks.variant_step_time.step_fn``). Time: per depth, every arm is built in one process and
timed in interleaved rounds after warm-up; the figure is the median over rounds of the arm's step
time divided by standard's in the same round. Memory, measured after one warm-up step (so AdamW's
state and the allocator are settled):

- on CPU, each (arm, depth) runs in a fresh subprocess with glibc's mmap threshold pinned (so freed
  tensors go back to the OS); ``step_mb`` is the peak RSS during one step (VmHWM, reset through
  ``/proc/self/clear_refs``) minus the RSS just before it: activations, gradients and transients;
  ``peak_mb`` is that peak in total (weights, AdamW state and the interpreter included);
- on CUDA, ``torch.cuda.max_memory_allocated`` around one step, in process, one arm at a time.

    .venv/bin/python -m benchmarks.model.variant_cost [--quick] [--device cuda] [--out DIR]

Run it alone: a second torch process on 2 cores distorts every timing.
"""

from __future__ import annotations

import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import torch

from benchmarks.arms import ARMS
from benchmarks.common import (
    Deadline,
    cli,
    config,
    fmt_ratio,
    free,
    interleaved,
    machine,
    md_table,
    ratio,
    train_step,
    trimmed_caption,
)

NAME = "variant_cost"
ROOT = Path(__file__).resolve().parents[2]
Step = Callable[[], None]

ARM_NAMES = (
    "standard",
    "attnres",
    "block_attnres",
    "hyper",
    "mhc",
    "denseformer",
    "rezero",
    "deepnorm",
)
# Goals at the goal depth: step-time ratio to standard, per arm; memory ratio for every arm.
TIME_GOALS = {"block_attnres": 1.10, "attnres": 1.35, "hyper": 1.30, "mhc": 1.30}
MEMORY_GOAL = 1.20
GOAL_DEPTH = 32


# ---- peak memory of one step ------------------------------------------------------------------


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _hwm_mb() -> float:
    with open("/proc/self/status") as f:
        line = next(x for x in f if x.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024


def _memory_child(arm: str, dims: dict[str, Any], batch: int) -> None:
    """Runs in a fresh interpreter: prints the step's memory as one JSON line."""
    torch.manual_seed(0)
    step = train_step(config(arm, **dims), batch, "cpu")
    step()  # warm-up: AdamW state, allocator
    gc.collect()
    before = _rss_mb()
    try:
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS
        method = "VmHWM reset"
    except OSError:  # older kernels: the peak then also covers the warm-up step
        method = "ru_maxrss"
    step()
    if method == "VmHWM reset":
        peak = _hwm_mb()
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"step_mb": peak - before, "peak_mb": peak, "method": method}))


def _memory_cpu(arm: str, dims: dict[str, Any], batch: int) -> dict[str, Any]:
    code = (
        "import json, sys; from benchmarks.model.variant_cost import _memory_child; "
        "_memory_child(sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]))"
    )
    # A pinned mmap threshold turns off glibc's adaptive one, so every large tensor is mmapped
    # and its pages return to the OS when freed: RSS then tracks live tensors.
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536", "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code, arm, json.dumps(dims), str(batch)],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _memory_cuda(arm: str, dims: dict[str, Any], batch: int, device: str) -> dict[str, Any]:
    free(device)
    start = torch.cuda.memory_allocated(device)
    step = train_step(config(arm, **dims), batch, device)
    step()
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    step()
    peak = torch.cuda.max_memory_allocated(device)
    del step
    free(device)
    mb = 2**20
    return {"step_mb": (peak - before) / mb, "peak_mb": (peak - start) / mb, "method": "cuda"}


def step_memory(arm: str, dims: dict[str, Any], batch: int, device: str) -> dict[str, Any]:
    if device == "cpu":
        return _memory_cpu(arm, dims, batch)
    return _memory_cuda(arm, dims, batch, device)


# ---- the benchmark ----------------------------------------------------------------------------


def settings(quick: bool, device: str = "cpu") -> dict[str, Any]:
    if device.startswith("cuda") and not quick:
        # The GPU check (benchmarks/gpu/gpu_check.sh): the d_model=1024, a realistic batch,
        # every arm of benchmarks/arms.py (every wiring), fewer rounds than before to fit.
        return {
            "dims": {"d_model": 1024, "n_heads": 8, "seq_len": 1024},
            "batch": 8,
            "arms": list(ARMS),
            "schedule": {8: (2, 6), 32: (2, 5), 64: (1, 3)},
        }
    if quick:
        return {
            "dims": {"d_model": 64, "n_heads": 4, "seq_len": 64},
            "batch": 1,
            "arms": ["standard", "block_attnres", "attnres"],
            "schedule": {2: (1, 3), 4: (1, 3)},  # n_layers: (warm-up steps, rounds)
        }
    return {
        "dims": {"d_model": 256, "n_heads": 4, "seq_len": 256},
        "batch": 1,
        "arms": list(ARM_NAMES),
        # About 4 minutes on 2 CPU cores, memory subprocesses included.
        "schedule": {8: (2, 7), 32: (1, 5), 64: (1, 3)},
    }


def measure_depth(
    n_layers: int,
    s: dict[str, Any],
    warmup: int,
    rounds: int,
    device: str,
    deadline: Deadline | None = None,
) -> dict[str, dict[str, Any]]:
    dims = {**s["dims"], "n_layers": n_layers}
    steps = {arm: train_step(config(arm, **dims), s["batch"], device) for arm in s["arms"]}
    times = interleaved(steps, warmup, rounds, deadline)
    del steps
    free(device)
    rows = {}
    for arm in s["arms"]:
        rows[arm] = {
            "step_ms": 1000 * statistics.median(times[arm]),
            "rounds": len(times[arm]),
            "time_ratio": ratio(times[arm], times["standard"]),
            **step_memory(arm, dims, s["batch"], device),
        }
    for row in rows.values():
        row["step_mem_ratio"] = row["step_mb"] / rows["standard"]["step_mb"]
        row["peak_mem_ratio"] = row["peak_mb"] / rows["standard"]["peak_mb"]
    return rows


def run(quick: bool = False, device: str = "cpu", deadline: Deadline | None = None) -> dict:
    """Every depth of the schedule in order; under a ``deadline``, each depth's rounds stop at
    it, and a depth is skipped when the last one's time, scaled by depth, says it would not
    finish one round (its warm-up included) before it: the result lists what was skipped."""
    s = settings(quick, device)
    results: dict[str, Any] = {}
    skipped: list[int] = []
    last: tuple[int, float] | None = None  # (n_layers, seconds per round and warm-up step)
    for n, (warmup, rounds) in s["schedule"].items():
        if deadline is not None and last is not None:
            needed = last[1] * n / last[0] * (warmup + 1)
            if deadline.left() < needed:
                skipped.append(n)
                continue
        start = time.monotonic()
        results[str(n)] = measure_depth(n, s, warmup, rounds, device, deadline)
        done = results[str(n)]["standard"]["rounds"] + warmup
        last = (n, (time.monotonic() - start) / done)
    s["schedule"] = {str(n): list(v) for n, v in s["schedule"].items()}
    out = {"name": NAME, "device": device, "settings": s, **machine(), "results": results}
    return out | {"skipped_depths": skipped}


def _goal(arm: str, row: dict[str, Any]) -> str:
    checks = [row["step_mem_ratio"] <= MEMORY_GOAL]
    text = f"mem ≤ {MEMORY_GOAL:.2f}x"
    if arm in TIME_GOALS:
        checks.append(row["time_ratio"] <= TIME_GOALS[arm])
        text = f"time ≤ {TIME_GOALS[arm]:.2f}x, " + text
    return ("met" if all(checks) else "**missed**") + f" ({text})"


def _cells(depths: Iterable[str], res: dict, arm: str, key: str) -> list[str]:
    return [fmt_ratio(res[d][arm][key]) for d in depths]


def markdown(result: dict) -> str:
    s, res = result["settings"], result["results"]
    depths = list(res)
    goal_at = str(GOAL_DEPTH) if str(GOAL_DEPTH) in res else depths[-1]
    std = res[goal_at]["standard"]
    lines = [
        f"Step time and memory vs `standard` (pre-norm), d_model={s['dims']['d_model']}, "
        f"seq_len={s['dims']['seq_len']}, batch {s['batch']}, Block AttnRes N=8, "
        f"{result['device']}, {result['threads']} threads; standard at n_layers={goal_at}: "
        f"{std['step_ms']:.0f} ms/step, step memory {std['step_mb']:.0f} MB, "
        f"peak {std['peak_mb']:.0f} MB. Step memory = peak during one step minus what is "
        f"resident before it (activations + gradients). Goal at n_layers={goal_at}: "
        f"time ≤ {TIME_GOALS['block_attnres']:.2f}x (block_attnres), "
        f"≤ {TIME_GOALS['attnres']:.2f}x (attnres), ≤ {TIME_GOALS['hyper']:.2f}x (hyper, mhc); "
        f"step memory ≤ {MEMORY_GOAL:.2f}x for all.",
        "",
    ]
    lines = trimmed_caption(lines, _trimmed(result))
    header = ["arm", *(f"time L{d}" for d in depths), *(f"step mem L{d}" for d in depths)]
    header += [f"peak mem L{goal_at}", f"goal at L{goal_at}"]
    rows = []
    for arm in s["arms"]:
        row = res[goal_at][arm]
        cells = _cells(depths, res, arm, "time_ratio") + _cells(depths, res, arm, "step_mem_ratio")
        rows.append([f"`{arm}`", *cells, fmt_ratio(row["peak_mem_ratio"]), _goal(arm, row)])
    return "\n".join(lines + md_table(header, rows))


def _trimmed(result: dict) -> str:
    """What a budget left out: skipped depths, and depths that ran fewer rounds than planned."""
    s, res = result["settings"], result["results"]
    parts = [f"n_layers={n} skipped" for n in result.get("skipped_depths", [])]
    for depth, (_, planned) in s["schedule"].items():
        ran = res.get(depth, {}).get("standard", {}).get("rounds", planned)
        if depth in res and ran < planned:
            parts.append(f"n_layers={depth} ran {ran} of {planned} rounds")
    return "; ".join(parts)


def main() -> None:
    cli(NAME, __doc__ or NAME, run, markdown)


if __name__ == "__main__":
    main()
