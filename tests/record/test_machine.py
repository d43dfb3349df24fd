"""The machine in words (``record.machine``): the CPU's model name from /proc/cpuinfo, with a
fallback where there is none, so a figure quoted to four digits names the CPU that made it."""

from __future__ import annotations

import platform
from pathlib import Path

from record.machine import cpu_model


def test_the_model_name_is_read_from_cpuinfo(tmp_path: Path) -> None:
    """The first ``model name`` line's value, whitespace trimmed (one line per core)."""
    info = tmp_path / "cpuinfo"
    info.write_text(
        "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9654 96-Core Processor\n"
        "processor\t: 1\nmodel name\t: AMD EPYC 9654 96-Core Processor\n"
    )
    assert cpu_model(info) == "AMD EPYC 9654 96-Core Processor"


def test_without_cpuinfo_the_platform_answers(tmp_path: Path) -> None:
    """No such file, or one without a model name (some ARM kernels): the platform's processor,
    else the architecture; never an empty string."""
    expected = platform.processor() or platform.machine()
    assert cpu_model(tmp_path / "missing") == expected
    bare = tmp_path / "cpuinfo"
    bare.write_text("processor\t: 0\nBogoMIPS\t: 50.00\n")
    assert cpu_model(bare) == expected != ""
