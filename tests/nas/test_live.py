"""The live view's table and progress bar (pure rendering; the callbacks run in the real
sweeps of test_sweep.py)."""

from __future__ import annotations

import math

from nas.sweep.live import MAX_ROWS, TrialRow, progress_bar, render_table


def test_progress_bar_fills_in_proportion() -> None:
    assert progress_bar(0, 4, width=8) == "[........] 0/4 trials"
    assert progress_bar(2, 4, width=8) == "[####....] 2/4 trials"
    assert progress_bar(4, 4, width=8) == "[########] 4/4 trials"


def test_table_lists_running_trials_first_and_counts_every_state() -> None:
    rows = {
        "a": TrialRow("standard seed 0", "finished", 100, 2.5, 2.4, started=0.0, ended=10.0),
        "b": TrialRow("attnres seed 0", "running", 50, 2.7, 2.6, started=5.0),
        "c": TrialRow("bad", "diverged", 0, math.nan, math.inf, started=1.0, ended=2.0),
    }
    text = render_table(rows, total=5, elapsed=75.0, earlier=1)
    lines = text.splitlines()
    assert lines[1].startswith("attnres seed 0") and "running" in lines[1]
    assert "2.6000" in lines[1] and "2.4000" in text
    assert lines[-1].startswith(progress_bar(3, 5))  # two ended + one an earlier run settled
    assert "1 running, 1 finished, 1 diverged, 1 settled earlier" in lines[-1]
    assert lines[-1].endswith("elapsed 1:15")


def test_long_sweeps_show_a_bounded_table() -> None:
    rows = {str(i): TrialRow(f"t{i}", "finished", started=0.0, ended=float(i)) for i in range(50)}
    lines = render_table(rows, total=50, elapsed=1.0).splitlines()
    assert len(lines) == 1 + MAX_ROWS + 2
    assert lines[1].startswith("t49")  # most recently ended first
    assert lines[-2] == f"... and {50 - MAX_ROWS} more"
