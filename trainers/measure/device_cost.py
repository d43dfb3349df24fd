"""What a run cost on the device it trained on: the device's peak FLOP/s (a table of known
accelerators, a timed matmul elsewhere, or the user's figure), the run's peak memory, GPU
utilisation and power through NVIDIA's management library where it is installed, and the
device count that turns wall time into device-hours.

Model FLOP utilisation (MFU) is achieved model FLOP/s over the peak, the achieved figure being
``trainers.flops`` FLOPs per token times the tokens trained per second of the fit. The peak
is the *dense* figure of the precision the run computes in: the tensor-core bf16 peak for bf16 and
fp16 runs (equal on every row below), the plain fp32 peak (no TF32: torch leaves it off) for 32-bit
runs.
"""

from __future__ import annotations

import functools
import importlib
import math
import re
import time
from dataclasses import dataclass
from typing import Any, Literal

import lightning as L

from trainers.measure.gpu_types import GPU_TYPES

Dtype = Literal["bf16", "fp32"]
OVERRIDE = "--peak-flops"  # the source of a peak the user gave
TERA = 1e12
MATMUL_BUDGET_S = 0.25  # the CPU peak's timed matmuls, after one warm-up
MIB = 2**20


@dataclass(frozen=True, slots=True)
class PeakRow:
    """One accelerator: a regular expression searched in ``torch.cuda.get_device_name()``, and
    its dense peaks in FLOP/s."""

    pattern: str
    name: str
    bf16: float
    fp32: float


# The known GPUs' peaks (trainers.measure.gpu_types: their datasheets' figures); the first row
# whose pattern is in the device's name wins.
PEAK_TABLE = tuple(PeakRow(g.pattern, g.label, g.bf16, g.fp32) for g in GPU_TYPES)


@dataclass(frozen=True, slots=True)
class Peak:
    """A peak in FLOP/s and where it came from: a table row, a measurement, or OVERRIDE."""

    flops: float
    source: str


def compute_dtype(precision: str) -> Dtype:
    """The matmul dtype of a Lightning precision: bf16 for the 16-bit ones (fp16's tensor-core
    peak equals bf16's on every row), fp32 otherwise (64-bit runs too: an overestimate of no
    practical use)."""
    return "bf16" if precision.startswith(("bf16", "16")) else "fp32"


def training_device(accelerator: str) -> Literal["cuda", "cpu"]:
    """Where a run with this ``train.accelerator`` trains (Lightning's choice for 'auto')."""
    import torch

    gpu = accelerator in ("auto", "gpu", "cuda") and torch.cuda.is_available()
    return "cuda" if gpu else "cpu"


def table_peak(device_name: str, dtype: Dtype) -> Peak | None:
    """The first ``PEAK_TABLE`` row whose pattern is in ``device_name``; None when none is."""
    for row in PEAK_TABLE:
        if re.search(row.pattern, device_name):
            return Peak(row.bf16 if dtype == "bf16" else row.fp32, f"table: {row.name} {dtype}")
    return None


def device_peak(device: str, precision: str, override: float | None = None) -> Peak:
    """The peak a run's MFU is measured against: ``override`` when given; a GPU's table row,
    or its measured matmul throughput when its name is not in the table; a CPU's measured
    matmul throughput at this process's thread count."""
    if override is not None:
        if not (override > 0 and math.isfinite(override)):
            raise ValueError(f"{OVERRIDE} {override}: must be a positive number of FLOP/s")
        return Peak(float(override), OVERRIDE)
    import torch

    dtype = compute_dtype(precision)
    if device == "cuda":
        found = table_peak(torch.cuda.get_device_name(), dtype)
        if found is not None:
            return found
    threads = torch.get_num_threads()
    flops = matmul_flops(device, dtype, threads)
    where = f"{threads} threads" if device == "cpu" else torch.cuda.get_device_name()
    return Peak(flops, f"measured: {device} {dtype} matmul, {where}")


@functools.cache
def matmul_flops(device: str, dtype: Dtype, threads: int) -> float:
    """The best throughput of square matmuls over ``MATMUL_BUDGET_S``, after one warm-up: the
    attainable dense peak. Measured once per process, device, dtype and thread count (Ray
    reuses a worker for trials that may run with other thread counts)."""
    import torch

    n = 1024 if device == "cpu" else 8192  # large enough to reach the plateau, cheap to time
    kind = torch.bfloat16 if dtype == "bf16" else torch.float32
    a, b = (torch.randn(n, n, device=device, dtype=kind) for _ in range(2))
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    a @ b
    sync()
    best, end = 0.0, time.perf_counter() + MATMUL_BUDGET_S
    while time.perf_counter() < end:
        start = time.perf_counter()
        a @ b
        sync()
        best = max(best, 2.0 * n**3 / (time.perf_counter() - start))
    return best


# ---- memory -----------------------------------------------------------------------------------
# A GPU run's peak is torch's: the most memory its tensors held (the caching allocator's extra
# reserve is not counted), reset at the fit's start. A CPU run's is what the fit added to the
# process's resident set at its peak: the peak resident set (VmHWM, reset at the fit's start
# through /proc/self/clear_refs) less the resident set at that start. The process's own peak
# would measure its history too: Tune reuses a worker process for the next trial, and the
# footprint a worker keeps from its earlier trials (allocator caches, imported modules, the
# corpus) made a Block AttnRes arm read 2.4x standard's peak in one sweep where its training
# adds 12 MB to standard's 138 (measured in fresh processes). So on a CPU the figure leaves out
# what existed before the fit (Python, torch, the model's weights) and counts the optimizer
# state, activations and batches. Where the reset is refused (not Linux), it is the rise of the
# process's lifetime peak over the fit, 0 when the fit stayed under an earlier peak.


