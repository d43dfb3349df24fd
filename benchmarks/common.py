"""What the benchmark scripts share: the machine description, an arm's config, device-aware
training and forward steps, interleaved timing within an optional deadline, ratios, and the
command line (``--quick``, ``--device``, ``--out``, ``--budget-s``; JSON to
``<out>/<name>.json``, a Markdown table to stdout)."""

from __future__ import annotations

import argparse
import gc
import inspect
import json
import os
import platform
import statistics
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from benchmarks.arms import ARMS
from benchmarks.variant_step_time import step_fn, time_once
from trainers.config import ModelConfig
from trainers.model.transformer import DeepTransformer

Step = Callable[[], object]  # what a step returns (a loss, or nothing) goes unread


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    return {
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
        "cuda": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
    }


def config(arm: str, **dims: Any) -> ModelConfig:
    """The arm's config at these dimensions; Block AttnRes keeps N=8 blocks unless there are fewer
    sublayers than that (the quick settings' n_layers=2 gets N=4)."""
    blocks = min(8, 2 * dims["n_layers"])
    return ModelConfig(attnres_blocks=blocks, **dims, **ARMS[arm])


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def on_path(model: DeepTransformer, fused: bool | None) -> DeepTransformer:
    """``model`` with Block AttnRes's path pinned: True the fused kernels, False the existing
    path, None as the dispatch rule decides (``trainers.residual.attnres.fused``). Other wirings
    have one path and are returned as they are."""
    if fused is not None and hasattr(model.stream, "fused"):
        stream: Any = model.stream  # nn.Module.__getattr__ types it Tensor | Module
        stream.fused = fused
    return model


def existing_path(model: DeepTransformer) -> DeepTransformer:
    """``model`` with Block AttnRes kept on the existing path where flash-attn-res would take it
    (CUDA, bf16): these benchmarks measure the wirings as the CPU figures do, and the package's
    Triton autotuning costs over 100 s per new shape in a process (measured on an H200, 2026-12-04),
    more than a stage's budget. ``benchmarks.gpu.fused_block`` measures the fused path."""
    return on_path(model, fused=False)


def train_step(cfg: ModelConfig, batch: int, device: str) -> Step:
    """One training step as a closure; on CUDA in bf16 autocast, ending in a synchronize so that
    ``time_once`` reads the clock after the work. Block AttnRes on the existing path."""
    if device == "cpu":
        return step_fn(cfg, batch)[1]  # type: ignore[return-value]
    return model_step(existing_path(DeepTransformer(cfg).to(device)), batch, device)


