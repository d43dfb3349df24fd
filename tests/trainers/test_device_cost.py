"""What a run cost: the peak table and its override, the CPU's measured peak, the memory peak's
reset, and a real fit's recorded cost (trainers/measure/device_cost.py)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from trainers.config_io import from_dict
from trainers.measure.device_cost import (
    OVERRIDE,
    PEAK_TABLE,
    CostMeter,
    compute_dtype,
    device_peak,
    matmul_flops,
    peak_memory_mb,
    reset_peak_memory,
    table_peak,
)
from trainers.training.run import train

T = 1e12


@pytest.mark.parametrize(
    ("name", "dtype", "row", "flops"),
    [
        ("NVIDIA H100 80GB HBM3", "bf16", "H100 SXM", 989.5 * T),
        ("NVIDIA H100 PCIe", "bf16", "H100 PCIe", 756.5 * T),
        ("NVIDIA H100 NVL", "fp32", "H100 NVL", 60 * T),
        ("NVIDIA H200", "bf16", "H200 SXM", 989.5 * T),
        ("NVIDIA GH200 480GB", "bf16", "GH200", 989.5 * T),
        ("NVIDIA A100-SXM4-80GB", "fp32", "A100", 19.5 * T),
        ("NVIDIA A100 80GB PCIe", "bf16", "A100", 312 * T),
        ("NVIDIA L40S", "bf16", "L40S", 362.05 * T),
        ("NVIDIA L4", "fp32", "L4", 30.3 * T),
        ("NVIDIA A10", "bf16", "A10", 125 * T),
    ],
)
def test_table_finds_the_most_specific_row(name: str, dtype: str, row: str, flops: float) -> None:
    """Each device name reads its own row (NVL/PCIe/GH200 before the plain name, L40S not L4),
    in the precision's column."""
    peak = table_peak(name, dtype)  # type: ignore[arg-type]
    assert peak is not None and peak.flops == flops
    assert peak.source == f"table: {row} {dtype}"


def test_unlisted_devices_and_the_dtype_of_each_precision() -> None:
    """A name in no row (the A10G, an unknown card) finds none; 16-bit precisions read the bf16
    column, the others fp32; every row's bf16 peak is above its fp32 one."""
    assert table_peak("NVIDIA A10G", "bf16") is None
    assert table_peak("Some Future GPU", "fp32") is None
    assert [compute_dtype(p) for p in ("bf16-mixed", "bf16-true", "16-mixed", "32-true")] == [
        "bf16",
        "bf16",
        "bf16",
        "fp32",
    ]
    assert all(r.bf16 > r.fp32 > 0 for r in PEAK_TABLE)


def test_peak_flops_overrides_the_device_and_is_checked() -> None:
    """--peak-flops replaces the peak on any device and says so; a non-positive or non-finite
    figure is refused naming the option."""
    assert device_peak("cpu", "32-true", 2e12).flops == 2e12
    assert device_peak("cuda", "bf16-mixed", 2e12).source == OVERRIDE  # no GPU is looked at
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="--peak-flops"):
            device_peak("cpu", "32-true", bad)


def test_cpu_peak_is_measured_once_per_thread_count() -> None:
    """The CPU peak is a positive finite FLOP/s from a timed fp32 matmul, and a second ask is
    the cached figure, not a second measurement."""
    threads = torch.get_num_threads()
    first = device_peak("cpu", "32-true")
    hits = matmul_flops.cache_info().hits
    assert 0 < first.flops < math.inf
    assert first.source == f"measured: cpu fp32 matmul, {threads} threads"
    assert device_peak("cpu", "32-true") == first
    assert matmul_flops.cache_info().hits == hits + 1


def test_memory_peak_resets_to_the_current_footprint() -> None:
    """After a large buffer is freed, the reset brings the CPU peak back below it: a reused
    worker's next trial does not inherit the last one's peak."""
    buffer = torch.ones(64 * 2**20 // 4)  # 64 MB, touched
    held = peak_memory_mb("cpu")
    del buffer
    reset_peak_memory("cpu")
    assert 0 < peak_memory_mb("cpu") < held - 32


def test_no_step_trained_gives_no_rate() -> None:
    """A trial resumed at its last step trains nothing in its final attempt: tokens/s and the
    MFU it would divide into are NaN (shown as a dash), never an absurd rate over no steps."""
    from trainers.training.run import _rate

    assert math.isnan(_rate(0.0, 3.0, 0))
    assert _rate(1200.0, 3.0, 10) == 400.0
    meter = CostMeter("cpu", "32-true")
    meter.start()
    assert math.isnan(meter.finish(_rate(0.0, 3.0, 0)).mfu)


def test_cpu_peak_is_what_the_fit_added() -> None:
    """On a CPU the meter reports the rise of the resident set over the fit, not the process's
    footprint: a fit that touches a 64 MB buffer reads about 64 MB, and one that allocates
    nothing reads far less, whatever the process held before (a reused worker's history).
    "About": the rise is the buffer less whatever the process handed back meanwhile (glibc
    trimming freed heap, another thread's pages); a CI run read 63.94 of 64, so the bound
    allows 4 MB of that, still far above the idle fit's bound of 16."""
    held = torch.ones(128 * 2**20 // 4)  # the process's earlier footprint, kept
    meter = CostMeter("cpu", "32-true")
    meter.start()
    buffer = torch.ones(64 * 2**20 // 4)
    busy = meter.finish(achieved_flops=1.0).peak_mem_mb
    del buffer
    meter.start()
    idle = meter.finish(achieved_flops=1.0).peak_mem_mb
    assert busy >= 60 > 16 > idle >= 0
    del held


def test_a_real_fit_records_its_cost(tmp_path: Path) -> None:
    """A tiny CPU fit records positive peak memory, MFU in (0, 1] equal to FLOPs per token x
    tokens/s / peak, its threads as devices in core-hours, and no NVML figures."""
    cfg = from_dict(
        {
            "model": {"d_model": 32, "n_heads": 2, "n_layers": 2, "seq_len": 32},
            "train": {
                "batch_size": 8,
                "max_steps": 6,
                "val_every": 6,
                "val_batches": 1,
                "warmup_steps": 2,
                "accelerator": "cpu",
                "diagnostics_every": 0,
            },
            "data": {"source": "synthetic", "hops": 1, "n_symbols": 8},
        }
    )
    result, _ = train(cfg, tmp_path / "run", progress=False)
    cost = result.cost
    assert cost is not None and cost.peak_mem_mb > 0
    assert 0 < cost.mfu <= 1
    expected = result.flops_per_token * result.tokens_per_s / cost.peak_flops
    assert cost.mfu == pytest.approx(expected, rel=1e-9)
    assert result.timed_steps == result.steps == 6  # a fresh run times every step it trains
    assert cost.peak_flops_source.startswith("measured: cpu fp32")
    assert (cost.devices, cost.device_unit) == (torch.get_num_threads(), "CPU core")
    assert cost.device_hours(result.wall_s) == pytest.approx(
        torch.get_num_threads() * result.wall_s / 3600
    )
    assert cost.gpu_util is None and cost.gpu_power_w is None
    assert '"cost": {' in result.to_json()
