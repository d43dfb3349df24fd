"""The GPUs the harness knows by name: how each appears in ``torch.cuda.get_device_name()``, its
memory and its dense peaks. The peak table of ``trainers.measure.device_cost`` is these rows
(found by the device's name on the device); ``--gpu NAME`` names one for a plan made elsewhere
(``nas spaces``, a sweep's driver), where the trials' GPU is not this machine's. Torch-free.

Peaks: NVIDIA's datasheets print the tensor-core figures "with sparsity", twice the dense ones,
so the bf16 column is half the printed figure. Memory: the total ``nvidia-smi`` shows for the
board, in MiB (below the datasheet's round figure where ECC takes its share: 23,034 MiB on a
"24 GB" L4); CUDA hands a process a little less, which the plan's headroom covers, and a trial
on the device measures its own.
"""

from __future__ import annotations

from dataclasses import dataclass

TERA = 1e12
MIB = 2**20


@dataclass(frozen=True, slots=True)
class GpuType:
    """One GPU: its name for ``--gpu``, a regular expression searched in the device's name, a
    label, its memory (bytes) and its dense bf16 and fp32 peaks (FLOP/s)."""

    name: str
    pattern: str
    label: str
    memory: int
    bf16: float
    fp32: float


# The first row whose pattern matches a device's name wins, so the more specific names (NVL,
# PCIe, GH200, the 80 GB A100) come before the plain ones.
GPU_TYPES = (
    # H200 datasheet (Tensor Core GPU, 2024): H200 NVL 141 GB, BF16 1,671 TFLOPS sparse, FP32 60
    GpuType("h200-nvl", r"H200 NVL", "H200 NVL", 143771 * MIB, 835.5 * TERA, 60 * TERA),
    # GH200 Grace Hopper datasheet: 96 GB HBM3 (144 GB in its HBM3e version), the H100 SXM's
    # figures, BF16 1,979 sparse, FP32 67
    GpuType("gh200", r"GH200", "GH200", 97871 * MIB, 989.5 * TERA, 67 * TERA),
    # H200 datasheet: H200 SXM 141 GB, BF16 1,979 TFLOPS sparse, FP32 67
    GpuType("h200-sxm", r"\bH200\b", "H200 SXM", 143771 * MIB, 989.5 * TERA, 67 * TERA),
    # H100 datasheet: H100 NVL 94 GB, BF16 1,671 sparse, FP32 60
    GpuType("h100-nvl", r"H100 NVL", "H100 NVL", 95830 * MIB, 835.5 * TERA, 60 * TERA),
    # H100 datasheet: H100 PCIe 80 GB, BF16 1,513 sparse, FP32 51
    GpuType("h100-pcie", r"H100 PCIe", "H100 PCIe", 81559 * MIB, 756.5 * TERA, 51 * TERA),
    # H100 datasheet: H100 SXM 80 GB, BF16 1,979 sparse, FP32 67 ("NVIDIA H100 80GB HBM3")
    GpuType("h100-sxm", r"\bH100\b", "H100 SXM", 81559 * MIB, 989.5 * TERA, 67 * TERA),
    # A100 datasheet: 80 GB or 40 GB, BF16 Tensor Core 312 (624 sparse), FP32 19.5; SXM and
    # PCIe alike ("NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB PCIe")
    GpuType("a100-80gb", r"\bA100\b.*80\s?GB", "A100", 81920 * MIB, 312 * TERA, 19.5 * TERA),
    GpuType("a100-40gb", r"\bA100\b", "A100", 40960 * MIB, 312 * TERA, 19.5 * TERA),
    # L40S datasheet: 48 GB, BF16 Tensor Core 362.05 (733 sparse), FP32 91.6
    GpuType("l40s", r"\bL40S\b", "L40S", 46068 * MIB, 362.05 * TERA, 91.6 * TERA),
    # L4 datasheet: 24 GB, BF16 Tensor Core 242 sparse, FP32 30.3
    GpuType("l4", r"\bL4\b", "L4", 23034 * MIB, 121 * TERA, 30.3 * TERA),
    # A10 datasheet: 24 GB, BF16 Tensor Core 125 (250 sparse), FP32 31.2 (not the A10G: no
    # match)
    GpuType("a10", r"\bA10\b", "A10", 23028 * MIB, 125 * TERA, 31.2 * TERA),
)


def gpu_type(name: str) -> GpuType:
    """The GPU named ``name`` (``--gpu``); ValueError, one line, listing the names known."""
    for gpu in GPU_TYPES:
        if gpu.name == name.strip().lower():
            return gpu
    known = ", ".join(g.name for g in GPU_TYPES)
    raise ValueError(
        f"--gpu {name!r}: unknown GPU; known: {known} (or give --device-memory and --peak-flops)"
    )
