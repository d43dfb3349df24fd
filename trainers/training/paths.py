"""Which kernels a run's model takes, as ``train.compile`` and ``train.depth_path`` ask: compiled
or eager, and which implementation mixes depth (the fused Triton kernels, the buffered two-phase
path, its plain-autograd form under the compiler, or the switches' direct computation). The paths
compute one function but round differently, so each run records the one it took, with the kernel
packages' versions, and a campaign can pin one.
"""

from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass, field

from torch import nn

from trainers.config import RunConfig, TrainConfig
from trainers.residual.attnres import fused as fused_attnres

# The packages whose versions decide what the kernels compute (import names as pip names them).
KERNEL_PACKAGES = ("torch", "triton", "flash-attn-res")


@dataclass(frozen=True)
class Paths:
    """What a run took: ``compiled`` (``torch.compile``), ``depth_mixing`` (a depth softmax's
    implementation; "" for a wiring with one), ``reason`` (one line: why that one) and
    ``versions`` (each kernel package installed: its version)."""

    compiled: bool
    depth_mixing: str = ""
    reason: str = ""
    versions: dict[str, str] = field(default_factory=dict)


def torch_dtype(precision: str) -> str:
    """What a Lightning precision computes the model's matmuls in, named as torch names it (the
    dispatch rule's terms: unlike ``device_cost.compute_dtype``, float16 is not bfloat16)."""
    if precision.startswith("bf16"):
        return "bfloat16"
    if precision.startswith("16"):
        return "float16"
    return "float64" if precision.startswith("64") else "float32"


def where(t: TrainConfig) -> tuple[str, str]:
    """The device type a run with ``t`` trains on and the dtype its model computes in."""
    from trainers.measure.device_cost import training_device
    from trainers.training.run import resolve_precision

    return training_device(t.accelerator), torch_dtype(resolve_precision(t))


def refusal(cfg: RunConfig, device: str, dtype: str) -> str:
    """Why ``cfg`` cannot run on ``device`` in ``dtype`` (one line), or "": 'fused' asks for
    kernels the dispatch rule does not allow there. A wiring without a depth softmax has
    nothing to fuse and is never refused, so a campaign can pin every arm alike."""
    if cfg.train.depth_path != "fused" or cfg.model.residual not in fused_attnres.RESIDUALS:
        return ""
    verdict = fused_attnres.dispatch(cfg.model, device, dtype)
    return "" if verdict else f"train.depth_path=fused: {verdict.reason}"


def pin(model: nn.Module, cfg: RunConfig, device: str, dtype: str) -> None:
    """Apply ``train.depth_path`` to ``model``'s stream: 'torch' keeps the fused kernels off,
    'fused' turns them on (ValueError, the ``refusal``, where they cannot run); 'auto' leaves
    the dispatch rule to each forward."""
    if why := refusal(cfg, device, dtype):
        raise ValueError(why)
    stream = getattr(model, "stream", None)
    if cfg.train.depth_path != "auto" and hasattr(stream, "fused"):
        stream.fused = cfg.train.depth_path == "fused"  # type: ignore[union-attr]


def kernel_versions() -> dict[str, str]:
    """Each of ``KERNEL_PACKAGES`` that is installed, with its version (read from its metadata:
    nothing is imported)."""
    versions = {}
    for name in KERNEL_PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


def taken(model: nn.Module, device: str, dtype: str, compiled: bool) -> Paths:
    """The paths ``model`` takes in a forward on ``device`` in ``dtype``."""
    stream = getattr(model, "stream", None)
    mixing, reason = ("", "") if stream is None else stream.mixing_path(device, dtype, compiled)
    return Paths(compiled, mixing, reason, kernel_versions())
