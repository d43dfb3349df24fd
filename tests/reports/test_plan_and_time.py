"""Plan against cost and the time-matched comparison on constructed sweeps: the planned and the
measured step per arm, an arm flagged where its time per token exceeds its FLOP share by more
than 10%, and each arm's loss at its baseline's training time read from its validation curve,
compared by seed. Every expected figure is worked by hand from the rows."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from record.schema import Metric
from reports.build import build_report
from reports.document import Paragraph, Section, Table
from reports.sections.time_matched import loss_at
from tests.reports.frames import sweep, trial
from trainers.measure.time_plan import RECOMPUTE, planned_seconds

STEPS = 20.0


def _timed(row: dict[str, Any], step_s: float, flops_per_token: float, planned_s: float) -> dict:
    """A row that recorded its step time over 20 steps, its FLOPs per token and its plan."""
    return {
        **row,
        Metric.FINAL_STEPS: STEPS,
        Metric.FINAL_STEP_S: step_s,
        Metric.FINAL_FLOPS_PER_TOKEN: flops_per_token,
        Metric.FINAL_PLANNED_TRAIN_S: planned_s,
        Metric.FINAL_PLANNED_MFU: 0.4,
    }


def _rows() -> list[dict[str, Any]]:
    """Standard: 1 s for 20 steps (50 ms a step), planned 0.8 s. AttnRes: 3 s (150 ms a step)
    for 2% more FLOPs per token, planned 0.816 s: three times the time for 1.02 times the
    FLOPs."""
    rows = []
    for seed in (0, 1, 2):
        rows.append(_timed(trial("standard", seed, 3.0 + seed / 10), 1.0, 1000.0, 0.8))
        attn = trial("attnres", seed, 2.9 + seed / 10, model__residual="attnres")
        rows.append(_timed(attn, 3.0, 1020.0, 0.816))
    return rows


def _curves(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Validation every 5 steps: standard falls 0.1 per validation to its final loss, AttnRes
    0.2 per validation to its own (so AttnRes is worse early, better at its end)."""
    out = []
    for r in rows:
        per = 0.2 if r["arm"] == "attnres" else 0.1
        for k, step in enumerate((5, 10, 15, 20)):
            value = r[Metric.FINAL_VAL_LOSS] + per * (3 - k)
            out.append({"run_id": r["run_id"], "metric": "val/loss", "step": step, "value": value})
    return pd.DataFrame(out)


def _sections(rows: list[dict[str, Any]], curves: pd.DataFrame | None = None) -> dict[str, Section]:
    data = sweep(rows) if curves is None else sweep(rows, curves=curves)
    return {s.title: s for s in build_report(data).sections}


def _plan_table(section: Section) -> dict[str, dict[str, str]]:
    table = next(
        b for b in section.blocks if isinstance(b, Table) and "planned step ms" in b.columns
    )
    return {
        r[0].removesuffix(" (baseline)"): dict(zip(table.columns, r, strict=True))
        for r in table.rows
    }


def test_the_plan_uses_the_flop_count_at_the_assumed_mfu() -> None:
    """By hand: 4e15 FLOPs at 40% of 1e15 FLOP/s is 10 s; checkpointing's extra forward adds a
    third."""
    assert planned_seconds(4e15, "none", 1e15, 0.4) == pytest.approx(10.0)
    assert planned_seconds(4e15, "sublayer", 1e15, 0.4) == pytest.approx(10.0 * 4 / 3)
    assert pytest.approx(4 / 3) == RECOMPUTE


def test_an_arm_three_times_slower_for_two_percent_more_flops_is_flagged() -> None:
    """Planned 40 and 40.8 ms a step against measured 50 and 150; the time share 3.00x over a
    FLOP share of 1.02x is 194% over it, flagged; the baseline is the unit."""
    cost = _sections(_rows())["Cost"]
    table = _plan_table(cost)
    base, arm = table["standard"], table["attnres"]
    assert (base["planned step ms"], base["measured step ms"]) == ("40.0", "50.0")
    assert (arm["planned step ms"], arm["measured step ms"]) == ("40.8", "150.0")
    assert (arm["measured / planned"], arm["FLOPs/token ×"], arm["time/token ×"]) == (
        "3.68",
        "1.020",
        "3.000",
    )
    assert arm["over its FLOP share"] == "+194% ⚑" and base["over its FLOP share"] == "—"
    warnings = [b for b in cost.blocks if isinstance(b, Paragraph) and b.kind == "warning"]
    assert any("`attnres`" in w.text and "10%" in w.text for w in warnings)


