"""``--peak-flops``: checked with the plan, carried to every trial, and no part of the plan."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import pytest

from nas.store.tracking import SweepRecord
from nas.sweep.opening import context
from nas.sweep.plan import SweepOptions, plan
from trainers.config import flatten


def test_peak_flops_reaches_the_trials_and_leaves_the_plan_alone(tmp_path: Path) -> None:
    """The same sweep with and without --peak-flops plans the same base and trial keys (the
    record does not read it as a changed plan); the trials' context carries the figure."""
    opts = SweepOptions(space="smoke", storage_path=str(tmp_path / "ray"))
    plain, given = plan(opts), plan(replace(opts, peak_flops=5e14))
    assert flatten(plain.base) == flatten(given.base)
    assert [s.key for s in plain.specs] == [s.key for s in given.specs]
    record = SweepRecord("sqlite:///unused.db", "1", "parent", "smoke")
    assert context(replace(opts, peak_flops=5e14), given, record).peak_flops == 5e14
    assert context(opts, plain, record).peak_flops is None


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan")])
def test_a_bad_peak_flops_is_refused_before_anything_runs(tmp_path: Path, bad: float) -> None:
    """A peak that is not a positive number is bad input, named by its option."""
    with pytest.raises(ValueError, match="--peak-flops"):
        plan(SweepOptions(space="smoke", storage_path=str(tmp_path), peak_flops=bad))


def test_sweep_and_train_accept_peak_flops() -> None:
    """Both commands take --peak-flops as a number of FLOP/s."""
    from nas.cli import build_parser

    parser = build_parser()
    assert isinstance(parser, argparse.ArgumentParser)
    assert parser.parse_args(["sweep", "smoke", "--peak-flops", "1e15"]).peak_flops == 1e15
    assert parser.parse_args(["train", "--peak-flops", "2e12"]).peak_flops == 2e12
