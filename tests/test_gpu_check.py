"""What ``benchmarks/gpu/gpu_check.sh`` runs on a lent GPU, checked without one: the memory plan's
GPU settings are the issue's and fit an H200 with margin, every stage takes a budget, and the dry
run's printout lists every stage."""

from __future__ import annotations

import inspect
import re
from importlib import import_module
from pathlib import Path
from typing import Any

import pytest
import torch

from benchmarks.gpu import gpu_plan
from benchmarks.model import memory_plan as mp
from trainers.measure.memory_plan import memory_plan

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu" / "gpu_check.sh"
H200_BYTES = 139 * 2**30


def _stages() -> list[str]:
    found = re.search(r"^benches=\((.*)\)$", SCRIPT.read_text(), re.MULTILINE)
    assert found, "gpu_check.sh names its benchmarks in one benches=(...) line"
    return found.group(1).split()


def test_memory_plans_gpu_settings_are_the_issues() -> None:
    """d_model 1024, n_layers 32 first, seq_len 1024, a global batch of 16 in micro-batches of
    4 and 8, checkpointing none and sublayer, for standard, Block and Full AttnRes and mHC, in
    'auto' precision: bf16-mixed on a GPU."""
    s = mp.settings(False, "cuda")
    assert s["dims"]["d_model"] == 1024 and s["dims"]["seq_len"] == 1024
    assert s["depths"][0] == 32 and s["batch"] == 16 and s["micro_batches"] == [4, 8]
    assert mp.DEVICE_ARMS == ("standard", "block_attnres", "attnres", "mhc")
    assert mp.CHECKPOINTING == ("none", "sublayer")
    cfg = mp.device_config("standard", 32, 4, s, "none")
    assert cfg.train.precision == "auto" and memory_plan(cfg, gpu=True).precision == "bf16-mixed"
    assert mp.settings(True, "cpu") != s and mp.settings(False) != s  # the CPU's own


def test_a_memory_plan_group_fits_an_h200_with_half_to_spare() -> None:
    """A (depth, micro-batch) group keeps all eight models between their steps (parameters and
    AdamW's states); with the largest cell's planned step on top, the plan stays under half of
    an H200's memory."""
    s = mp.settings(False, "cuda")
    for depth in s["depths"]:
        for micro in s["micro_batches"]:
            plans = [
                memory_plan(mp.device_config(arm, depth, micro, s, how), gpu=True)
                for arm in mp.DEVICE_ARMS
                for how in mp.CHECKPOINTING
            ]
            resident = sum(p.params + p.optimizer for p in plans)
            largest = max(p.total - p.params - p.optimizer for p in plans)
            assert resident + largest < H200_BYTES / 2, (depth, micro)


def test_every_stage_takes_a_budget_and_a_device() -> None:
    """Each benchmark gpu_check.sh runs is budgeted (its run takes a deadline: --budget-s) and
    runs on a GPU (its run takes a device), the memory plan among them."""
    assert "model.memory_plan" in _stages()
    for name in _stages():
        params = inspect.signature(import_module(f"benchmarks.{name}").run).parameters
        assert {"deadline", "device"} <= set(params), name


def test_the_dry_runs_printout_lists_every_stage() -> None:
    """benchmarks.gpu.gpu_plan, what the dry run prints, has a line for every stage, and the memory
    plan's names its GPU settings."""
    lines = gpu_plan.plan()
    for name in (s.rsplit(".", 1)[-1] for s in _stages()):
        assert any(line.startswith(f"  {name}:") for line in lines), name
    line = next(x for x in lines if x.startswith("  memory_plan:"))
    assert "d_model 1024" in line and "n_layers 32" in line and "bf16-mixed" in line


def test_the_general_stages_keep_block_attnres_off_the_fused_kernels() -> None:
    """``existing_path`` overrides even a stream forced onto the fused path: with the two phases
    swapped for a function that fails when called, a pinned model never calls it and gives the
    unpinned existing path's logits exactly. (On a GPU with flash-attn-res, the package's
    autotuning on every new shape took the first check past each stage's budget.)"""
    from benchmarks.common import config, existing_path
    from trainers.model.transformer import DeepTransformer

    cfg = config("block_attnres", d_model=16, n_heads=2, n_layers=2, seq_len=8, vocab_size=32)
    torch.manual_seed(0)
    model = DeepTransformer(cfg)
    idx = torch.randint(0, cfg.vocab_size, (2, cfg.seq_len))
    expected = model(idx)

    def phase(*_: object) -> tuple[torch.Tensor, torch.Tensor]:
        raise AssertionError("the fused kernels ran")

    stream: Any = model.stream
    stream.fused, stream.kernels = True, (phase, phase)
    with pytest.raises(AssertionError, match="the fused kernels ran"):
        model(idx)  # forced on, it takes them
    assert torch.equal(existing_path(model)(idx), expected)  # pinned, it does not
    standard = DeepTransformer(config("standard", d_model=16, n_heads=2, n_layers=2, seq_len=8))
    assert not hasattr(existing_path(standard).stream, "fused")


