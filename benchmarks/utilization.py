"""Model FLOPs utilization, the CPU analogue of MFU: useful model FLOP/s of a training step divided
by this machine's dense matmul throughput in the same dtype and thread count.

- Peak: ``a @ b`` on square matrices (fp32 on CPU, bf16 on CUDA), 2n³ FLOPs per matmul; the larger
  of the sizes' throughputs.
- Model FLOPs per step (convention, stated once): ``6 · N · tokens + 12 · n_layers · seq_len ·
  d_model · tokens``, where N counts the matrix weights outside the embedding and the LM head
  (read from the standard model's parameters; 12 · n_layers · d_model² here: no biases, MLP ratio
  4); the second term is attention scores and values, forward + backward, without halving for the
  causal mask; the LM head's matmul (about 1% at vocab 256) and norms are not counted. Every arm
  is credited with standard's FLOPs: a wiring's extra mixing work is overhead, not useful work.
- Matmuls and training steps are timed in the same interleaved rounds; utilization is the median
  over rounds of (model FLOP/s ÷ that round's peak).

    .venv/bin/python -m benchmarks.utilization [--quick] [--device cuda] [--out DIR]

Run it alone: a second torch process on 2 cores distorts every timing.
"""

from __future__ import annotations

import statistics
from typing import Any

import torch

from benchmarks.common import Step, cli, config, interleaved, machine, sync, train_step
from trainers.config import ModelConfig
from trainers.model import DeepTransformer

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
            "matmul_n": [256, 512],
            "warmup": 1,
            "rounds": 3,
        }
    if cuda:  # the GPU check: bf16 at the d_model=1024
        return {
            "shape": {"n_layers": 8, "n_heads": 8, "seq_len": 1024},
            "batch": 8,
            "d_models": [512, 1024],
            "matmul_n": [4096, 8192],
            "warmup": 3,
            "rounds": 10,
        }
    return {
        "shape": {"n_layers": 4, "n_heads": 4, "seq_len": 256},
        "batch": 4,
        "d_models": [256, 512],  # every arm at the larger width, standard only at the smaller
        "matmul_n": [1024, 2048],
        # About 1 to 1.5 minutes on 2 CPU cores.
        "warmup": 1,
        "rounds": 4,
    }


def matmul_weights(cfg: ModelConfig) -> int:
    """Matrix weights outside the token/position embedding and the LM head (N in 6·N·tokens)."""
    model = DeepTransformer(cfg)
    skip = ("tok_emb.", "pos_emb.", "head.")
    return sum(
        p.numel()
        for name, p in model.named_parameters()
        if p.dim() >= 2 and not name.startswith(skip)
    )


def step_flops(cfg: ModelConfig, batch: int) -> dict[str, float]:
    tokens = batch * cfg.seq_len
    n = matmul_weights(cfg)
    attention = 12 * cfg.n_layers * cfg.seq_len * cfg.d_model * tokens
    return {
        "n_matmul_weights": n,
        "n_12Ld2": 12 * cfg.n_layers * cfg.d_model**2,
        "flops_per_step": 6 * n * tokens + attention,
    }


def matmul_step(n: int, n_max: int, device: str) -> tuple[Step, float]:
    """A closure doing ``a @ b`` (n_max/n)³ times, so every size does the same work; returns it
    with its FLOPs."""
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    reps = max(1, n_max // n) ** 3

    def step() -> None:
        for _ in range(reps):
            a @ b
        sync(device)

    return step, 2.0 * n**3 * reps


def run(quick: bool = False, device: str = "cpu") -> dict:
    s = settings(quick, device)
    small, large = s["d_models"]
    cfgs = {f"standard@{small}": config("standard", d_model=small, **s["shape"])}
    cfgs |= {f"{arm}@{large}": config(arm, d_model=large, **s["shape"]) for arm in ARMS}
    flops = {k: step_flops(cfgs[f"standard@{c.d_model}"], s["batch"]) for k, c in cfgs.items()}
    steps = {k: train_step(c, s["batch"], device) for k, c in cfgs.items()}
    matmul_flops = {}
    for n in s["matmul_n"]:
        steps[f"matmul@{n}"], matmul_flops[f"matmul@{n}"] = matmul_step(
            n, max(s["matmul_n"]), device
        )
    times = interleaved(steps, s["warmup"], s["rounds"])
    peaks = [max(matmul_flops[k] / times[k][r] for k in matmul_flops) for r in range(s["rounds"])]
    results: dict[str, Any] = {
        "peak_gflops": statistics.median(peaks) / 1e9,
        "matmul_gflops": {
            k: statistics.median(matmul_flops[k] / t for t in times[k]) / 1e9 for k in matmul_flops
        },
        "steps": {},
    }
    for k in cfgs:
        achieved = [flops[k]["flops_per_step"] / t for t in times[k]]
        results["steps"][k] = {
            **flops[k],
            "step_ms": 1000 * statistics.median(times[k]),
            "model_gflops": statistics.median(achieved) / 1e9,
            "utilization": statistics.median(a / p for a, p in zip(achieved, peaks, strict=True)),
        }
    return {"name": NAME, "device": device, "settings": s, **machine(), "results": results}


def markdown(result: dict) -> str:
    s, res = result["settings"], result["results"]
    large = s["d_models"][1]
    mm = ", ".join(f"n={k.split('@')[1]}: {v:.0f}" for k, v in res["matmul_gflops"].items())
    lines = [
        f"Model FLOPs utilization of a training step, n_layers={s['shape']['n_layers']}, "
        f"seq_len={s['shape']['seq_len']}, batch {s['batch']}, {result['device']}, "
        f"{result['threads']} threads; peak = dense matmul {res['peak_gflops']:.0f} GFLOP/s "
        f"({mm}); FLOPs = 6·N·tokens + 12·L·T·d·tokens, every arm credited with standard's. "
        f"Goal: ≥ {GOAL:.0%} at d_model={large}.",
        "",
        "| arm @ d_model | N (matrix weights) | step (ms) | model GFLOP/s | utilization | goal |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for k, row in res["steps"].items():
        arm, d = k.split("@")
        goal = ""
        if int(d) == large:
            goal = "met" if row["utilization"] >= GOAL else "**missed**"
        lines.append(
            f"| `{arm}` @ {d} | {row['n_matmul_weights']:,} | {row['step_ms']:.0f} | "
            f"{row['model_gflops']:.1f} | {row['utilization']:.0%} | {goal} |"
        )
    return "\n".join(lines)


def main() -> None:
    cli(NAME, __doc__ or NAME, run, markdown)


if __name__ == "__main__":
    main()
