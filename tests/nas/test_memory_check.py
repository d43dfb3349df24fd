"""``--device-memory`` (``nas.memory_check``): its sizes, ``nas spaces``' per-cell plan and
verdict, and a sweep refused before launch that then plans and records the setting it was told
(without Ray: the check is the plan's; training on micro-batches is the trainer tests')."""

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


@pytest.mark.slow  # a campaign on a real store: out of test-fast's budget, as before
def test_a_sweep_that_does_not_fit_is_refused_then_runs_with_the_advice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The smoke grid on a CPU with 2 MB per device, the real command in this process: refused
    while planning, before anything starts (exit 2, one line naming the arm, its estimate and
    the cheapest --set; nothing written, no Ray); the same command with that --set plans and
    records every cell at that micro-batch (``tests.nas.sweeps.play``: the plan and the record
    as the command makes them, without Ray)."""
    import ray

    assert main(sweeps.command(tmp_path, "smoke", "--device-memory", "2MB")) == 2
    line = capsys.readouterr().err.strip()
    assert len(line.splitlines()) == 1 and "arm standard needs about" in line
    assert "more than 1.91 MiB" in line and "--set train.micro_batch=2" in line
    assert list(tmp_path.iterdir()) == [] and not ray.is_initialized()
    advice = line.split("fits: ")[1].split(" (")[0].split()
    losses = {("standard", 0): 3.0, ("block_attnres", 0): 2.9}
    handed = sweeps.play(tmp_path, ["smoke", "--device-memory", "2MB", *advice], losses)
    assert {s.config.train.micro_batch for s in handed} == {2}
    runs, _ = sweeps.runs(tmp_path, "smoke")
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId")]
    assert len(children) == 2
    assert {r.data.params["train.micro_batch"] for r in children} == {"2"}
