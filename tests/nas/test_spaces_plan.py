"""The GPU study planned on a CPU: ``nas spaces depth_gpt2 --device-memory 80GiB --peak-flops``
prints, per cell, the memory plan with the micro-batch or checkpointing it needs, the time per
trial under that setting, and the sweep's device-hours over every trial it plans; the time plan
follows from the FLOP count; the CPU twin keeps the study's arms, stage and depth ratios."""

from __future__ import annotations

import dataclasses
import re

import pytest

from nas.cli import main
from search_spaces import BUILTIN
from trainers.config import ModelConfig, RunConfig, TrainConfig
from trainers.measure.time_plan import time_plan

PEAK = 989e12  # an H100 SXM's dense bf16 peak


def _cfg(**train: object) -> RunConfig:
    cfg = RunConfig()
    return dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, **train))


def test_time_is_training_flops_over_sustained_flops() -> None:
    """Worked by hand for standard pre-norm (L = 3, d = 64, h = 256, V = 100, T = 32, tied):
    6 FLOPs per weight per token, 6N = 6 (L (4d^2 + 2dh) + Vd) = 923,136, plus causal
    attention's 6 L T d = 36,864: 960,000 FLOPs per token. 100 steps of 16 sequences of 32
    tokens are 51,200 tokens: 4.9152e10 FLOPs, at half of 1e12 FLOP/s 0.098 s; checkpointing's
    extra forward adds a third of it (forward + backward = 3 forwards, 4 with the recompute)."""
    model = ModelConfig(d_model=64, n_heads=4, n_layers=3, seq_len=32, vocab_size=100)
    cfg = RunConfig(model=model, train=TrainConfig(max_steps=100, batch_size=16))
    per_token = 6 * (3 * (4 * 64 * 64 + 2 * 64 * 256) + 100 * 64) + 6 * 3 * 32 * 64
    assert per_token == 960_000
    plan = time_plan(cfg, 1e12, 0.5)
    assert plan.tokens == 51_200 and plan.flops == per_token * 51_200
    assert plan.seconds == pytest.approx(per_token * 51_200 / 0.5e12)
    recomputed = dataclasses.replace(
        cfg, train=dataclasses.replace(cfg.train, checkpointing="sublayer")
    )
    assert time_plan(recomputed, 1e12, 0.5).seconds == pytest.approx(plan.seconds * 4 / 3)
    assert time_plan(recomputed, 1e12, 0.5).flops == plan.flops  # MFU counts model FLOPs
    with pytest.raises(ValueError):
        time_plan(cfg, PEAK, 0.0)


def _plan(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["spaces", *args]) == 0
    return capsys.readouterr().out


def test_the_gpt2_study_is_planned_for_an_80gb_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    out = _plan(capsys, "depth_gpt2", "--device-memory", "80GiB", "--peak-flops", "989e12")
    space = BUILTIN["depth_gpt2"]
    cells = [f"{arm}/n_layers={n}" for arm in space.arms for n in (12, 24, 48)]
    memory = {c: re.search(rf"^    {re.escape(c)}: params .*$", out, re.M) for c in cells}
    times = {
        c: re.search(
            rf"^    {re.escape(c)}: ([\d.e+]+) tokens, ([\d.e+]+) training FLOPs, "
            r"([\d.]+) h(?: \(with (.*)\))?$",
            out,
            re.M,
        )
        for c in cells
    }
    assert all(memory.values()) and all(times.values()), out
    # At 512 sequences of 1024 no cell fits whole: each cell's micro-batch is 'auto', and the plan
    # picks the largest that fits the 80 GiB less its stated headroom ((80 - 1) x 0.9 = 71.1
    # GiB); a deeper cell never gets a larger one (activations grow with depth). The time line
    # runs under that choice, with nothing more to set.
    micro = {}
    for c in cells:
        line = memory[c].group(0)  # type: ignore[union-attr]
        assert "fits 71.1 GiB usable of 80 GiB (1 GiB context, 10% allocator reserve" in line
        micro[c] = int(line.split("micro-batch auto: ")[1].split(";")[0])
        assert "checkpointed" not in line and times[c].group(4) is None  # type: ignore[union-attr]
    for arm in space.arms:
        assert (
            micro[f"{arm}/n_layers=12"] >= micro[f"{arm}/n_layers=24"] > micro[f"{arm}/n_layers=48"]
        )
    assert [micro[f"standard/n_layers={n}"] for n in (12, 24, 48)] == [64, 32, 16]
    # Time per trial: the FLOP count over 40% of the peak (no cell needs checkpointing here).
    hours = {c: float(times[c].group(3)) for c in cells}  # type: ignore[union-attr]
    for c in cells:
        flops = float(times[c].group(2))  # type: ignore[union-attr]
        # both printed to 3 significant figures: each within 0.5% of its value
        assert hours[c] == pytest.approx(flops / (PEAK * 0.4) / 3600, rel=1e-2)
        assert float(times[c].group(1)) == pytest.approx(5000 * 512 * 1024, rel=1e-3)  # type: ignore[union-attr]
    # The sweep: each cell's 3 stage trials and 3 seeds, 54 in all.
    total = re.search(r"sweep: 54 trials, ([\d,.]+) device-hours", out)
    assert total is not None, out
    assert float(total.group(1).replace(",", "")) == pytest.approx(
        6 * sum(hours.values()), rel=5e-3
    )


