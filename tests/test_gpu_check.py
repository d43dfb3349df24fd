"""What ``benchmarks/gpu_check.sh`` runs on a lent GPU, checked without one: the memory plan's
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

from benchmarks import gpu_plan
from benchmarks import memory_plan as mp
from trainers.measure.memory_plan import memory_plan

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_check.sh"
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
    assert "memory_plan" in _stages()
    for name in _stages():
        params = inspect.signature(import_module(f"benchmarks.{name}").run).parameters
        assert {"deadline", "device"} <= set(params), name


def test_the_dry_runs_printout_lists_every_stage() -> None:
    """benchmarks.gpu_plan, what the dry run prints, has a line for every stage, and the memory
    plan's names its GPU settings."""
    lines = gpu_plan.plan()
    for name in _stages():
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
