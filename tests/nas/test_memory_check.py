"""``--device-memory`` (``nas.memory_check``): its sizes, ``nas spaces``' per-cell plan and
verdict, and a real sweep refused before launch that then runs with the setting it was told."""

from __future__ import annotations

from pathlib import Path

import pytest

from nas.cli import main
from nas.memory_check import parse_size
from tests.nas import sweeps


@pytest.mark.parametrize(
    "text,size",
    [("80GiB", 80 * 2**30), ("24GB", 24 * 10**9), ("512MiB", 512 * 2**20), ("1.5 TiB", 3 * 2**39),
     ("123456", 123456), ("2mb", 2 * 10**6)],
)  # fmt: skip
def test_device_memory_sizes_read_binary_and_decimal_units(text: str, size: int) -> None:
    """KiB/MiB/GiB/TiB are powers of 1024, KB/MB/GB/TB of 1000, a plain number bytes."""
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "0", "12XB", "GiB", "-1GiB", "1e9"])
def test_a_bad_device_memory_is_one_line_and_exit_2(
    text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A size that is no size: `nas spaces` says so in one line and exits 2."""
    assert main(["spaces", "smoke", "--device-memory", text]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--device-memory" in err[0]


def test_spaces_prints_each_cells_plan_and_whether_it_fits(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`nas spaces smoke` shows every arm's plan per device; with a device memory too small for
    the whole batch at once, whether it fits and the micro-batch that would."""
    assert main(["spaces", "smoke"]) == 0
    out = capsys.readouterr().out
    assert "memory per device" in out and "block_attnres: params" in out
    assert main(["spaces", "smoke", "--device-memory", "2MB"]) == 0
    lines = [x for x in capsys.readouterr().out.splitlines() if "total" in x]
    assert len(lines) == 2
    assert all("does not fit 1.91 MiB; cheapest that fits: --set train.micro_batch=" in x
               for x in lines)  # fmt: skip
    assert main(["spaces", "smoke", "--device-memory", "80GiB"]) == 0
    assert capsys.readouterr().out.count("fits 80 GiB") == 2


@pytest.mark.slow
def test_a_sweep_that_does_not_fit_is_refused_then_runs_with_the_advice(tmp_path: Path) -> None:
    """The smoke grid on a CPU with 2 MB per device: refused before launch (exit 2, one line
    naming the arm, its estimate and the cheapest --set; nothing written); the same command with
    that --set plans, runs and records every cell."""
    proc = sweeps.sweep(tmp_path, "smoke", "--device-memory", "2MB")
    assert proc.returncode == 2, proc.stderr
    line = proc.stderr.strip()
    assert len(line.splitlines()) == 1 and "arm standard needs about" in line
    assert "more than 1.91 MiB" in line and "--set train.micro_batch=2" in line
    assert list(tmp_path.iterdir()) == []
    advice = line.split("fits: ")[1].split(" (")[0].split()
    proc = sweeps.sweep(tmp_path, "smoke", "--device-memory", "2MB", *advice)
    assert proc.returncode == 0, proc.stderr
    runs, _ = sweeps.runs(tmp_path, "smoke")
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId")]
    assert len(children) == 2
    assert {r.data.params["train.micro_batch"] for r in children} == {"2"}
