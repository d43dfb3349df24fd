"""search_spaces/seed_choice.py: the seeds a pilot's noise asks for, from constructed paired
differences (no sweep)."""

from __future__ import annotations

import math
import statistics

import pytest

from search_spaces.seed_choice import SeedRule, choose, paired_sd
from stats.power import POWER, seeds_needed

PILOT = 3
WIDE = [0.01, -0.02, 0.015]  # sd 0.0189
NARROW = [0.004, 0.0, 0.002]  # sd 0.002


def test_seeds_are_the_worst_comparisons_need_at_holms_first_step() -> None:
    """Two comparisons: each sized at alpha / 2, the count the larger need (the noisier one)."""
    rule = SeedRule(effect=0.03, cap=50)
    choice = choose({"a": ("std", WIDE), "b": ("std", NARROW)}, rule, PILOT)
    assert choice.alpha_each == pytest.approx(0.025)
    wide = seeds_needed(statistics.stdev(WIDE), 0.03, 0.025, POWER, cap=50)
    assert wide is not None and choice.needs["a"].needed == wide
    assert choice.needs["b"].needed == seeds_needed(statistics.stdev(NARROW), 0.03, 0.025)
    assert choice.seeds == max(wide, PILOT) and choice.seeds > PILOT


def test_a_need_over_the_cap_takes_the_cap() -> None:
    """A comparison needing more seeds than --max-seeds: the cap, said as over it."""
    choice = choose({"a": ("std", WIDE)}, SeedRule(effect=0.001, cap=7), PILOT)
    assert choice.needs["a"].over_cap and choice.needs["a"].needed is None
    assert choice.seeds == 7


def test_never_fewer_seeds_than_the_pilot_ran() -> None:
    """A quiet pilot needs fewer seeds than it ran: the sweep keeps the pilot's."""
    choice = choose({"a": ("std", NARROW)}, SeedRule(effect=0.5), 5)
    assert choice.needs["a"].needed is not None and choice.needs["a"].needed < 5
    assert choice.seeds == 5


def test_the_pilots_mean_difference_does_not_change_the_choice() -> None:
    """Variance only: shifting every paired difference (another Δ, the same sd) chooses the same
    seeds, whether the pilot's Δ is 0 or far beyond the effect."""
    rule = SeedRule(effect=0.02, cap=40)
    base = choose({"a": ("std", WIDE)}, rule, PILOT)
    for shift in (-1.0, 0.02, 3.0):
        moved = choose({"a": ("std", [d + shift for d in WIDE])}, rule, PILOT)
        assert moved.seeds == base.seeds
        assert moved.needs["a"].needed == base.needs["a"].needed
        assert moved.needs["a"].sd == pytest.approx(base.needs["a"].sd, rel=1e-9)


def test_a_comparison_with_too_few_finished_pairs_is_not_sized() -> None:
    """Pairs with a trial that did not finish (inf) leave the noise estimate; under 3 remain: not
    estimated, not counted in Holm's family, not driving the count."""
    assert paired_sd([0.1, math.inf, math.nan, 0.2]) == (None, 2)
    choice = choose(
        {"a": ("std", [0.1, math.inf, 0.2]), "b": ("std", NARROW)}, SeedRule(effect=0.01), PILOT
    )
    assert choice.needs["a"].sd is None and choice.alpha_each == pytest.approx(0.05)
    assert choice.seeds == max(PILOT, choice.needs["b"].needed or 0)


@pytest.mark.parametrize(
    ("effect", "cap", "match"),
    [(0.0, 12, "--effect"), (-0.1, 12, "--effect"), (math.nan, 12, "--effect"), (0.02, 2, "--max")],
)
def test_a_bad_rule_is_refused(effect: float, cap: int, match: str) -> None:
    """A non-positive or non-finite effect, a cap under 3 seeds: ValueError naming the flag."""
    with pytest.raises(ValueError, match=match):
        SeedRule(effect=effect, cap=cap)


def test_a_pilot_is_at_least_3_seeds_and_within_the_cap() -> None:
    """The pilot must estimate the noise (3 seeds) and fit under --max-seeds."""
    with pytest.raises(ValueError, match="at least 3 seeds"):
        SeedRule(effect=0.02).check_pilot((0, 1))
    with pytest.raises(ValueError, match="--max-seeds 3: below the pilot's 4"):
        SeedRule(effect=0.02, cap=3).check_pilot((0, 1, 2, 3))
    SeedRule(effect=0.02, cap=3).check_pilot((0, 1, 2))
