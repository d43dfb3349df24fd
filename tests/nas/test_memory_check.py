"""``--device-memory`` (``nas.resources.memory``): its sizes, ``nas spaces``' per-cell plan and
verdict, and a sweep refused before launch that then plans and records the setting it was told
(without Ray: the check is the plan's; training on micro-batches is the trainer tests')."""

from __future__ import annotations

from pathlib import Path

import pytest

from nas.cli import main
from nas.resources.memory import parse_size
from tests.nas import sweeps

GIB = 2**30


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
    the whole batch at once, whether it fits and the micro-batch that would. A GPU keeps back
    its stated headroom: 1 GiB of context, then a tenth of the rest, so 1026 MiB lends the plan
    (1026 - 1024) x 0.9 = 1.8 MiB."""
    assert main(["spaces", "smoke"]) == 0
    out = capsys.readouterr().out
    assert "memory per device" in out and "block_attnres: params" in out
    assert main(["spaces", "smoke", "--device-memory", "1026MiB"]) == 0
    lines = [x for x in capsys.readouterr().out.splitlines() if "total" in x]
    assert len(lines) == 2
    assert all("does not fit 1.8 MiB usable of 1 GiB (1 GiB context, 10% allocator reserve, "
               "stated); cheapest that fits: --set train.micro_batch=" in x
               for x in lines)  # fmt: skip
    assert main(["spaces", "smoke", "--device-memory", "80GiB"]) == 0
    assert capsys.readouterr().out.count("fits 71.1 GiB usable of 80 GiB") == 2


@pytest.mark.slow  # a campaign on a real store: out of test-fast's budget, as before
def test_a_sweep_that_does_not_fit_is_refused_then_runs_with_the_advice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The smoke grid on CPU trials (``--gpus-per-trial 0``: no CUDA context kept back, a tenth
    for the allocator) with 2.1 MB per device, the real command in this process: refused
    while planning, before anything starts (exit 2, one line naming the arm, its estimate and
    the cheapest --set; nothing written, no Ray); the same command with that --set plans and
    records every cell at that micro-batch (``tests.nas.sweeps.play``: the plan and the record
    as the command makes them, without Ray)."""
    import ray

    cpu = ["--device-memory", "2.1MB", "--gpus-per-trial", "0"]
    assert main(sweeps.command(tmp_path, "smoke", *cpu)) == 2
    line = capsys.readouterr().err.strip()
    assert len(line.splitlines()) == 1 and "arm standard needs about" in line
    assert "more than the 1.8 MiB usable of 2 MiB" in line
    assert "--set train.micro_batch=2" in line
    assert list(tmp_path.iterdir()) == [] and not ray.is_initialized()
    advice = line.split("fits: ")[1].split(" (")[0].split()
    losses = {("standard", 0): 3.0, ("block_attnres", 0): 2.9}
    handed = sweeps.play(tmp_path, ["smoke", *cpu, *advice], losses)
    assert {s.config.train.micro_batch for s in handed} == {2}
    runs, _ = sweeps.runs(tmp_path, "smoke")
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId")]
    assert len(children) == 2
    assert {r.data.params["train.micro_batch"] for r in children} == {"2"}


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"device_memory": 80 * GIB}, (80 * GIB, True)),  # a stated memory is a GPU's
        ({"device_memory": 80 * GIB, "gpus_per_trial": 0.5}, (40 * GIB, True)),  # a half share
        ({"device_memory": 80 * GIB, "gpus_per_trial": 2}, (80 * GIB, True)),  # per device
        ({"device_memory": 2 * GIB, "gpus_per_trial": 0}, (2 * GIB, False)),  # CPU trials
        ({"address": "10.0.0.1:6379"}, (None, False)),  # a cluster's GPUs: not the driver's
        ({"gpus_per_trial": 0}, (None, False)),
    ],
)
def test_a_trial_is_planned_on_its_own_device(
    options: dict[str, object], expected: tuple[int | None, bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The memory a sweep plans each trial with: the stated one, divided by a fractional GPU
    share; never the driver's own device for a cluster's trials. The 'auto' micro-batches of
    the trials are resolved against it where it is stated or shared."""
    from nas.sweep.plan import SweepOptions, stated_memory, trial_memory

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    opts = SweepOptions(space="smoke", **options)  # type: ignore[arg-type]
    assert trial_memory(opts) == expected
    shared = 0 < (opts.gpus_per_trial or 1) < 1
    assert stated_memory(opts) == (expected[0] if "device_memory" in options or shared else None)


def test_a_cluster_sweep_without_a_device_memory_says_it_is_not_planned(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A driver outside the cluster does not check the cells against its own device; it says
    so and how to plan them."""
    from nas.campaign.kinds import campaign_of
    from nas.sweep.plan import SweepOptions, _check_memory
    from search_spaces import BUILTIN
    from trainers.config import RunConfig

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    campaign = campaign_of(BUILTIN["smoke"], RunConfig())
    _check_memory(SweepOptions(space="smoke", address="10.0.0.1:6379"), campaign)
    assert "memory: not planned" in capsys.readouterr().out


def test_a_search_is_planned_at_its_largest_corners(capsys: pytest.CaptureFixture[str]) -> None:
    """pareto_size samples residual x depth x width: its plan holds the largest depth and width
    with each wiring (not the base's 4 x 64), and a device too small for the largest is refused
    before launch, naming that corner, as a grid's cell is."""
    from nas.campaign.kinds import campaign_of
    from nas.resources.memory import cells
    from search_spaces import BUILTIN
    from trainers.settings import under_settings

    space = BUILTIN["pareto_size"]
    _, base, _ = under_settings(space.base, ())
    planned = cells(campaign_of(space, base))
    assert sorted(c.model.residual for c in planned.values()) == sorted(
        space.params["model.residual"].values  # type: ignore[union-attr]
    )
    assert {(c.model.n_layers, c.model.d_model) for c in planned.values()} == {(16, 192)}
    assert main(["sweep", "pareto_size", "--device-memory", "1100MiB"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "arm largest (n_layers=16, d_model=192, residual=" in err


def test_an_auto_micro_batch_is_checked_for_the_split_only() -> None:
    """Before launch an 'auto' micro-batch is not known: the workers' split of the global batch
    is checked, and the micro-batch is left to the trial's device."""
    import dataclasses

    from nas.trial.data_parallel import check_split
    from trainers.config import RunConfig

    base = RunConfig()
    auto = dataclasses.replace(base, train=dataclasses.replace(base.train, micro_batch="auto"))
    check_split(auto, 2)
    with pytest.raises(ValueError, match="does not split evenly over 3 workers"):
        check_split(auto, 3)


@pytest.mark.parametrize(
    ("device", "name"),
    [
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),
        ("NVIDIA H100 PCIe", "h100-pcie"),
        ("NVIDIA H200", "h200-sxm"),
        ("NVIDIA A100-SXM4-80GB", "a100-80gb"),
        ("NVIDIA A100 80GB PCIe", "a100-80gb"),
        ("NVIDIA A100-SXM4-40GB", "a100-40gb"),
        ("NVIDIA L4", "l4"),
    ],
)
def test_a_device_is_found_by_its_name_and_named_for_a_plan(device: str, name: str) -> None:
    """The row a device's own name finds (its peak, on the device) is the row ``--gpu`` names
    for a plan made elsewhere."""
    import re

    from trainers.measure.gpu_types import GPU_TYPES, gpu_type

    found = next(g for g in GPU_TYPES if re.search(g.pattern, device))
    assert found == gpu_type(name) and found.memory > 16 * GIB and found.bf16 > found.fp32 > 0


def test_gpu_names_the_trials_device_and_its_peak(capsys: pytest.CaptureFixture[str]) -> None:
    """`nas spaces depth_gpt2 --gpu h100-sxm` plans 81,559 MiB (79.6 GiB) and the H100's dense
    bf16 peak; an unknown name is one line listing the known ones, exit 2, for `nas spaces` and
    `nas sweep` alike."""
    assert main(["spaces", "depth_gpt2", "--gpu", "h100-sxm"]) == 0
    out = capsys.readouterr().out
    assert "usable of 79.6 GiB" in out and "989.5 TFLOP/s at 40% MFU" in out
    for command in (["spaces", "demo"], ["sweep", "demo"]):
        assert main([*command, "--gpu", "h100"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "unknown GPU; known: " in err and "h100-sxm" in err
