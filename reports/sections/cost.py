"""The cost section: what each arm's trials cost on their devices (means over its finished
seeds), its loss beside its time and memory overhead against its baseline, and what the whole
sweep spent in device-hours. A trial recorded before the harness measured its cost shows "—",
never 0.

The overheads sit here rather than in the results table, which already holds 13 columns: this
table repeats each arm's final loss beside them, so that a wiring's gain and its price read on
one row (AttnRes and Hyper-Connections claim both)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from record.schema import Metric
from reports.ablation import ArmRow, arm_frames
from reports.document import Paragraph, Section, Table
from reports.normalize import TrialView
from reports.sections.cells import column_mean, fmt, fmt_number
from reports.sections.plan_cost import plan_blocks
from reports.sweep import SweepData

COLUMNS = (
    "arm",
    "final val loss",
    "time ×",
    "mem ×",
    "step ms",
    "tokens/s",
    "peak mem MB",
    "MFU",
    "device-hours",
)
# Shown where some trial recorded its decode speed (trials before it did not).
DECODE_COLUMNS = ("decode tok/s", "decode ×")
NVML_COLUMNS = ("GPU util %", "GPU W")
STEP_MS = "step_ms"  # derived per trial: time inside training steps per step


@dataclass(frozen=True)
class ArmCost:
    """One arm's means over its finished trials; NaN where none recorded the figure."""

    arm: str
    baseline: str | None
    loss: float
    step_ms: float
    tokens_per_s: float
    peak_mem_mb: float
    mfu: float
    device_hours: float
    decode_tokens_per_s: float
    gpu_util: float
    gpu_power_w: float


def arm_costs(view: TrialView, rows: list[ArmRow]) -> list[ArmCost]:
    """The cost of each arm of ``rows`` (the results table's, in its order), over the same
    finished trials its statistics use."""
    finished = view.comparable.assign(**{STEP_MS: view.step_ms})
    out = []
    for row, done in arm_frames(finished, rows):
        out.append(
            ArmCost(
                arm=row.arm,
                baseline=row.baseline,
                loss=row.final.mean,
                step_ms=column_mean(done, STEP_MS),
                tokens_per_s=column_mean(done, Metric.FINAL_TOKENS_PER_S),
                peak_mem_mb=column_mean(done, Metric.FINAL_PEAK_MEM_MB),
                mfu=column_mean(done, Metric.FINAL_MFU),
                device_hours=column_mean(done, Metric.FINAL_DEVICE_HOURS),
                decode_tokens_per_s=column_mean(done, Metric.FINAL_DECODE_TOKENS_PER_S),
                gpu_util=column_mean(done, Metric.FINAL_GPU_UTIL),
                gpu_power_w=column_mean(done, Metric.FINAL_GPU_POWER_W),
            )
        )
    return out


def _ratio(value: float, base: float) -> str:
    return f"{value / base:.2f}×" if math.isfinite(value / base) and base > 0 else "—"


def _cells(c: ArmCost, base: ArmCost | None, nvml: bool, decode: bool) -> tuple[str, ...]:
    time_x = _ratio(c.step_ms, base.step_ms) if base else "—"
    mem_x = _ratio(c.peak_mem_mb, base.peak_mem_mb) if base else "—"
    # time per decoded token over the baseline's: the inverse ratio of the rates
    decode_x = _ratio(base.decode_tokens_per_s, c.decode_tokens_per_s) if base else "—"
    cells: tuple[str, ...] = (
        c.arm + (" (baseline)" if c.baseline == c.arm else ""),
        fmt(c.loss),
        time_x,
        mem_x,
        fmt_number(c.step_ms, ",.1f"),
        fmt_number(c.tokens_per_s, ",.0f"),
        fmt_number(c.peak_mem_mb, ",.0f"),
        fmt_number(100 * c.mfu, ".1f") + ("%" if math.isfinite(c.mfu) else ""),
        fmt_number(c.device_hours, ".3g"),
    )
    if decode:
        cells = (*cells, fmt_number(c.decode_tokens_per_s, ",.0f"), decode_x)
    return (
        (*cells, fmt_number(c.gpu_util, ".0f"), fmt_number(c.gpu_power_w, ".0f")) if nvml else cells
    )


def sweep_total(trials: pd.DataFrame) -> dict[str, float]:
    """Device-hours summed over every trial that recorded them, whatever its status (a
    diverged trial spent its time too), by what they count ("GPU", "CPU core")."""
    if trials.empty or Metric.FINAL_DEVICE_HOURS not in trials:
        return {}
    hours = pd.to_numeric(trials[Metric.FINAL_DEVICE_HOURS], errors="coerce")
    units = trials.get("device_unit", pd.Series(None, index=trials.index, dtype=object))
    recorded = trials.assign(_hours=hours, _unit=units.fillna("device"))[hours.notna()]
    return {str(u): float(h) for u, h in recorded.groupby("_unit")["_hours"].sum().items()}


def _total_note(view: TrialView) -> Paragraph:
    total = sweep_total(view.labelled)
    ran = view.configured
    recorded = (
        int(pd.to_numeric(ran[Metric.FINAL_DEVICE_HOURS], errors="coerce").notna().sum())
        if Metric.FINAL_DEVICE_HOURS in ran
        else 0
    )
    spent = " + ".join(f"{h:.3g} {unit}-hours" for unit, h in sorted(total.items())) or "—"
    text = f"Sweep total: {spent}, over the {recorded} of {len(ran)} trials that recorded it."
    if recorded < len(ran):
        text += (
            " The others recorded none: trials recorded before the harness measured cost, "
            "and trials that failed, were interrupted or were stopped by the scheduler before "
            "their final metrics (their time is spent but not counted)."
        )
    return Paragraph(text)


