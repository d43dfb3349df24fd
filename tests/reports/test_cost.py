"""The cost section on constructed sweeps: each arm's means, its overheads against its baseline,
the sweep's total device-hours, and "—" (never 0) for trials recorded before cost was measured."""

from __future__ import annotations

from typing import Any

import pytest

from record.schema import Metric, Status
from reports.build import build_report
from reports.document import Paragraph, Section, Table
from reports.sections.cost import COLUMNS, NVML_COLUMNS, sweep_total
from tests.reports.frames import sweep, trial


def _costly(row: dict[str, Any], step_s: float, mem: float, hours: float, **more: Any) -> dict:
    """A trial row that recorded its cost (20 steps, MFU 0.4, on CPU cores)."""
    return {
        **row,
        Metric.FINAL_STEPS: 20.0,
        Metric.FINAL_STEP_S: step_s,
        Metric.FINAL_PEAK_MEM_MB: mem,
        Metric.FINAL_MFU: 0.4,
        Metric.FINAL_DEVICE_HOURS: hours,
        "device_unit": "CPU core",
        "peak_flops_source": "measured: cpu fp32 matmul, 2 threads",
        **more,
    }


def _section(rows: list[dict[str, Any]]) -> Section:
    doc = build_report(sweep(rows))
    return next(s for s in doc.sections if s.title == "Cost")


def _table(section: Section) -> dict[str, dict[str, str]]:
    table = next(b for b in section.blocks if isinstance(b, Table))
    return {
        r[0].removesuffix(" (baseline)"): dict(zip(table.columns, r, strict=True))
        for r in table.rows
    }


def _text(section: Section) -> str:
    return " ".join(b.text for b in section.blocks if isinstance(b, Paragraph))


def test_arm_means_and_overheads_against_the_baseline() -> None:
    """Means over finished seeds only; time x and mem x are step time and peak memory over the
    baseline's (1.00x for the baseline itself); MFU in percent; no NVML columns on a CPU."""
    rows = [
        _costly(trial("standard", 0, 3.0), 2.0, 400.0, 0.01),
        _costly(trial("standard", 1, 3.2), 2.0, 400.0, 0.01),
        _costly(trial("attnres", 0, 2.9, model__residual="attnres"), 3.0, 500.0, 0.02),
        _costly(trial("attnres", 1, 2.9, model__residual="attnres"), 3.4, 540.0, 0.02),
        _costly(
            trial("attnres", 2, None, Status.DIVERGED, model__residual="attnres"), 99, 9e9, 0.5
        ),
    ]
    table = _table(_section(rows))
    assert list(next(iter(table.values()))) == list(COLUMNS)
    base, arm = table["standard"], table["attnres"]
    assert (base["time ×"], base["mem ×"]) == ("1.00×", "1.00×")
    assert (arm["time ×"], arm["mem ×"]) == ("1.60×", "1.30×")  # 160 / 100 ms, 520 / 400 MB
    assert (arm["step ms"], arm["peak mem MB"], arm["MFU"]) == ("160.0", "520", "40.0%")
    assert arm["final val loss"] == "2.9000" and arm["device-hours"] == "0.02"


def test_a_resumed_trial_s_step_time_is_over_the_steps_it_timed() -> None:
    """A trial resumed from its checkpoint timed only its last attempt's steps: its step time is
    step_s over final/timed_steps (5 steps in 1 s: 200 ms), not over all 20 steps (50 ms);
    records from before timed_steps divide by every step."""
    rows = [
        _costly(trial("standard", 0, 3.0), 2.0, 400.0, 0.01),
        _costly(trial("standard", 1, 3.0), 2.0, 400.0, 0.01, **{Metric.FINAL_TIMED_STEPS: 20.0}),
        _costly(
            trial("resumed", 0, 2.9, model__norm="layernorm"),
            1.0,
            400.0,
            0.01,
            **{Metric.FINAL_TIMED_STEPS: 5.0},
        ),
    ]
    table = _table(_section(rows))
    assert table["standard"]["step ms"] == "100.0"
    assert table["resumed"]["step ms"] == "200.0"


def test_sweep_total_counts_every_trial_that_recorded_it() -> None:
    """The total sums device-hours over every status (a diverged trial spent them), by unit, and
    says how many trials recorded none."""
    rows = [
        _costly(trial("standard", 0, 3.0), 2.0, 400.0, 0.25),
        _costly(trial("standard", 1, None, Status.DIVERGED), 1.0, 400.0, 0.5),
        _costly(trial("standard", 2, 3.1), 2.0, 100.0, 2.0, device_unit="GPU"),
        trial("standard", 3, 3.0),  # recorded before cost was measured
    ]
    assert sweep_total(sweep(rows).trials) == pytest.approx({"CPU core": 0.75, "GPU": 2.0})
    text = _text(_section(rows))
    assert "Sweep total: 0.75 CPU core-hours + 2 GPU-hours, over the 3 of 4 trials" in text