def test_the_headline_table_reads_eager_then_compiled_then_fused_per_shape() -> None:
    """The table's order: each shape's eager rows, then its compiled rows, then the fused rows
    (Full and Block AttnRes, the wirings with kernels); GPT-2 small first, at its shape."""
    from benchmarks.gpu import gpu_table as gt

    order = list(gt.cells(gt.SHAPES))
    assert order[0] == ("gpt2_small", "eager", "standard")
    first = [(m, w) for s, m, w in order if s == "gpt2_small"]
    modes = [m for m, _ in first]
    assert modes == sorted(modes, key=gt.MODES.index)
    assert [w for m, w in first if m == "fused"] == ["attnres", "block_attnres"]
    assert len(order) == len(gt.SHAPES) * (2 * len(gt.WIRINGS) + 2)
    small = gt.shape_config("standard", gt.SHAPES["gpt2_small"])
    assert (small.d_model, small.n_layers, small.seq_len, small.vocab_size) == (
        768,
        12,
        1024,
        50304,
    )


def test_the_micro_batch_fits_every_wiring_of_the_shape() -> None:
    """On an H200's share, the chosen micro-batch's plan fits every wiring and the next larger
    divisor of the batch does not fit all of them (so the largest that fits was chosen)."""
    from benchmarks.gpu import gpu_table as gt
    from trainers.config import RunConfig, TrainConfig
    from trainers.measure.memory_fit import GPU_HEADROOM

    budget = GPU_HEADROOM.usable(H200_BYTES)
    for dims in gt.SHAPES.values():
        micro = gt.micro_batch(dims, budget, quick=False)

        def plans(m: int, dims: dict[str, int] = dims) -> list[float]:
            return [
                memory_plan(
                    RunConfig(model=gt.shape_config(w, dims), train=TrainConfig(batch_size=m)),
                    gpu=True,
                ).total
                for w in gt.WIRINGS
            ]

        assert max(plans(micro)) <= budget
        larger = [m for m in range(micro + 1, gt.BATCH + 1) if gt.BATCH % m == 0]
        assert not larger or max(plans(larger[0])) > budget


def test_a_table_stopped_mid_way_keeps_every_row_it_measured(tmp_path: Path) -> None:
    """The quick table on the CPU, killed (SIGKILL, as a timeout's last resort) once a few rows
    are written: the rows already measured stay on disk, each a whole JSON line with its
    figures, and the Markdown table holds the same rows."""
    import json
    import os
    import signal
    import subprocess
    import sys
    import time

    root = SCRIPT.parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    cmd = [sys.executable, "-m", "benchmarks.gpu.gpu_table", "--quick", "--out", str(tmp_path)]
    proc = subprocess.Popen(
        cmd, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    rows = tmp_path / "headline.jsonl"
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None:
            if rows.exists() and len(rows.read_text().splitlines()) >= 3:
                break
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    kept = [json.loads(line) for line in rows.read_text().splitlines()]
    assert len(kept) >= 3
    assert [(r["mode"], r["wiring"]) for r in kept[:3]] == [
        ("eager", "standard"),
        ("eager", "attnres"),
        ("eager", "block_attnres"),
    ]
    assert all(r["step_s"] > 0 and r["tokens_per_s"] > 0 and r["mfu"] > 0 for r in kept)
    assert kept[0]["ratio"] == 1.0
    table = (tmp_path / "headline.md").read_text().splitlines()
    assert len(table) == 2 + len(kept)  # the header, its rule, one line per kept row


def test_rows_past_the_budget_are_written_as_skipped(tmp_path: Path) -> None:
    """A spent budget measures nothing and still writes the whole table, each row saying why;
    the fused row on a CPU gives the dispatch rule's reason."""
    from benchmarks.common import Deadline
    from benchmarks.gpu import gpu_table as gt

    rows = gt.run(True, "cpu", tmp_path, Deadline.after(-1))
    assert len(rows) == len(list(gt.cells(gt.QUICK_SHAPES)))
    assert all(r.step_s is None and r.note.startswith("skipped") for r in rows)
    assert len((tmp_path / "headline.jsonl").read_text().splitlines()) == len(rows)
    fused = gt._fused_reason(gt.shape_config("block_attnres", gt.QUICK_SHAPES["tiny"]), "cpu")
    assert "CUDA only" in fused
