"""How long a trial takes on a device of a given peak, before it runs: its training FLOPs
(``trainers.flops``: the model's matrix products, the wiring's included, forward and backward)
over the FLOP/s the device sustains on them, an assumed model FLOPs utilization (MFU) of its
peak. Activation checkpointing repeats each sublayer's forward in the backward: one more forward
per step, a third more FLOPs at the same utilization, which the estimate adds.

An estimate, not a measurement: the MFU is the caller's assumption (``nas spaces --mfu``; 0.4 is
what a tuned dense bf16 training loop of this size reaches on a recent GPU, and a first run of
the harness on one has yet to measure it: ``benchmarks/gpu/gpu_check.sh`` does). Validation,
diagnostics and start-up are not counted. Torch-free, like the memory plan."""

from __future__ import annotations

from dataclasses import dataclass

from trainers.config import RunConfig
from trainers.flops import train_flops

# Training is forward + backward (2x the forward): a recomputed forward adds 1 to 3.
RECOMPUTE = 4 / 3
DEFAULT_MFU = 0.4


@dataclass(frozen=True)
class TimePlan:
    tokens: int  # trained: max_steps x batch_size x seq_len
    flops: int  # the model's training FLOPs over them (no recompute)
    seconds: float

    @property
    def hours(self) -> float:
        return self.seconds / 3600


def time_plan(cfg: RunConfig, peak_flops: float, mfu: float = DEFAULT_MFU) -> TimePlan:
    """``cfg``'s trial on one device of ``peak_flops`` at ``mfu`` of it (its steps as set or as
    its budget resolved them)."""
    if peak_flops <= 0 or not 0 < mfu <= 1:
        raise ValueError(
            f"peak {peak_flops} FLOP/s at MFU {mfu}: need a positive peak, 0 < MFU <= 1"
        )
    t = cfg.train
    flops = train_flops(cfg.model, t.max_steps, t.batch_size)
    seconds = planned_seconds(flops, t.checkpointing, peak_flops, mfu)
    return TimePlan(t.max_steps * t.batch_size * cfg.model.seq_len, flops, seconds)


def duration(seconds: float) -> str:
    """A time as a short figure: ``42 s``, ``3.5 min``, ``1.47 h``."""
    if seconds < 60:
        return f"{seconds:.2g} s"
    return f"{seconds / 60:.3g} min" if seconds < 3600 else f"{seconds / 3600:.3g} h"


def planned_seconds(
    flops: float, checkpointing: str, peak_flops: float, mfu: float = DEFAULT_MFU
) -> float:
    """The plan's time for ``flops`` model training FLOPs: at ``mfu`` of ``peak_flops``, with
    checkpointing's recomputed forward added."""
    return flops * (RECOMPUTE if checkpointing == "sublayer" else 1.0) / (peak_flops * mfu)