def test_runs_without_cost_metrics_show_a_dash_never_zero() -> None:
    """A sweep recorded before cost was measured: every cost cell is "—", the total too; the
    loss and tokens/s (recorded before) still show."""
    section = _section([trial("standard", 0, 3.0), trial("hyper", 0, 2.9, model__residual="hyper")])
    for row in _table(section).values():
        assert row["final val loss"] != "—" and row["tokens/s"] == "1,000"
        assert {row[c] for c in COLUMNS if c not in ("arm", "final val loss", "tokens/s")} == {"—"}
    assert "Sweep total: —, over the 0 of 2 trials" in _text(section)
    assert sweep_total(sweep([trial("standard", 0, 3.0)]).trials) == {}


def test_nvml_columns_appear_only_where_recorded() -> None:
    """GPU utilisation and power columns appear when some trial recorded them; an arm without
    them shows "—"."""
    gpu = {Metric.FINAL_GPU_UTIL: 87.0, Metric.FINAL_GPU_POWER_W: 412.0, "device_unit": "GPU"}
    rows = [
        _costly(trial("standard", 0, 3.0), 2.0, 400.0, 0.01, **gpu),
        _costly(trial("hyper", 0, 2.9, model__residual="hyper"), 2.0, 400.0, 0.01),
    ]
    table = _table(_section(rows))
    assert (table["standard"][NVML_COLUMNS[0]], table["standard"][NVML_COLUMNS[1]]) == ("87", "412")
    assert table["hyper"][NVML_COLUMNS[0]] == "—"


def test_an_mfu_above_one_is_flagged_not_hidden() -> None:
    """A mean MFU above 100% (a CPU peak timed while other trials shared the cores) is shown as
    measured and named in a warning that says why and what to do; arms below 100% are not."""
    rows = [
        _costly(trial("standard", 0, 3.0), 2.0, 400.0, 0.01),
        _costly(
            trial("fast", 0, 2.9, model__norm="layernorm"),
            2.0,
            400.0,
            0.01,
            **{Metric.FINAL_MFU: 1.7},
        ),
    ]
    section = _section(rows)
    assert _table(section)["fast"]["MFU"] == "170.0%"
    (warning,) = [b for b in section.blocks if isinstance(b, Paragraph) and "above 100%" in b.text]
    assert warning.kind == "warning" and "`fast`" in warning.text
    assert "`standard`" not in warning.text and "--peak-flops" in warning.text


def test_decode_speed_and_its_overhead_against_the_baseline() -> None:
    """decode tok/s is the mean over finished seeds; decode × is the time per decoded token over
    the baseline's, the inverse ratio of the rates (an arm decoding at half the baseline's rate
    costs 2.00×)."""
    decode = Metric.FINAL_DECODE_TOKENS_PER_S
    rows = [
        _costly(trial("standard", 0, 3.0), 2.0, 400.0, 0.01, **{decode: 400.0}),
        _costly(trial("standard", 1, 3.2), 2.0, 400.0, 0.01, **{decode: 400.0}),
        _costly(trial("mhc", 0, 2.9, model__residual="mhc"), 3.0, 500.0, 0.02, **{decode: 150.0}),
        _costly(trial("mhc", 1, 2.9, model__residual="mhc"), 3.0, 500.0, 0.02, **{decode: 250.0}),
    ]
    table = _table(_section(rows))
    assert (table["standard"]["decode tok/s"], table["standard"]["decode ×"]) == ("400", "1.00×")
    assert (table["mhc"]["decode tok/s"], table["mhc"]["decode ×"]) == ("200", "2.00×")


def test_the_kernels_each_arm_ran_are_named_and_a_mix_is_flagged() -> None:
    """Trials that recorded their kernels: one shared path reads as one line; arms (or one
    arm's seeds) on different paths are each named, with counts where an arm mixed them, and
    the note says their times compare kernels too. A sweep recorded before the tags says
    nothing of kernels."""

    def ran(row: dict[str, Any], compiled: str, path: str = "") -> dict[str, Any]:
        extra = {"compiled": compiled} | ({"depth_path": path} if path else {})
        return _costly(row, 2.0, 400.0, 0.01, **extra)

    block = {"model__residual": "block_attnres"}
    same = [
        ran(trial("standard", 0, 3.0), "false"),
        ran(trial("standard", 1, 3.1), "false"),
        ran(trial("block", 0, 2.9, **block), "false", "buffered"),
    ]
    # standard has no depth softmax: its lack of a mixing path is no difference
    text = _text(_section(same))
    assert "every trial that recorded them ran eager (depth mixing: buffered)." in text
    assert "differ" not in text.split("Kernels")[1]
    mixed = [
        ran(trial("standard", 0, 3.0), "true"),
        ran(trial("standard", 1, 3.1), "true"),
        ran(trial("block", 0, 2.9, **block), "false", "fused"),
        ran(trial("block", 1, 2.9, **block), "false", "buffered"),
    ]
    text = _text(_section(mixed))
    assert "Kernels differ between trials" in text
    assert "standard: compiled" in text and "standard: compiled (" not in text
    assert "block: eager, fused (1), eager, buffered (1)" in text
    old = [_costly(trial("standard", 0, 3.0), 2.0, 400.0, 0.01)]
    assert "Kernels" not in _text(_section(old))
