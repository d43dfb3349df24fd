"""Model FLOPs utilization (MFU) of a training step, by the convention every trial records
(``trainers.measure.device_cost``): model FLOP/s over the device's peak.

- Model FLOPs per step: ``trainers.flops.flops_per_token(cfg).total x tokens``, matrix
  products forward + backward with attention's causal half, the LM head and each arm's own wiring
  (AttnRes mixing, HC/mHC stream products) counted as the work it is.
- Peak: ``trainers.measure.device_cost.device_peak``, as in a trial: a GPU's dense datasheet peak in
  the step's dtype (bf16 on CUDA), or a timed fp32 matmul at this process's thread count on a CPU
  (measured once, before the steps).
- Steps are timed in interleaved rounds; utilization is model FLOPs over the median step time,
  over the peak.

    .venv/bin/python -m benchmarks.model.utilization [--quick] [--device cuda] [--out DIR]

Run it alone: a second torch process on 2 cores distorts every timing.
"""

from __future__ import annotations

import statistics
from typing import Any

from benchmarks.common import Deadline, cli, config, interleaved, machine, train_step
from trainers.config import ModelConfig
from trainers.flops import flops_per_token
from trainers.measure.device_cost import device_peak

NAME = "utilization"
ARMS = ("standard", "attnres", "block_attnres", "hyper", "mhc")
GOAL = 0.40


def settings(quick: bool, device: str) -> dict[str, Any]:
    cuda = device.startswith("cuda")
    if quick:
        return {
            "shape": {"n_layers": 4, "n_heads": 4, "seq_len": 64},
            "batch": 2,
            "d_models": [64, 128],
            "warmup": 1,
            "rounds": 3,
        }
    if cuda:  # the GPU check: bf16 at the d_model=1024
        return {
            "shape": {"n_layers": 8, "n_heads": 8, "seq_len": 1024},
            "batch": 8,
            "d_models": [512, 1024],
            "warmup": 3,
            "rounds": 10,
        }
    return {
        "shape": {"n_layers": 4, "n_heads": 4, "seq_len": 256},
        "batch": 4,
        "d_models": [256, 512],  # every arm at the larger width, standard only at the smaller
        # About 1 to 1.5 minutes on 2 CPU cores.
        "warmup": 1,
        "rounds": 4,
    }


def step_flops(cfg: ModelConfig, batch: int) -> float:
    """Model FLOPs of one training step of ``batch`` sequences (trainers.flops)."""
    return float(flops_per_token(cfg).total * batch * cfg.seq_len)


def run(quick: bool = False, device: str = "cpu", deadline: Deadline | None = None) -> dict:
    """Every arm's step, interleaved; under a ``deadline``, fewer rounds (``rounds_run``)."""
    s = settings(quick, device)
    small, large = s["d_models"]
    cfgs = {f"standard@{small}": config("standard", d_model=small, **s["shape"])}
    cfgs |= {f"{arm}@{large}": config(arm, d_model=large, **s["shape"]) for arm in ARMS}
    cuda = device.startswith("cuda")
    peak = device_peak("cuda" if cuda else "cpu", "bf16-mixed" if cuda else "32-true")
    steps = {k: train_step(c, s["batch"], device) for k, c in cfgs.items()}
    times = interleaved(steps, s["warmup"], s["rounds"], deadline)
    results: dict[str, Any] = {"peak_gflops": peak.flops / 1e9, "peak_source": peak.source}
    results["rounds_run"] = min(len(t) for t in times.values())
    results["steps"] = {}
    for k, cfg in cfgs.items():
        flops = step_flops(cfg, s["batch"])
        step_s = statistics.median(times[k])
        results["steps"][k] = {
            "flops_per_step": flops,
            "step_ms": 1000 * step_s,
            "model_gflops": flops / step_s / 1e9,
            "utilization": flops / step_s / peak.flops,
        }
    return {"name": NAME, "device": device, "settings": s, **machine(), "results": results}


def markdown(result: dict) -> str:
    s, res = result["settings"], result["results"]
    large = s["d_models"][1]
    lines = [
        f"Model FLOPs utilization of a training step, n_layers={s['shape']['n_layers']}, "
        f"seq_len={s['shape']['seq_len']}, batch {s['batch']}, {result['device']}, "
        f"{result['threads']} threads; peak {res['peak_gflops']:,.0f} GFLOP/s "
        f"({res['peak_source']}); FLOPs = trainers.flops per token x tokens, each arm's "
        f"wiring included. Goal: ≥ {GOAL:.0%} at d_model={large}.",
        "",
        "| arm @ d_model | GFLOPs per step | step (ms) | model GFLOP/s | utilization | goal |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for k, row in res["steps"].items():
        arm, d = k.split("@")
        goal = ""
        if int(d) == large:
            goal = "met" if row["utilization"] >= GOAL else "**missed**"
        lines.append(
            f"| `{arm}` @ {d} | {row['flops_per_step'] / 1e9:,.1f} | {row['step_ms']:.0f} | "
            f"{row['model_gflops']:.1f} | {row['utilization']:.0%} | {goal} |"
        )
    ran = res.get("rounds_run", s["rounds"])
    if ran < s["rounds"]:
        lines.append(f"\nTrimmed to the time budget: {ran} of {s['rounds']} rounds.")
    return "\n".join(lines)


def main() -> None:
    cli(NAME, __doc__ or NAME, run, markdown)


if __name__ == "__main__":
    main()
