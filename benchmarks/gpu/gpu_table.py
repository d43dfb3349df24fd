"""The GPU check's headline table: per wiring, a training step eager, compiled and fused (Full and
Block AttnRes), with its tokens/s, MFU and ratio to standard's step in the same mode, at GPT-2
small (d_model 768, 12 layers, context 1024, vocabulary 50,304) and at d_model 1024 / 32 layers;
then the memory plan's estimate beside the measured peak of the same cells.

Every row is printed (flushed) and appended to ``<out>/headline.jsonl`` and ``headline.md`` the
moment it is measured, so a run stopped at its timeout keeps every row it finished; rows are
measured in the order a reader needs them (GPT-2 small eager, then compiled, then fused, then the
deep shape). A row past the budget is written as skipped, saying so. The first step, which pays
``torch.compile``'s compilation or Triton's autotuning, is reported apart from the timed steps.

A step is one micro-batch's forward (bf16 autocast on CUDA), cross-entropy, backward and fused
AdamW update: the micro-batch is the largest the memory plan fits on this device for every
wiring of the shape (``trainers.measure.memory_fit``), so that each shape's rows do equal work.
MFU is ``trainers.flops`` model FLOPs per token times tokens/s over the device's dense peak
(``trainers.measure.device_cost``), the convention every trial records.

Needs torch and this checkout only (no Ray, MLflow or Optuna: the GPU image has none).

    python -m benchmarks.gpu.gpu_table --device cuda --out DIR [--budget-s S]
    python -m benchmarks.gpu.gpu_table --quick          # the CPU dry run: tiny shape, same rows
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from benchmarks.common import Deadline, config, free, model_step, on_path
from benchmarks.variant_step_time import time_once
from trainers.config import DepthPath, ModelConfig, RunConfig, TrainConfig
from trainers.flops import flops_per_token
from trainers.measure.memory_fit import GPU_HEADROOM
from trainers.model.transformer import DeepTransformer

WIRINGS = ("standard", "attnres", "block_attnres", "hyper", "mhc", "layerscale")
FUSED = ("attnres", "block_attnres")  # the wirings flash-attn-res's kernels mix
MODES = ("eager", "compiled", "fused")
VOCAB = 50304  # GPT-2's 50,257 padded to a multiple of 64
SHAPES: dict[str, dict[str, int]] = {
    "gpt2_small": {"d_model": 768, "n_heads": 12, "n_layers": 12, "seq_len": 1024},
    "d1024_L32": {"d_model": 1024, "n_heads": 16, "n_layers": 32, "seq_len": 1024},
}
QUICK_SHAPES: dict[str, dict[str, int]] = {
    "tiny": {"d_model": 32, "n_heads": 2, "n_layers": 2, "seq_len": 32, "vocab_size": 256}
}
# The batch the micro-batch is chosen within (a divisor of it), under the headroom 'auto'
# micro-batches keep back (trainers.measure.memory_fit).
BATCH = 64


@dataclass
class Row:
    """One measured (or skipped) cell: times in seconds, memory in bytes."""

    shape: str
    wiring: str
    mode: str
    micro_batch: int
    step_s: float | None = None
    first_step_s: float | None = None  # compilation or autotuning included
    tokens_per_s: float | None = None
    mfu: float | None = None
    # step time over standard's in the same shape and mode (fused: over compiled standard's)
    ratio: float | None = None
    peak_bytes: float | None = None
    reserved_bytes: float | None = None  # the caching allocator's peak: what it held to serve it
    plan_bytes: float | None = None
    note: str = ""  # why the row has no figures, or what path it took

    def cells(self) -> list[str]:
        def num(x: float | None, fmt: str) -> str:
            return "–" if x is None else format(x, fmt)

        gib = None if self.peak_bytes is None else self.peak_bytes / 2**30
        held = None if self.reserved_bytes is None else self.reserved_bytes / 2**30
        plan = None if self.plan_bytes is None else self.plan_bytes / 2**30
        return [
            self.shape,
            self.wiring,
            self.mode,
            str(self.micro_batch),
            num(None if self.step_s is None else 1e3 * self.step_s, ".1f"),
            num(self.tokens_per_s, ",.0f"),
            num(None if self.mfu is None else 100 * self.mfu, ".1f"),
            num(self.ratio, ".2f"),
            num(self.first_step_s, ".1f"),
            num(gib, ".2f"),
            num(held, ".2f"),
            num(plan, ".2f"),
            self.note,
        ]


HEADER = [
    "shape",
    "wiring",
    "mode",
    "micro",
    "step (ms)",
    "tokens/s",
    "MFU %",
    "vs standard",
    "first step (s)",
    "peak GiB",
    "reserved GiB",
    "plan GiB",
    "note",
]


@dataclass
class Writer:
    """Appends each row to ``<out>/headline.jsonl`` and ``headline.md`` and prints it, flushed."""

    out: Path
    rows: list[Row] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "headline.jsonl").write_text("")
        header = ["| " + " | ".join(HEADER) + " |", "| --- " * len(HEADER) + "|"]
        (self.out / "headline.md").write_text("\n".join(header) + "\n")
        print("\n".join(header), flush=True)

    def add(self, row: Row) -> None:
        self.rows.append(row)
        with (self.out / "headline.jsonl").open("a") as f:
            f.write(json.dumps(asdict(row)) + "\n")
        line = "| " + " | ".join(row.cells()) + " |"
        with (self.out / "headline.md").open("a") as f:
            f.write(line + "\n")
        print(line, flush=True)


def shape_config(wiring: str, dims: dict[str, int]) -> ModelConfig:
    return config(wiring, **{"vocab_size": VOCAB, **dims})


def micro_batch(dims: dict[str, int], device_bytes: float, quick: bool) -> int:
    """The largest micro-batch dividing ``BATCH`` whose memory plan (one micro-batch a step, no
    checkpointing) fits ``device_bytes`` for every wiring; 1 if none does."""
    if quick:
        return 2
    from trainers.measure.memory_plan import memory_plan

    for micro in (m for m in range(BATCH, 0, -1) if BATCH % m == 0):
        runs = (
            RunConfig(model=shape_config(w, dims), train=TrainConfig(batch_size=micro))
            for w in WIRINGS
        )
        if all(memory_plan(r, gpu=True).total <= device_bytes for r in runs):
            return micro
    return 1


def _fused_reason(cfg: ModelConfig, device: str) -> str:
    """Why the fused kernels cannot mix this cell ("" where they can)."""
    from trainers.residual.attnres.fused import dispatch

    verdict = dispatch(cfg, device, "bfloat16")
    return "" if verdict else verdict.reason


def model_for(cfg: ModelConfig, mode: str, device: str) -> DeepTransformer:
    """The model on ``mode``'s path: eager and compiled on the existing one (compiled: as
    ``train.compile`` does it), fused with the kernels pinned."""
    model = on_path(DeepTransformer(cfg).to(device), mode == "fused")
    if mode == "compiled":
        model.compile()
    return model


def measure(
    cfg: ModelConfig, mode: str, micro: int, device: str, timed: int, peak: float
) -> dict[str, Any]:
    """First step, then two warm-up steps, then the median of ``timed`` steps."""
    from trainers.measure.device_cost import peak_memory_mb, reset_peak_memory

    model = model_for(cfg, mode, device)
    step = model_step(model, micro, device, fused_adam=True)
    reset_peak_memory(device)
    first = time_once(step, 1)
    time_once(step, 2)  # warm-up
    times = [time_once(step, 1) for _ in range(timed)]
    median = statistics.median(times)
    tokens = micro * cfg.seq_len / median
    return {
        "step_s": median,
        "first_step_s": first,
        "tokens_per_s": tokens,
        "mfu": flops_per_token(cfg).total * tokens / peak,
        "peak_bytes": peak_memory_mb(device) * 2**20 if device == "cuda" else None,
        "reserved_bytes": float(torch.cuda.max_memory_reserved()) if device == "cuda" else None,
    }


def cells(shapes: dict[str, dict[str, int]]) -> Iterator[tuple[str, str, str]]:
    """(shape, mode, wiring) in the order the table is read: each shape's eager rows, then its
    compiled rows, then fused (Full and Block AttnRes, the wirings with kernels)."""
    for shape in shapes:
        for mode in MODES:
            for wiring in WIRINGS:
                if mode != "fused" or wiring in FUSED:
                    yield shape, mode, wiring


def run(
    quick: bool, device: str, out: Path, deadline: Deadline | None = None, timed: int = 5
) -> list[Row]:
    from trainers.measure.device_cost import device_peak
    from trainers.measure.memory_plan import memory_plan

    shapes = QUICK_SHAPES if quick else SHAPES
    writer = Writer(out)
    peak = device_peak(device, "bf16-mixed" if device == "cuda" else "32-true").flops
    total = torch.cuda.get_device_properties(0).total_memory if device == "cuda" else 24 * 2**30
    usable = GPU_HEADROOM.usable(int(total))  # the plan's own headroom: what 'auto' keeps back
    if device == "cuda":
        _context(out, int(total))
    micros = {s: micro_batch(d, usable, quick) for s, d in shapes.items()}
    standard: dict[tuple[str, str], float] = {}
    for shape, mode, wiring in cells(shapes):
        cfg = shape_config(wiring, shapes[shape])
        row = Row(shape, wiring, mode, micros[shape])
        why = _fused_reason(cfg, device) if mode == "fused" else ""
        if deadline is not None and deadline.left() <= 0:
            row.note = "skipped: past the time budget"
        elif why:
            row.note = f"not fused: {why}"
        else:
            row = _measured(row, cfg, device, timed, peak, standard)
            path: DepthPath = "fused" if mode == "fused" else "torch"  # the path measured
            train = TrainConfig(batch_size=row.micro_batch, depth_path=path)
            run_cfg = RunConfig(model=cfg, train=train)
            row.plan_bytes = float(memory_plan(run_cfg, gpu=device == "cuda").total)
        writer.add(row)
    return writer.rows


def _context(out: Path, total: int) -> None:
    """The headroom's first term measured: what the GPU holds once this process has started
    CUDA (its context and workspaces; anything else on the device), beside the stated figure,
    into ``<out>/headroom.json`` and printed. The allocator's reserve is each row's reserved
    over its peak."""
    torch.zeros(1, device="cuda")  # CUDA started, as a trial's first tensor starts it
    free, _ = torch.cuda.mem_get_info()
    held = {"total": total, "context": total - free, "stated_context": GPU_HEADROOM.context}
    (out / "headroom.json").write_text(json.dumps(held) + "\n")
    print(
        f"headroom: {held['context'] / 2**30:.2f} GiB held once CUDA started (stated: "
        f"{GPU_HEADROOM.context / 2**30:.2f} GiB) of {total / 2**30:.1f} GiB",
        flush=True,
    )


def _measured(
    row: Row, cfg: ModelConfig, device: str, timed: int, peak: float, standard: dict
) -> Row:
    """``row`` with its figures, or with the error's first line where the step failed."""
    try:
        got = measure(cfg, row.mode, row.micro_batch, device, timed, peak)
    except Exception as e:  # a failed cell is a row saying why, never a lost table
        row.note = f"failed: {type(e).__name__}: {str(e).splitlines()[0][:120]}"
        return row
    finally:
        free(device)
    row = replace(row, **got)
    if row.wiring == "standard":
        standard[(row.shape, row.mode)] = got["step_s"]
    ref = standard.get((row.shape, "compiled" if row.mode == "fused" else row.mode))
    if ref:
        row.ratio = got["step_s"] / ref
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the tiny shape: checks the script")
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/gpu"))
    ap.add_argument("--budget-s", type=float, default=0.0, help="no new row after this (0: none)")
    ap.add_argument("--timed", type=int, default=5, help="timed steps per row")
    args = ap.parse_args()
    torch.manual_seed(0)
    deadline = Deadline.after(args.budget_s) if args.budget_s > 0 else None
    run(args.quick, args.device, args.out, deadline, args.timed)


if __name__ == "__main__":
    main()
