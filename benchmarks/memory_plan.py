"""The memory plan (``trainers.memory_plan``) against the measured peak of one training step, and
what activation checkpointing (``train.checkpointing=sublayer``) saves and costs.

One training step as ``trainers.module`` takes it on a CPU in float32: the worker's share in two
micro-batches (each forward, loss scaled by 1/2, backward; the second holds the first's
gradients), the gradient norm clipped, an AdamW step. The measured peak is what the step's
tensors held at once: the parameters and AdamW's two states (alive before the step, counted from
the tensors) plus the peak of the running sum of the profiler's allocation records during it
(``benchmarks.common.cpu_peak_bytes``; a CPU keeps no peak counter). A warm-up step first, so
AdamW's states exist. The error is (estimate - measured) / measured.

The checkpointing table times the same step (median of interleaved rounds) and measures its
peak with checkpointing none and sublayer.

    .venv/bin/python -m benchmarks.memory_plan [--quick] [--out DIR] [--budget-s S]
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

import torch

from benchmarks.common import Deadline, cli, config, cpu_peak_bytes, interleaved, machine, md_table
from trainers.checkpointing import enable_checkpointing
from trainers.config import RunConfig, TrainConfig
from trainers.loss import lm_loss
from trainers.memory_plan import memory_plan
from trainers.model import DeepTransformer

NAME = "memory_plan"
ARMS = ("standard", "attnres", "block_attnres", "mhc", "hyper", "denseformer")
CHECKPOINT_ARMS = ("standard", "attnres", "block_attnres", "mhc")
MICRO_STEPS = 2  # micro-batches per step: the second's backward meets the first's gradients


def settings(quick: bool) -> dict[str, Any]:
    if quick:
        return {
            "dims": {"d_model": 64, "n_heads": 4, "seq_len": 64, "vocab_size": 256},
            "depths": [2, 4],
            "micro_batches": [1, 2],
            "warmup": 1,
            "rounds": 2,
        }
    return {  # a few minutes on 2 cores
        "dims": {"d_model": 128, "n_heads": 4, "seq_len": 256, "vocab_size": 256},
        "depths": [8, 16],
        "micro_batches": [2, 8],
        "warmup": 1,
        "rounds": 3,
    }


def run_config(arm: str, depth: int, micro: int, dims: dict[str, Any], how: str) -> RunConfig:
    model = config(arm, n_layers=depth, **dims)
    train = TrainConfig(
        batch_size=MICRO_STEPS * micro, micro_batch=micro, checkpointing=how, precision="32-true"
    )
    return RunConfig(model=model, train=train)


def training_step(cfg: RunConfig) -> tuple[Callable[[], None], int]:
    """One optimizer step over ``MICRO_STEPS`` micro-batches, as the module takes it, after a
    warm-up step; and the bytes its parameters and AdamW's states hold before it."""
    model = DeepTransformer(cfg.model).train()
    enable_checkpointing(model, cfg.train.checkpointing)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    m, t = cfg.model, cfg.train
    gen = torch.Generator().manual_seed(0)
    shape = (t.micro_batch, m.seq_len)
    batches = [(torch.randint(0, m.vocab_size, shape, generator=gen),) * 2 for _ in range(2)]

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        for x, y in batches:
            (lm_loss(model(x), y) / len(batches)).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    step()
    held = sum(p.nbytes for p in model.parameters())
    held += sum(s.nbytes for st in opt.state.values() for s in st.values() if s.dim())
    return step, held


def measure_peak(cfg: RunConfig) -> dict[str, float]:
    step, held = training_step(cfg)
    plan = memory_plan(cfg, gpu=False)
    measured = held + cpu_peak_bytes(step)
    return {
        "estimate": plan.total,
        "measured": measured,
        "error": (plan.total - measured) / measured,
        "activations": plan.activations + plan.logits,
    }


