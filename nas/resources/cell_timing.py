"""``nas spaces SPACE --measure``: time a few optimizer steps of each distinct cell on this
machine's device, each cell in a process of its own, so that its peak memory is its own and a
cell that runs out of memory takes nothing else down.

A cell trains as its trials do (``trainers.training.run.train``: the same module, micro-batches,
checkpointing, precision and compilation), for ``steps`` steps after one warm-up step, on
synthetic tokens (a step's time does not depend on what the tokens say), with validation reduced
to one batch at the end and the diagnostics off. The first step is reported apart: it holds the
compilation (``train.compile``) and the kernels' autotuning. The rest give the steady step time,
from which the trial's training time is its steps times that, plus the first step.

    python -m nas.resources.cell_timing < config.json     # one cell: the JSON on stdin, one line out
"""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainers.budget import resolve_budget
from trainers.config import DataConfig, RunConfig, to_dict

WARMUP = 1  # steps before the timed ones: the first holds compilation and autotuning
OOM = "out of memory"


@dataclass(frozen=True, kw_only=True)
class CellTiming:
    """One cell measured: its steady step (s), the first step (s), the peak memory its process
    reached (MB: the device's allocator peak on a GPU, the process's resident peak on a CPU),
    MFU against the device's peak, the device, the process's wall time (s), and the
    micro-batch and checkpointing it trained with."""

    step_s: float
    first_step_s: float
    peak_mem_mb: float
    mfu: float
    peak_flops: float
    device: str
    wall_s: float
    micro_batch: int = 0  # as trained: an 'auto' one resolved on the device
    checkpointing: str = "none"

    def trial_seconds(self, steps: int) -> float:
        """A trial of ``steps`` steps: the first, then the rest at the steady step."""
        return self.first_step_s + max(steps - 1, 0) * self.step_s


def probe(cfg: RunConfig, steps: int) -> RunConfig:
    """``cfg`` as the measurement trains it: ``WARMUP + steps`` steps of synthetic tokens, one
    validation batch at the end, no diagnostics; what a step computes is unchanged."""
    t = resolve_budget(cfg).train
    total = WARMUP + steps
    train = dataclasses.replace(
        t,
        max_steps=total,
        warmup_steps=min(t.warmup_steps, total),
        val_every=total,
        val_batches=1,
        diagnostics_every=0,
        target_flops=0.0,
        tokens_per_param=0.0,
    )
    return dataclasses.replace(cfg, train=train, data=DataConfig(source="synthetic"))


def measure(cfg: RunConfig, steps: int, timeout_s: float) -> CellTiming:
    """Time ``cfg`` in a child process; ValueError, one line, when it fails there (``OOM``
    when it ran out of memory) or takes longer than ``timeout_s``."""
    payload = json.dumps(to_dict(probe(cfg, steps)))
    start = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "nas.resources.cell_timing"],
            input=payload,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ValueError(f"took longer than {timeout_s:g} s") from None
    wall = time.perf_counter() - start
    lines = done.stdout.strip().splitlines()
    answer = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else None
    if answer is None:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise ValueError(f"its process ended with {done.returncode}: {tail}")
    if "error" in answer:
        raise ValueError(answer["error"])
    return CellTiming(**answer, wall_s=wall)


def _child() -> None:
    """One cell, in this process: the configuration on stdin, the timing as one JSON line."""
    from trainers.config_io import from_dict
    from trainers.training.run import train

    cfg = from_dict(json.loads(sys.stdin.read()))
    try:
        with tempfile.TemporaryDirectory() as out:
            result, _ = train(cfg, Path(out), progress=False)
    except Exception as err:  # every failure is reported as one line to the parent
        print(json.dumps({"error": _why(err)}))
        return
    timed = max(result.timed_steps - 1, 1)
    cost = result.cost
    answer: dict[str, Any] = {
        "step_s": (result.step_s - result.first_step_s) / timed,
        "first_step_s": result.first_step_s,
        "peak_mem_mb": math.nan if cost is None else cost.peak_mem_mb,
        "mfu": math.nan if cost is None else cost.mfu,
        "peak_flops": math.nan if cost is None else cost.peak_flops,
        "device": result.device,
        "micro_batch": result.micro_batch,
        "checkpointing": result.checkpointing,
    }
    print(json.dumps(answer))


def _why(err: Exception) -> str:
    """One line: ``OOM`` for any device's out-of-memory error, else the error's first line."""
    text = f"{type(err).__name__}: {err}"
    if "out of memory" in text.lower() or type(err).__name__ == "OutOfMemoryError":
        return OOM
    return text.strip().splitlines()[0] if text.strip() else type(err).__name__


if __name__ == "__main__":
    _child()
