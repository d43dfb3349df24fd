"""The machine a run or a study ran on, in words: the records' provenance (a trial's hardware
tag, the results gallery's ``made.json``). Floating-point results differ in their last digits
from one CPU model to another (kernels pick different vector widths and summation orders), so
the CPU's name belongs beside any figure quoted to four digits."""

from __future__ import annotations

import os
import platform
from pathlib import Path


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The CPU's model name (Linux's /proc/cpuinfo), else what the platform says, else the
    architecture."""
    try:
        for line in cpuinfo.read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and value.strip():
                return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_words() -> str:
    """``x86_64 AMD EPYC, 2 cores``: architecture, model and core count."""
    model = cpu_model()
    arch = platform.machine()
    named = model if model == arch else f"{arch} {model}"
    return f"{named}, {os.cpu_count()} cores"