def test_without_a_device_the_time_is_as_configured(capsys: pytest.CaptureFixture[str]) -> None:
    out = _plan(capsys, "demo", "--peak-flops", "1e12", "--mfu", "0.5")
    assert "as configured; 1 TFLOP/s at 50% MFU" in out and "(with" not in out
    assert re.search(r"sweep: 12 trials, [\d.]+ (s|min)", out), out


@pytest.mark.parametrize("args", [["--peak-flops", "-1"], ["--peak-flops", "1e12", "--mfu", "2"]])
def test_a_bad_peak_or_mfu_is_one_line(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["spaces", "demo", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--peak-flops" in err and "Traceback" not in err


def test_the_twin_keeps_the_study_but_its_size() -> None:
    """Same arms, learning-rate stage shape, seeds and depth ratios; CPU-sized."""
    study, twin = BUILTIN["depth_gpt2"], BUILTIN["depth_gpt2_cpu"]
    assert twin.arms == study.arms and twin.seeds == study.seeds
    assert study.tune is not None and twin.tune is not None
    assert (twin.tune.points, twin.tune.seeds, twin.tune.high / twin.tune.low) == (
        study.tune.points,
        study.tune.seeds,
        study.tune.high / study.tune.low,
    )
    depths = [p.values for p in (study.params["model.n_layers"], twin.params["model.n_layers"])]
    assert [d / depths[0][0] for d in depths[0]] == [d / depths[1][0] for d in depths[1]]
    assert study.base["model.attnres_blocks"] == twin.base["model.attnres_blocks"] == 8
    for size in ("model.d_model", "model.seq_len", "train.batch_size", "train.max_steps"):
        assert twin.base[size] < study.base[size]


def test_measure_times_each_cell_in_its_own_process(capsys: pytest.CaptureFixture[str]) -> None:
    """`nas spaces smoke --measure` trains each cell for a warm-up and 2 timed steps in a child
    process and prints, per cell, a positive step time whose tokens/s is the batch's tokens
    over it, and the sweep's measured training time beside the FLOP estimate."""
    out = _plan(capsys, "smoke", "--measure", "--measure-steps", "2")
    assert "measured on this machine (2 steps after a warm-up step" in out
    base = BUILTIN["smoke"].base
    tokens = base["train.batch_size"] * base["model.seq_len"]
    for arm in BUILTIN["smoke"].arms:
        line = re.search(
            rf"^    {arm} \(cpu\): step ([\d.e+-]+) s, ([\d,]+) tokens/s, .*$", out, re.M
        )
        assert line is not None, out
        step, rate = float(line.group(1)), float(line.group(2).replace(",", ""))
        assert step > 0 and rate == pytest.approx(tokens / step, rel=1e-2)  # both rounded
        assert "measured," in line.group(0) and "by FLOPs at 40% MFU" in line.group(0)
    assert re.search(r"sweep, measured: 2 trials, .* by FLOPs at 40% MFU", out), out


def test_a_cell_that_fails_to_run_is_one_line() -> None:
    """A cell whose process outlives its limit is one line saying so (its process is ended);
    an out-of-memory error of any device reads as such, any other as its first line."""
    from nas.resources.cell_timing import OOM, _why, measure

    with pytest.raises(ValueError) as err:
        measure(_cfg(max_steps=2), 2, 0.2)  # importing torch and Lightning alone takes longer
    assert str(err.value) == "took longer than 0.2 s"
    assert _why(RuntimeError("CUDA out of memory. Tried to allocate 2 GiB")) == OOM
    assert _why(ValueError("bad\nmore")) == "ValueError: bad"


def test_a_trial_is_its_first_step_then_the_rest_at_the_steady_step() -> None:
    from nas.resources.cell_timing import CellTiming

    timing = CellTiming(
        step_s=0.5, first_step_s=30.0, peak_mem_mb=1.0, mfu=0.3, peak_flops=1e12, device="cpu",
        wall_s=40.0,
    )  # fmt: skip
    assert timing.trial_seconds(1000) == 30.0 + 999 * 0.5