def model_step(
    model: DeepTransformer, batch: int, device: str, fused_adam: bool = False
) -> Callable[[], torch.Tensor]:
    """One training step of ``model`` on a fixed batch of random tokens, as a closure returning
    its loss (detached): the forward (under bf16 autocast on CUDA), cross-entropy, backward and
    AdamW at lr 1e-4 (its fused CUDA kernel where ``fused_adam``, as a trial's optimizer has
    it), ending in a synchronize so that ``time_once`` reads the clock after the work."""
    cuda = device.startswith("cuda")
    opt = torch.optim.AdamW(
        model.parameters(), lr=1e-4, fused=True if fused_adam and cuda else None
    )
    idx = torch.randint(0, model.cfg.vocab_size, (batch, model.cfg.seq_len), device=device)
    kind = torch.device(device).type

    def step() -> torch.Tensor:
        with torch.autocast(kind, torch.bfloat16, enabled=cuda):
            logits = model(idx)
        loss = F.cross_entropy(logits.float().flatten(0, 1), idx.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync(device)
        return loss.detach()

    return step


def forward_step(cfg: ModelConfig, batch: int, device: str) -> Step:
    """One forward pass (prefill) under ``inference_mode``; bf16 autocast on CUDA; Block AttnRes
    on the existing path."""
    model = existing_path(DeepTransformer(cfg).to(device).eval())
    idx = torch.randint(0, cfg.vocab_size, (batch, cfg.seq_len), device=device)
    cuda = device.startswith("cuda")

    def step() -> None:
        with torch.inference_mode(), torch.autocast("cuda", torch.bfloat16, enabled=cuda):
            model(idx)
        sync(device)

    return step


@dataclass(frozen=True)
class Deadline:
    """When a benchmark must stop starting work (``--budget-s``): rounds and depths beyond it
    are trimmed, and the result says which."""

    at: float  # time.monotonic() seconds

    @staticmethod
    def after(seconds: float) -> Deadline:
        return Deadline(time.monotonic() + seconds)

    def left(self) -> float:
        return self.at - time.monotonic()


def interleaved(
    steps: Mapping[str, Step],
    warmup: int,
    rounds: int,
    deadline: Deadline | None = None,
    rotate: bool = False,
) -> dict[str, list[float]]:
    """Seconds per step of each closure: ``warmup`` untimed calls each, then ``rounds`` rounds in
    which every closure is timed once (one call), in turn, so machine noise hits all alike;
    ``rotate`` starts round i at the i-th closure, so none always follows the same one. Past
    ``deadline`` no further round starts (the first always runs: a figure needs one)."""
    for step in steps.values():
        for _ in range(warmup):
            step()
    order = list(steps)
    times: dict[str, list[float]] = {k: [] for k in order}
    for i in range(rounds):
        if i and deadline is not None and deadline.left() <= 0:
            break
        shift = i % len(order) if rotate else 0
        for k in order[shift:] + order[:shift]:
            times[k].append(time_once(steps[k], 1))
    return times


def ratio(times: list[float], base: list[float]) -> float:
    """Median over rounds of the per-round ratio ``times / base``."""
    return statistics.median(a / b for a, b in zip(times, base, strict=True))


def free(device: str) -> None:
    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()


def cli(name: str, doc: str, run: Callable[..., dict], markdown: Callable[[dict], str]) -> None:
    """The common command line: ``--quick``, ``--device``, ``--out`` and, for a benchmark whose
    ``run`` takes a ``deadline``, ``--budget-s``; writes ``<out>/<name>.json`` and prints the
    Markdown table."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny settings: checks the script runs")
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    budgeted = "deadline" in inspect.signature(run).parameters
    if budgeted:
        ap.add_argument(
            "--budget-s",
            type=float,
            default=0.0,
            help="seconds to stay within: fewer rounds, then fewer depths (0: no budget)",
        )
    args = ap.parse_args()
    torch.manual_seed(0)
    kwargs: dict[str, Any] = {"device": args.device} if args.device != "cpu" else {}
    if budgeted and args.budget_s > 0:
        kwargs["deadline"] = Deadline.after(args.budget_s)
    result = run(quick=args.quick, **kwargs)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    print(markdown(result))


def cpu_peak_bytes(fn: Callable[[], object]) -> float:
    """The highest total of tensor bytes ``fn`` allocated and held at once, above what was held
    before it: the profiler's allocation records ("[memory]" events: + on allocation, - on free)
    summed in time order (a CPU keeps no peak counter). NaN where this torch's profiler does not
    expose them."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    try:
        records = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
        records.sort(key=lambda e: e.start_ns())
        held = peak = 0
        for e in records:
            held += e.nbytes()
            peak = max(peak, held)
    except AttributeError:  # a private surface: a torch without it gives no figure, not a wrong one
        return float("nan")
    return float(peak)


def md_table(header: list[str], rows: Iterable[list[str]]) -> list[str]:
    """A Markdown table's lines: the header, its rule, one line per row."""

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(cells) + " |"

    return [line(header), "| --- " * len(header) + "|", *(line(r) for r in rows)]


def trimmed_caption(lines: list[str], trimmed: str) -> list[str]:
    """A table's caption ``lines`` (ending in a blank line) with what a time budget left out,
    if anything, as its last line: ``Trimmed to the time budget: ...``."""
    return [*lines[:-1], f"Trimmed to the time budget: {trimmed}.", ""] if trimmed else lines


def fmt_ratio(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}x"