KernelPath = tuple[str, str]  # ("compiled" or "eager", the depth mixing's path or "")


def kernel_paths(trials: pd.DataFrame) -> dict[str, dict[KernelPath, int]]:
    """Per arm, how many of its trials ran each path: compiled or eager, and the depth
    mixing's implementation where the wiring has one; only trials that recorded it
    (``nas.trial.run`` tags each since issue 47)."""
    if "compiled" not in trials:
        return {}
    recorded = trials[trials["compiled"].notna()]
    mixing = recorded.get("depth_path", pd.Series("", index=recorded.index)).fillna("")
    names = recorded["compiled"].map({"true": "compiled", "false": "eager"}).fillna("?")
    out: dict[str, dict[KernelPath, int]] = {}
    for arm, name, mix in zip(recorded["arm"], names, mixing, strict=True):
        counts = out.setdefault(str(arm), {})
        counts[(name, mix)] = counts.get((name, mix), 0) + 1
    return out


def _shown(path: KernelPath) -> str:
    return path[0] + (f", {path[1]}" if path[1] else "")


def _kernels_note(trials: pd.DataFrame) -> list[Paragraph]:
    """One line on the kernels the arms ran. Two choices differ between trials by their
    settings, not their wirings: compiled or eager, and, where a wiring has a depth softmax,
    the fused kernels or not (its other paths follow from its switches). Where arms (or one
    arm's seeds) differ in either, each arm's paths are named, since their times then compare
    kernels as well as wirings, and their losses differ by the paths' roundings too."""
    paths = kernel_paths(trials)
    every = {p for counts in paths.values() for p in counts}
    if not every:
        return []
    compiled = {c for c, _ in every}
    fused = {m == "fused" for _, m in every if m}
    if len(compiled) == 1 and len(fused) <= 1:
        mixing = sorted({m for _, m in every if m})
        where = f" (depth mixing: {', '.join(mixing)})" if mixing else ""
        return [Paragraph(f"Kernels: every trial that recorded them ran {compiled.pop()}{where}.")]
    by_arm = "; ".join(
        f"{arm}: "
        + ", ".join(f"{_shown(p)} ({n})" if len(c) > 1 else _shown(p) for p, n in c.items())
        for arm, c in sorted(paths.items())
    )
    return [
        Paragraph(
            "Kernels differ between trials (train.compile, train.depth_path): "
            f"{by_arm}. Their step times compare kernels as well as wirings, and their losses "
            "differ by the paths' roundings too; pin one path to compare wirings alone."
        )
    ]


def _sources(trials: pd.DataFrame) -> str:
    if "peak_flops_source" not in trials:
        return ""
    found = trials["peak_flops_source"].dropna().astype(str).value_counts()
    return "; ".join(f"{s} ({n} trials)" for s, n in found.items())


def cost_section(data: SweepData, rows: list[ArmRow]) -> Section | None:
    """Each arm of the results table with its cost and overheads, and the sweep's total."""
    if not rows:
        return None
    costs = arm_costs(data.view, rows)
    by_arm = {c.arm: c for c in costs}
    nvml = any(math.isfinite(c.gpu_util) for c in costs)
    decode = any(math.isfinite(c.decode_tokens_per_s) for c in costs)
    body = tuple(_cells(c, by_arm.get(c.baseline or ""), nvml, decode) for c in costs)
    highlight = tuple(i for i, c in enumerate(costs) if c.baseline == c.arm)
    caption = "means over each arm's finished seeds, in the results table's order"
    columns = COLUMNS + (DECODE_COLUMNS if decode else ()) + (NVML_COLUMNS if nvml else ())
    table = Table(columns, body, caption, highlight)
    sources = _sources(data.view.configured)
    notes = [
        Paragraph(
            "time × and mem × are the arm's step time (time inside training steps per step) "
            "and peak memory over its baseline's. Peak memory is torch's allocated peak on a "
            "GPU; on a CPU, what the fit added to the process's resident set at its peak "
            "(optimizer state, activations and batches; not the weights built before the fit, "
            "nor the process's footprint). MFU is "
            "training FLOPs per token (trainers/flops.py, the wiring's included) times the "
            "tokens trained per second of the fit, over the device's peak"
            + (f": {sources}." if sources else ".")
            + " Device-hours are the trial's time times its devices: GPU-hours on a GPU, "
            "core-hours on a CPU (its threads). — : not recorded (a trial recorded before "
            "the harness measured cost)." + (DECODE_NOTE if decode else "")
        ),
        _total_note(data.view),
        *_kernels_note(data.view.comparable),
        *_impossible_mfu(costs),
        *plan_blocks(data.view, rows),
    ]
    return Section("Cost", (table, *notes))


DECODE_NOTE = (
    " decode tok/s: greedy decoding at batch 1 with the KV cache after training, 32 tokens "
    "after a prompt of half the context (trainers/measure/decode_cost.py, on the trial's own "
    "device, "
    "which other trials may share); decode × is the time per decoded token over the baseline's."
)


def _impossible_mfu(costs: list[ArmCost]) -> list[Paragraph]:
    """A warning where an arm's mean MFU exceeds 100%: its peak was understated. A CPU's peak is
    a matmul timed at the trial's start, which reads low when other trials share the cores."""
    over = [c.arm for c in costs if math.isfinite(c.mfu) and c.mfu > 1.0]
    if not over:
        return []
    return [
        Paragraph(
            "MFU above 100% for "
            + ", ".join(f"`{a}`" for a in over)
            + ": the peak it divides by is too low. On a CPU the peak is a matmul timed at the "
            "trial's start, which reads low when other trials share the cores; these MFUs "
            "compare arms of this sweep with each other at most. Give the machine's peak with "
            "`--peak-flops` for absolute figures.",
            "warning",
        )
    ]