def estimate_table(s: dict[str, Any], deadline: Deadline | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for depth in s["depths"]:
        for micro in s["micro_batches"]:
            for arm in ARMS:
                if deadline is not None and deadline.left() <= 0 and out:
                    return out
                cfg = run_config(arm, depth, micro, s["dims"], "none")
                out[f"{arm}|{depth}|{micro}"] = measure_peak(cfg)
    return out


def checkpoint_table(s: dict[str, Any], deadline: Deadline | None) -> dict[str, Any]:
    """Peak and step time with checkpointing none and sublayer, at the larger micro-batch."""
    micro = max(s["micro_batches"])
    out: dict[str, Any] = {}
    for depth in s["depths"]:
        steps: dict[str, Callable[[], None]] = {}
        for arm in CHECKPOINT_ARMS:
            for how in ("none", "sublayer"):
                cfg = run_config(arm, depth, micro, s["dims"], how)
                step, held = training_step(cfg)
                key = f"{arm}|{depth}|{how}"
                out[key] = {
                    "measured": held + cpu_peak_bytes(step),
                    "estimate": memory_plan(cfg, gpu=False).total,
                }
                steps[key] = step
        times = interleaved(steps, s["warmup"], s["rounds"], deadline)
        for key, seconds in times.items():
            out[key]["step_s"] = statistics.median(seconds)
    return out


def run(quick: bool = False, deadline: Deadline | None = None) -> dict:
    torch.set_num_threads(max(1, torch.get_num_threads()))
    s = settings(quick)
    return {
        "name": NAME,
        "device": "cpu",
        "settings": s,
        **machine(),
        "estimates": estimate_table(s, deadline),
        "checkpointing": checkpoint_table(s, deadline),
    }


def _mib(x: float) -> str:
    return f"{x / 2**20:.1f}"


def markdown(result: dict) -> str:
    d = result["settings"]["dims"]
    est = result["estimates"]
    worst = max(est.items(), key=lambda kv: abs(kv[1]["error"]))
    lines = [
        f"The memory plan against the measured peak of one float32 training step on a CPU "
        f"({MICRO_STEPS} micro-batches, clip, AdamW), d_model={d['d_model']}, "
        f"seq_len={d['seq_len']}, vocab {d['vocab_size']}; MiB. Worst error: "
        f"{100 * worst[1]['error']:+.1f}% ({worst[0].replace('|', ', ')}).",
        "",
    ]
    rows = []
    for key, r in est.items():
        arm, depth, micro = key.split("|")
        rows.append(
            [
                f"`{arm}`",
                depth,
                micro,
                _mib(r["estimate"]),
                _mib(r["measured"]),
                f"{100 * r['error']:+.1f}%",
            ]
        )
    header = ["arm", "n_layers", "micro-batch", "estimate", "measured", "error"]
    lines += md_table(header, rows)
    lines += ["", *_checkpoint_lines(result)]
    return "\n".join(lines)


def _checkpoint_lines(result: dict) -> list[str]:
    s = result["settings"]
    ck = result["checkpointing"]
    lines = [
        f"Activation checkpointing at micro-batch {max(s['micro_batches'])}: the measured peak "
        f"(MiB) and the median step time of {s['rounds']} interleaved rounds, none vs sublayer.",
        "",
    ]
    rows = []
    for depth in s["depths"]:
        for arm in CHECKPOINT_ARMS:
            none, sub = ck.get(f"{arm}|{depth}|none"), ck.get(f"{arm}|{depth}|sublayer")
            if none is None or sub is None:
                continue
            rows.append(
                [
                    f"`{arm}`",
                    str(depth),
                    _mib(none["measured"]),
                    _mib(sub["measured"]),
                    f"{sub['measured'] / none['measured']:.2f}x",
                    f"{none['step_s']:.2f}",
                    f"{sub['step_s']:.2f}",
                    f"{sub['step_s'] / none['step_s']:.2f}x",
                ]
            )
    header = [
        "arm",
        "n_layers",
        "peak none",
        "peak sublayer",
        "peak ×",
        "step s none",
        "step s sublayer",
        "time ×",
    ]
    return lines + md_table(header, rows)


def main() -> None:
    cli(NAME, __doc__ or NAME, run, markdown)


if __name__ == "__main__":
    main()
