"""The memory plan (``trainers.measure.memory_plan``) against the measured peak of one training
step, and what activation checkpointing (``train.checkpointing=sublayer``) saves and costs.

One training step as ``trainers.training.module`` takes it on a CPU in float32: the worker's share
in two micro-batches (each forward, loss scaled by 1/2, backward; the second holds the first's
gradients), the gradient norm clipped, an AdamW step. The measured peak is what the step's tensors
held at once: the parameters and AdamW's two states (alive before the step, counted from the
tensors) plus the peak of the running sum of the profiler's allocation records during it
(``benchmarks.common.cpu_peak_bytes``; a CPU keeps no peak counter). A warm-up step first, so
AdamW's states exist. The error is (estimate - measured) / measured.

The checkpointing table times the same step (median of interleaved rounds) and measures its
peak with checkpointing none and sublayer.

On a GPU (``--device cuda``: ``benchmarks/gpu/gpu_check.sh``) the step is the one a GPU trial takes:
precision 'auto' (bf16-mixed: the step under ``torch.autocast`` in bfloat16, as Lightning's
plugin runs ``training_step``), the global batch in micro-batches through
``trainers.training.accumulate.accumulate_gradients``, the gradient norm clipped, fused AdamW over
``trainers.model.optim_groups``' groups. Per cell (wiring, n_layers, micro-batch, checkpointing):
the plan's estimate against the measured peak (``torch.cuda.max_memory_allocated`` over one step,
above what was allocated before the model was built), the step time (median of interleaved rounds,
CUDA synchronized), tokens/s, MFU (``trainers.flops`` model FLOPs, no recompute, over
``trainers.measure.device_cost.device_peak``), and the step time against standard's and against the
same wiring without checkpointing, in the same rounds. The budget trims rounds, then skips the
shallower depth's and the larger micro-batch's cells; the Markdown says which. ``--quick`` on a CPU
also runs that step at tiny sizes (bf16 autocast on the CPU, the profiler's peak): the GPU check's
dry run exercises the GPU path with it.

    .venv/bin/python -m benchmarks.model.memory_plan [--quick] [--device cuda] [--out DIR] [--budget-s S]
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import torch

from benchmarks.common import (
    Deadline,
    cli,
    config,
    cpu_peak_bytes,
    fmt_ratio,
    free,
    interleaved,
    machine,
    md_table,
    on_path,
    ratio,
    sync,
    trimmed_caption,
)
from trainers.config import Checkpointing, RunConfig, TrainConfig, micro_batch_of
from trainers.flops import flops_per_token
from trainers.measure.device_cost import device_peak
from trainers.measure.memory_plan import gib, memory_plan
from trainers.model.checkpointing import enable_checkpointing
from trainers.model.loss import lm_loss
from trainers.model.optim_groups import optimizer_groups
from trainers.model.transformer import DeepTransformer
from trainers.training.accumulate import accumulate_gradients

NAME = "memory_plan"
ARMS = ("standard", "attnres", "block_attnres", "mhc", "hyper", "denseformer")
CHECKPOINT_ARMS = ("standard", "attnres", "block_attnres", "mhc")
MICRO_STEPS = 2  # micro-batches per step: the second's backward meets the first's gradients
DEVICE_ARMS = ("standard", "block_attnres", "attnres", "mhc")  # standard first: the unit
CHECKPOINTING: tuple[Checkpointing, ...] = ("none", "sublayer")
# GPT-2's vocabulary padded to 50,304 (depth_gpt2's): there the loss's terms outweigh the rest of
# a small model's activations, so the estimate is checked there too.
GPT2_VOCAB = 50304


def settings(quick: bool, device: str = "cpu") -> dict[str, Any]:
    if device.startswith("cuda"):
        return device_settings(quick)
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


def run_config(
    arm: str, depth: int, micro: int, dims: dict[str, Any], how: Checkpointing
) -> RunConfig:
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
    shape = (micro_batch_of(t), m.seq_len)
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
    """Peak and step time with checkpointing none and sublayer, at the larger micro-batch; past
    the deadline no further depth starts."""
    micro = max(s["micro_batches"])
    out: dict[str, Any] = {}
    for depth in s["depths"]:
        if deadline is not None and deadline.left() <= 0:
            break
        steps: dict[str, Callable[[], None]] = {}
        for arm in CHECKPOINT_ARMS:
            for how in CHECKPOINTING:
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
            out[key]["rounds"] = len(seconds)
    return out


# ---- one training step as a GPU trial takes it -------------------------------------------------


def device_settings(quick: bool) -> dict[str, Any]:
    """The GPU run's cells (the deepest depth and the smaller micro-batch first: what the budget
    keeps), or their tiny version (``--quick``; on a CPU, the dry run's check of this path)."""
    if quick:
        return {  # the dry run's check: two micro-batches per step, then one (if it has time)
            "dims": {"d_model": 32, "n_heads": 2, "seq_len": 32, "vocab_size": 256},
            "depths": [1],
            "batch": 2,
            "micro_batches": [1, 2],
            "rounds": 2,
        }
    # The width and depth at a trial's context. What a group holds at once is one timing
    # set's models (``timing_sets``) and one step: at most standard's and mHC's four models with
    # mHC's step at 32 blocks and micro-batch 8, under half of an H200's 139 GiB counted on the
    # model (tests/test_gpu_check.py; docs/benchmarks.md for the figures).
    return {
        "dims": {"d_model": 1024, "n_heads": 8, "seq_len": 1024, "vocab_size": 256},
        "depths": [32, 8],  # the shallower depth if the budget allows
        "batch": 16,  # the global batch, in micro-batches of each size below
        "micro_batches": [4, 8],
        "rounds": 5,
    }


def device_config(
    arm: str, depth: int, micro: int, s: dict[str, Any], how: Checkpointing
) -> RunConfig:
    """The cell's run: precision 'auto', as a sweep trial trains (bf16-mixed on a GPU)."""
    model = config(arm, n_layers=depth, **s["dims"])
    train = TrainConfig(batch_size=s["batch"], micro_batch=micro, checkpointing=how)
    return RunConfig(model=model, train=train)


class DeviceStep(NamedTuple):
    """One training step as a closure (it returns the step's mean loss, detached), the bytes
    the model's parameters and AdamW's states hold, the model it trains, and the warm-up step's
    loss."""

    step: Callable[[], torch.Tensor]
    held: int
    model: DeepTransformer
    first_loss: float


def device_step(cfg: RunConfig, device: str, fused: bool | None = None) -> DeviceStep:
    """One optimizer step as ``trainers.training.module`` takes it under bf16-mixed, ending in a
    CUDA synchronize, after a warm-up step (AdamW's states, the kernels). The model is built on
    the device from seed 0, and its batch drawn after it, so that two arms of one configuration
    (Block AttnRes on either path) train the same weights on the same tokens. The gradients are
    dropped after each step rather than before the next (the module's order), so that none are
    held between steps; the step's own peak is the same. ``fused``: Block AttnRes's path (None:
    as the fused dispatch rule has it; False: the existing path)."""
    torch.manual_seed(0)
    with torch.device(device):
        model = on_path(DeepTransformer(cfg.model).train(), fused)
    enable_checkpointing(model, cfg.train.checkpointing)
    t, cuda = cfg.train, device.startswith("cuda")
    fused_adam = {"fused": True} if cuda else {}
    opt = torch.optim.AdamW(
        optimizer_groups(model, t), lr=t.lr, betas=(t.beta1, t.beta2), **fused_adam
    )
    x = torch.randint(0, cfg.model.vocab_size, (t.batch_size, cfg.model.seq_len), device=device)
    kind = torch.device(device).type

    def step() -> torch.Tensor:
        with torch.autocast(kind, dtype=torch.bfloat16):
            loss = accumulate_gradients(model, x, x, micro_batch_of(t))
            torch.nn.utils.clip_grad_norm_(model.parameters(), t.grad_clip)
            opt.step()
        opt.zero_grad(set_to_none=True)
        sync(device)
        return loss

    first = float(step())
    held = sum(p.nbytes for p in model.parameters())
    held += sum(s.nbytes for st in opt.state.values() for s in st.values() if s.dim())
    return DeviceStep(step, held, model, first)


def device_peak_bytes(
    cfg: RunConfig, device: str, fused: bool | None = None
) -> tuple[DeviceStep, float]:
    """The cell's step and its measured peak: on CUDA the allocator's peak over one step above
    what was allocated before the model was built; on a CPU the parameters and AdamW's states
    plus the profiler's peak (as the float32 table measures)."""
    if not device.startswith("cuda"):
        run = device_step(cfg, device, fused)
        return run, run.held + cpu_peak_bytes(run.step)
    before = torch.cuda.memory_allocated(device)
    run = device_step(cfg, device, fused)
    torch.cuda.reset_peak_memory_stats(device)
    run.step()
    return run, float(torch.cuda.max_memory_allocated(device) - before)


def timing_sets() -> list[tuple[str, ...]]:
    """The wirings built and timed together within a (depth, micro-batch) group: standard (the
    unit of 'vs standard') beside each other wiring in turn, so that at most two wirings' models
    (with and without checkpointing) are held at once (the deepest group then fits half an H200:
    tests/test_gpu_check.py)."""
    unit, *others = DEVICE_ARMS
    return [(unit, arm) for arm in others] or [(unit,)]


def _build_cells(
    arm: str, depth: int, micro: int, s: dict[str, Any], device: str
) -> tuple[dict[str, dict[str, Any]], dict[str, Callable[[], object]]]:
    """One wiring's cells with and without checkpointing, each peak measured as it is built,
    and their steps."""
    cells: dict[str, dict[str, Any]] = {}
    steps: dict[str, Callable[[], object]] = {}
    for how in CHECKPOINTING:
        cfg = device_config(arm, depth, micro, s, how)
        key = f"{arm}|{depth}|{micro}|{how}"
        run, measured = device_peak_bytes(cfg, device, fused=False)
        steps[key] = run.step
        plan = memory_plan(cfg, gpu=True).total
        flops = float(flops_per_token(cfg.model).total * s["batch"] * cfg.model.seq_len)
        cells[key] = {"estimate": plan, "measured": measured, "flops_per_step": flops}
        cells[key]["error"] = (plan - measured) / measured
    return cells, steps


def _timed(
    cells: dict[str, dict[str, Any]], times: dict[str, list[float]], depth: int, micro: int
) -> None:
    """Each cell's rounds, median step and ratios, from rounds in which standard's steps and
    its own ran alike."""
    for key, cell in cells.items():
        kept = key.rsplit("|", 1)[1]
        cell["rounds"] = len(times[key])
        cell["step_s"] = statistics.median(times[key])
        cell["vs_standard"] = ratio(times[key], times[f"standard|{depth}|{micro}|{kept}"])
        none = times[key.replace("|sublayer", "|none")]
        cell["vs_none"] = None if kept == "none" else ratio(times[key], none)


def device_group(
    depth: int, micro: int, s: dict[str, Any], device: str, deadline: Deadline | None
) -> dict[str, dict[str, Any]]:
    """Every wiring with and without checkpointing at one depth and micro-batch. Standard's
    steps stay built through the group; each other wiring's (``timing_sets``) is built beside
    them, each cell's peak measured as it is built, timed with standard's in the same
    interleaved rounds (each set an equal part of the time left), then freed. Standard's row
    pools its rounds over the sets. Block AttnRes on the existing path
    (``benchmarks.common.existing_path`` says why)."""
    sets = timing_sets()
    unit, unit_steps = _build_cells(sets[0][0], depth, micro, s, device)
    unit_times: dict[str, list[float]] = {key: [] for key in unit_steps}
    cells: dict[str, dict[str, Any]] = {}
    for i, (_, *others) in enumerate(sets):
        built: dict[str, dict[str, Any]] = {}
        steps = dict(unit_steps)
        for arm in others:
            arm_cells, arm_steps = _build_cells(arm, depth, micro, s, device)
            built, steps = built | arm_cells, steps | arm_steps
            del arm_steps  # the set's models are held by ``steps`` alone, freed below
        part = None if deadline is None else Deadline.after(deadline.left() / (len(sets) - i))
        times = interleaved(steps, 0, s["rounds"], part)  # each step has run twice already
        del steps
        free(device)
        _timed(built, times, depth, micro)
        cells |= built
        for key in unit_times:
            unit_times[key] += times[key]
    del unit_steps
    free(device)
    _timed(unit, unit_times, depth, micro)
    return unit | cells


def _round_steps() -> int:
    """Steps one round of a group times: every set's closures, standard's in each."""
    return sum(len(arms) for arms in timing_sets()) * len(CHECKPOINTING)


def device_table(s: dict[str, Any], device: str, deadline: Deadline | None) -> dict[str, Any]:
    """Every (depth, micro-batch) group in order, each given an equal part of what is left for
    its rounds; under a ``deadline``, a group is skipped when the last one's time per step,
    scaled by depth, says its builds and one round would not finish before it. Tokens/s and MFU
    from each cell's median step."""
    cuda = device.startswith("cuda")
    peak = device_peak("cuda" if cuda else "cpu", "bf16-mixed")
    groups = [(depth, micro) for depth in s["depths"] for micro in s["micro_batches"]]
    cells: dict[str, Any] = {}
    skipped: list[str] = []
    last: tuple[int, float] | None = None  # (n_layers, seconds per step of one closure)
    closures = len(DEVICE_ARMS) * len(CHECKPOINTING)
    builds = 3 * closures  # each built (build, warm-up, peak): as long as a step, roughly
    for i, (depth, micro) in enumerate(groups):
        if deadline is not None and last is not None:
            needed = last[1] * depth / last[0] * (builds + _round_steps())  # and one round
            if deadline.left() < needed:
                skipped.append(f"n_layers={depth}, micro-batch {micro}")
                continue
        part = None if deadline is None else Deadline.after(deadline.left() / (len(groups) - i))
        start = time.monotonic()
        group = device_group(depth, micro, s, device, part)
        done = builds + _round_steps() * min(c["rounds"] for c in group.values())
        last = (depth, (time.monotonic() - start) / done)
        cells |= group
    tokens = s["batch"] * s["dims"]["seq_len"]
    for cell in cells.values():
        cell["tokens_per_s"] = tokens / cell["step_s"]
        cell["mfu"] = cell["flops_per_step"] / cell["step_s"] / peak.flops
    return {
        "peak_flops": peak.flops,
        "peak_source": peak.source,
        "cells": cells,
        "skipped": skipped,
    }


def run(quick: bool = False, device: str = "cpu", deadline: Deadline | None = None) -> dict:
    """On a CPU the float32 tables (with ``quick``, also the GPU path's step at tiny sizes); on
    a GPU the bf16-mixed table."""
    if device.startswith("cuda"):
        s = device_settings(quick)
        table = {"settings": s, **device_table(s, device, deadline)}
        return {"name": NAME, "device": device, "settings": s, **machine(), "device_step": table}
    torch.set_num_threads(max(1, torch.get_num_threads()))
    s = settings(quick)
    out: dict[str, Any] = {"name": NAME, "device": "cpu", "settings": s, **machine()}
    if quick:  # first: under a budget, the float32 tables are trimmed rather than this check
        tiny = device_settings(True)
        out["device_step"] = {"settings": tiny, **device_table(tiny, "cpu", deadline)}
    out["estimates"] = estimate_table(s, deadline)
    out["checkpointing"] = checkpoint_table(s, deadline)
    if not quick:
        wide = {**s, "dims": {**s["dims"], "vocab_size": GPT2_VOCAB}}
        out["estimates_gpt2_vocab"] = estimate_table(wide, deadline)
    return out


def _mib(x: float) -> str:
    return f"{x / 2**20:.1f}"


def markdown(result: dict) -> str:
    """The float32 tables (a CPU run), then the bf16-mixed table (a GPU run, or a quick CPU
    run's check of it)."""
    lines = _cpu_lines(result) if "estimates" in result else []
    if "device_step" in result:
        lines += ["", *_device_lines(result)] if lines else _device_lines(result)
    return "\n".join(lines)


def _cpu_lines(result: dict) -> list[str]:
    d = result["settings"]["dims"]
    lines = _estimate_lines(result["estimates"], d, d["vocab_size"])
    if "estimates_gpt2_vocab" in result:
        lines += ["", *_estimate_lines(result["estimates_gpt2_vocab"], d, GPT2_VOCAB)]
    checkpointing = _checkpoint_lines(result)
    lines += ["", *checkpointing] if checkpointing else []
    trimmed = _cpu_trimmed(result)
    return lines + ([f"\nTrimmed to the time budget: {trimmed}."] if trimmed else [])


def _estimate_lines(est: dict[str, Any], d: dict[str, Any], vocab: int) -> list[str]:
    worst = max(est.items(), key=lambda kv: abs(kv[1]["error"]))
    lines = [
        f"The memory plan against the measured peak of one float32 training step on a CPU "
        f"({MICRO_STEPS} micro-batches, clip, AdamW), d_model={d['d_model']}, "
        f"seq_len={d['seq_len']}, vocab {vocab:,}; MiB. Worst error: "
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
    return lines + md_table(header, rows)


def _cpu_trimmed(result: dict) -> str:
    """What a budget left out of the float32 tables: cells, depths, rounds."""
    s, parts = result["settings"], []
    planned = len(s["depths"]) * len(s["micro_batches"]) * len(ARMS)
    if len(result["estimates"]) < planned:
        parts.append(f"{len(result['estimates'])} of {planned} estimate cells")
    ck = result["checkpointing"]
    depths = {key.split("|")[1] for key in ck}
    if len(depths) < len(s["depths"]):
        parts.append(f"checkpointing at {len(depths)} of {len(s['depths'])} depths")
    ran = min((c.get("rounds", s["rounds"]) for c in ck.values()), default=s["rounds"])
    if ran < s["rounds"]:
        parts.append(f"checkpointing timed in {ran} of {s['rounds']} rounds")
    return "; ".join(parts)


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
    return lines + md_table(header, rows) if rows else []  # none: the budget left it out


def _device_lines(result: dict) -> list[str]:
    table = result["device_step"]
    s, cells = table["settings"], table["cells"]
    d = s["dims"]
    where = result.get("cuda") if result["device"].startswith("cuda") else None
    lines = [
        f"One training step as a GPU trial takes it (precision 'auto': bf16-mixed; global batch "
        f"{s['batch']} in micro-batches through trainers.training.accumulate, clip, AdamW), "
        f"d_model={d['d_model']}, n_heads={d['n_heads']}, seq_len={d['seq_len']}, vocab "
        f"{d['vocab_size']}, {where or result['device']}: the memory plan's estimate against the "
        f"measured peak, the median step time of {s['rounds']} interleaved rounds, tokens/s, and "
        f"MFU (trainers.flops model FLOPs, no recompute, over "
        f"{table['peak_flops'] / 1e12:,.1f} "
        f"TFLOP/s, {table['peak_source']}). vs standard: the step time over standard's at the "
        f"same micro-batch and checkpointing; vs none: over the same wiring's without "
        f"checkpointing; both in the same rounds.",
        "",
    ]
    lines = trimmed_caption(lines, _device_trimmed(table))
    header = ["arm", "n_layers", "micro-batch", "checkpointing", "estimate", "measured", "error"]
    header += ["step ms", "tokens/s", "MFU", "vs standard", "vs none"]
    return lines + md_table(header, [_device_row(k, c) for k, c in cells.items()])


def _device_row(key: str, c: dict[str, Any]) -> list[str]:
    arm, depth, micro, how = key.split("|")
    return [
        f"`{arm}`",
        depth,
        micro,
        how,
        gib(c["estimate"]),
        gib(c["measured"]),
        f"{100 * c['error']:+.1f}%",
        f"{1000 * c['step_s']:.0f}",
        f"{c['tokens_per_s']:,.0f}",
        f"{c['mfu']:.0%}",
        fmt_ratio(c["vs_standard"]),
        fmt_ratio(c["vs_none"]),
    ]


def _device_trimmed(table: dict[str, Any]) -> str:
    """What a budget left out of the bf16-mixed table: skipped groups, then fewer rounds."""
    planned = table["settings"]["rounds"]
    parts = [f"{group} skipped" for group in table["skipped"]]
    ran: dict[str, int] = {}
    for key, cell in table["cells"].items():
        _, depth, micro, _ = key.split("|")
        group = f"n_layers={depth}, micro-batch {micro}"
        ran[group] = min(ran.get(group, planned), cell["rounds"])
    parts += [f"{group} ran {n} of {planned} rounds" for group, n in ran.items() if n < planned]
    return "; ".join(parts)


def main() -> None:
    cli(NAME, __doc__ or NAME, run, markdown)


if __name__ == "__main__":
    main()