def reset_peak_memory(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.reset_peak_memory_stats()
        return
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets the peak resident set to the current one (Linux >= 4.0)
    except OSError:
        pass


def peak_memory_mb(device: str) -> float:
    """The peak since ``reset_peak_memory``, in MB of 2**20 bytes (MiB)."""
    if device == "cuda":
        import torch

        return torch.cuda.max_memory_allocated() / MIB
    try:
        with open("/proc/self/status") as f:
            found = re.search(r"VmHWM:\s+(\d+) kB", f.read())
        if found:
            return int(found.group(1)) * 1024 / MIB
    except OSError:
        pass
    import resource
    import sys

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return peak / MIB if sys.platform == "darwin" else peak * 1024 / MIB


# ---- GPU utilisation and power ----------------------------------------------------------------


class GpuMonitor(L.Callback):
    """Mean GPU utilisation (%) and board power (W) over training, read through NVML (the
    ``nvidia-ml-py`` package) at batch ends, at most every ``interval_s``. Records nothing
    (None) on a CPU or where the package is not installed; an NVML error never fails a run."""

    def __init__(self, device: str, interval_s: float = 1.0) -> None:
        self.device = device
        self.interval_s = interval_s
        self._nvml: Any = None
        self._handle: Any = None
        self._last = -math.inf
        self.util: list[float] = []
        self.power_w: list[float] = []

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.device == "cuda" and self._handle is None:
            self._nvml, self._handle = _nvml_handle()

    def on_train_batch_end(self, trainer: L.Trainer, *args: Any) -> None:
        now = time.perf_counter()
        if self._handle is None or now - self._last < self.interval_s:
            return
        self._last = now
        try:
            self.util.append(float(self._nvml.nvmlDeviceGetUtilizationRates(self._handle).gpu))
            self.power_w.append(self._nvml.nvmlDeviceGetPowerUsage(self._handle) / 1000)
        except Exception:  # NVML's own error types; a sample lost is no reason to stop
            pass

    def means(self) -> tuple[float | None, float | None]:
        def mean(xs: list[float]) -> float | None:
            return sum(xs) / len(xs) if xs else None

        return mean(self.util), mean(self.power_w)


def _nvml_handle() -> tuple[Any, Any]:
    """(pynvml, the handle of the GPU torch trains on), found by UUID: NVML numbers devices
    ignoring CUDA_VISIBLE_DEVICES, which Ray sets. (None, None) without the package or GPU."""
    try:
        import torch

        nvml = importlib.import_module("pynvml")
        nvml.nvmlInit()
        uuid = str(torch.cuda.get_device_properties(torch.cuda.current_device()).uuid)
        return nvml, nvml.nvmlDeviceGetHandleByUUID(
            uuid if uuid.startswith("GPU-") else f"GPU-{uuid}"
        )
    except Exception:  # not installed, no driver, an old torch without uuid
        return None, None


# ---- the run's cost ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Cost:
    """What a run cost. NaN or None where not measured (a result made by hand)."""

    peak_mem_mb: float = math.nan
    peak_flops: float = math.nan  # FLOP/s
    peak_flops_source: str = ""
    mfu: float = math.nan
    devices: float = 0.0  # one GPU, or the CPU threads the run computed with
    device_unit: str = ""  # DEVICE_UNITS: what a device-hour counts
    gpu_util: float | None = None  # mean %, NVML
    gpu_power_w: float | None = None  # mean W, NVML

    def device_hours(self, seconds: float) -> float:
        """``seconds`` of this run's devices, in device-hours (GPU-hours or core-hours)."""
        return self.devices * seconds / 3600


# A CPU run's threads are its cores (Ray sets a trial's threads to the cores it reserves), so a
# CPU device-hour is a core-hour; a run trains on one GPU (Lightning devices=1).
DEVICE_UNITS = {"cuda": "GPU", "cpu": "CPU core"}


class CostMeter:
    """Measures one fit: build it before, ``start`` at the fit's start (resets the memory peak),
    ``monitor`` among the fit's callbacks, ``finish`` with the achieved model FLOP/s."""

    def __init__(self, accelerator: str, precision: str, peak_flops: float | None = None) -> None:
        self.device = training_device(accelerator)
        self.peak = device_peak(self.device, precision, peak_flops)
        self.monitor = GpuMonitor(self.device)
        self.base_mb = 0.0

    def start(self) -> None:
        reset_peak_memory(self.device)
        # On a CPU the peak is read relative to the resident set now (see "memory" above).
        self.base_mb = peak_memory_mb(self.device) if self.device == "cpu" else 0.0

    def finish(self, achieved_flops: float) -> Cost:
        import torch

        util, power = self.monitor.means()
        return Cost(
            peak_mem_mb=max(peak_memory_mb(self.device) - self.base_mb, 0.0),
            peak_flops=self.peak.flops,
            peak_flops_source=self.peak.source,
            mfu=achieved_flops / self.peak.flops,
            devices=1.0 if self.device == "cuda" else float(torch.get_num_threads()),
            device_unit=DEVICE_UNITS[self.device],
            gpu_util=util,
            gpu_power_w=power,
        )
