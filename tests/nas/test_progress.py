"""A sweep's progress as ``nas status`` computes it from what the record holds
(``nas.sweep.progress``): the busy time, the rate and the time left against examples worked by
hand, and the lines in their fixed order. (On real records, through the command:
test_status.py.)"""

from __future__ import annotations

import pytest

from nas.sweep.progress import Planned, TrialState, busy_seconds, progress, render

T0 = 1_767_225_600.0  # 2026-01-01 00:00:00 UTC


def _state(key: str, state: str, start: float, end: float | None, last: float = 0.0) -> TrialState:
    return TrialState(key, state, T0 + start, None if end is None else T0 + end, T0 + last)


def test_busy_time_counts_overlapping_trials_once_and_leaves_gaps_out() -> None:
    """[0, 10] holding [2, 5], a gap, [20, 30] overlapping [25, 40]: 10 + 20 seconds."""
    assert busy_seconds([(20, 30), (0, 10), (25, 40), (2, 5)]) == 30
    assert busy_seconds([]) == 0


def test_rate_and_time_left_as_worked_by_hand() -> None:
    """Finished over [0, 600] and [300, 900], diverged over [900, 1200]: 3 trials ended in
    1200 s of trial time, 9 trials/h. The killed trial (it resumes) is not measured; left to
    run: 1 running, 1 killed, 2 not started = 4 trials, at 3 per 1200 s 1600 s = 26.7 min.
    Last written by the running trial at 1500 s, read 90 s later."""
    trials = [
        _state("a", "finished", 0, 600, 600),
        _state("b", "finished", 300, 900, 900),
        _state("c", "diverged", 900, 1200, 1200),
        _state("d", "killed", 1200, 1300, 1300),
        _state("e", "running", 1300, None, 1500),
    ]
    planned = Planned(keys=frozenset("abcdefg"))
    p = progress(trials, planned, parent_s=T0)
    assert p.counts == {
        "finished": 2,
        "running": 1,
        "failed": 0,
        "diverged": 1,
        "killed": 1,
        "not started": 2,
    }
    assert (p.ended, p.busy_s, p.to_run) == (3, 1200, 4)
    assert p.rate_per_s == pytest.approx(3 / 1200)
    assert p.left_s == pytest.approx(1600)
    assert render("camp", "sqlite:///mlflow.db", "running", p, T0 + 1590) == [
        "sweep camp in sqlite:///mlflow.db: its latest invocation is running",
        "trials: 2 finished, 1 running, 0 failed, 1 diverged, 1 killed, 2 not started "
        "(of 7 planned)",
        "rate: 9 trials/h (3 ended trials in 20 min of trial time, trials side by side "
        "counted once)",
        "time left (estimate): 26.7 min for 4 trials (1 running, 1 killed, 2 not started) at "
        "that rate, each running trial counted whole",
        "last written: 2026-01-01 00:25:00 UTC (1.5 min ago)",
    ]


def test_nothing_ended_yet_leaves_rate_and_time_left_unknown() -> None:
    """Only a running trial: no rate to measure, so no time left; the latest write is the
    trial's."""
    p = progress([_state("a", "running", 0, None, 30)], Planned(requested=4), parent_s=T0)
    lines = render("s", "store", "killed", p, T0 + 30)
    assert lines[0] == "sweep s in store: its latest invocation ended (killed)"
    assert lines[1] == "trials: 0 finished, 1 running, 0 failed, 3 not started (of 4 planned)"
    assert lines[2:] == [
        "rate: unknown (no trial has ended yet)",
        "time left: unknown for 4 trials (no trial has ended yet)",
        "last written: 2026-01-01 00:00:30 UTC (0 s ago)",
    ]


def test_a_plan_with_every_trial_settled_has_no_time_left() -> None:
    """Every planned trial has an outcome (a failed one too: the same command retries it, the
    running invocation does not): nothing is left to run."""
    trials = [_state("a", "finished", 0, 60, 60), _state("b", "failed", 0, 30, 30)]
    p = progress(trials, Planned(keys=frozenset("ab")))
    assert p.to_run == 0 and render("s", "st", "finished", p, T0 + 60)[3] == (
        "time left: none (every planned trial has an outcome)"
    )


def test_a_stage_not_settled_leaves_the_total_open_until_it_is() -> None:
    """Stage trials a and b plan more once both are settled: with b running the plan is only
    what is known so far and the time left a lower bound; with b diverged (an outcome: its
    value is out of the choice) the plan is whole."""
    planned = Planned(
        keys=frozenset("abc"), stage=frozenset("ab"), stage_name="learning-rate stage"
    )
    a = _state("a", "finished", 0, 60, 60)
    open_ = progress([a, _state("b", "running", 60, None, 90)], planned)
    assert open_.more == "learning-rate stage"
    assert render("t", "st", "running", open_, T0 + 90)[3] == (
        "time left (estimate): at least 2 min for 2 trials (1 running, 1 not started) at that "
        "rate, each running trial counted whole"
    )
    assert progress([a, _state("b", "diverged", 60, 90, 90)], planned).more == ""


def test_a_status_this_version_does_not_know_is_shown_not_measured() -> None:
    """A newer harness's status is counted after the known ones, and is neither measured in
    the rate nor left to run."""
    trials = [_state("a", "finished", 0, 60, 60), _state("b", "paused", 0, 30, 30)]
    p = progress(trials, Planned(keys=frozenset("ab")))
    assert list(p.counts.items()) == [
        ("finished", 1),
        ("running", 0),
        ("failed", 0),
        ("paused", 1),
        ("not started", 0),
    ]
    assert (p.ended, p.busy_s, p.to_run) == (1, 60, 0)