def test_an_arm_within_its_flop_share_is_not_flagged() -> None:
    """Time share 1.05 over FLOP share 1.02: 3% over, under the 10% line."""
    rows = [{**r, Metric.FINAL_STEP_S: 1.05} if r["arm"] == "attnres" else r for r in _rows()]
    arm = _plan_table(_sections(rows)["Cost"])["attnres"]
    assert arm["over its FLOP share"] == "+3%"


def test_a_sweep_recorded_before_the_plan_has_neither_table() -> None:
    """Without final/planned_train_s the report is the one it was: no plan table, no
    time-matched section."""
    rows = [{k: v for k, v in r.items() if k != Metric.FINAL_PLANNED_TRAIN_S} for r in _rows()]
    sections = _sections(rows, _curves(rows))
    assert "Matched wall time" not in sections
    assert not any(
        isinstance(b, Table) and "planned step ms" in b.columns for b in sections["Cost"].blocks
    )


def test_a_curve_is_read_between_its_validations() -> None:
    steps, losses = np.array([5.0, 10.0, 20.0]), np.array([4.0, 3.0, 2.0])
    assert loss_at(steps, losses, 7.5) == (3.5, False)
    assert loss_at(steps, losses, 15.0) == (2.5, False)
    assert loss_at(steps, losses, 20.0) == (2.0, False)
    assert loss_at(steps, losses, 40.0) == (2.0, True)  # ended before: its final validation
    value, ended = loss_at(steps, losses, 4.0)
    assert np.isnan(value) and not ended  # before its first validation: nothing to read


def test_at_its_baselines_time_a_slower_arm_is_read_where_it_had_got_to() -> None:
    """Standard trains 20 steps in 1 s; AttnRes, at 150 ms a step, has done 6.67 steps by
    then: between its validations at 5 (final + 0.6) and 10 (final + 0.4), so final + 0.533.
    Paired by seed, AttnRes's final is 0.1 below standard's: at the baseline's time it is
    0.433 above, in every seed."""
    rows = _rows()
    section = _sections(rows, _curves(rows))["Matched wall time"]
    table = next(b for b in section.blocks if isinstance(b, Table))
    (row,) = [dict(zip(table.columns, r, strict=True)) for r in table.rows]
    assert row["arm"] == "attnres" and row["baseline's time s"] == "1"
    assert row["steps reached"] == "7"  # 6.67, to the step
    # seeds 0, 1, 2: finals 2.9, 3.0, 3.1 plus 0.5333
    assert row["val loss at that time"].startswith(f"{3.0 + 0.6 - 0.2 / 3:.4f}")
    assert row["Δ vs baseline [95% CI]"].startswith("+0.4333")
    assert row["read at its end"] == "0 of 3"
    note = next(b for b in section.blocks if isinstance(b, Paragraph))
    assert "Hardware-dependent" in note.text and "cpu" in note.text


def test_a_faster_arm_is_read_at_its_end_and_says_so() -> None:
    """Swap the costs: AttnRes at 1 s for 20 steps, standard at 3 s. At standard's 3 s AttnRes
    had ended, read at its final validation, which the table counts."""
    rows = [{**r, Metric.FINAL_STEP_S: 1.0 if r["arm"] == "attnres" else 3.0} for r in _rows()]
    section = _sections(rows, _curves(rows))["Matched wall time"]
    table = next(b for b in section.blocks if isinstance(b, Table))
    (row,) = [dict(zip(table.columns, r, strict=True)) for r in table.rows]
    assert row["read at its end"] == "3 of 3"
    assert row["Δ vs baseline [95% CI]"].startswith("-0.1000")


def test_a_trial_records_what_the_plan_gave_its_steps() -> None:
    """By hand: 4e15 FLOPs on a 1e15 FLOP/s device at the plan's 40% is 10 s; an unknown peak
    records no plan rather than a made-up one."""
    from types import SimpleNamespace

    from nas.trial.run import _planned

    result = SimpleNamespace(
        cost=SimpleNamespace(peak_flops=1e15), train_flops=4e15, checkpointing="none"
    )
    assert _planned(result) == {
        Metric.FINAL_PLANNED_TRAIN_S: pytest.approx(10.0),
        Metric.FINAL_PLANNED_MFU: 0.4,
    }
    result.cost.peak_flops = float("nan")
    assert _planned(result) == {}
