"""stats/compare.py: intervals and tests checked against hand computation and the properties
the math guarantees, not against numbers read off the implementation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from stats.compare import Comparison, adjust, compare, holm, mean_ci, verdict

SAMPLE = [1.0, 2.0, 3.0, 4.0, 5.0]


def test_mean_ci_matches_hand_computed_t_interval() -> None:
    """Mean 3, s = √2.5, t(0.975, df=4) = 2.7764 from a t-table: half-width 2.7764 · √2.5 / √5."""
    ci = mean_ci(SAMPLE)
    assert ci.n == 5
    assert ci.mean == pytest.approx(3.0)
    assert ci.half_width == pytest.approx(2.7764 * math.sqrt(2.5) / math.sqrt(5), rel=1e-4)


def test_mean_ci_wider_at_higher_level() -> None:
    """A 99% interval contains the 95% one."""
    assert mean_ci(SAMPLE, 0.99).half_width > mean_ci(SAMPLE, 0.95).half_width


def test_mean_ci_is_symmetric_about_the_mean() -> None:
    """low and high sit the same distance either side of the mean."""
    ci = mean_ci([0.3, 1.7, 2.2, 0.9])
    assert ci.mean - ci.low == pytest.approx(ci.high - ci.mean)


@pytest.mark.parametrize("shift", [-10.0, 0.5, 1e3])
def test_mean_ci_is_shift_equivariant(shift: float) -> None:
    """Adding a constant moves the interval by it and leaves its width alone."""
    ci, moved = mean_ci(SAMPLE), mean_ci([v + shift for v in SAMPLE])
    assert moved.mean == pytest.approx(ci.mean + shift)
    assert moved.half_width == pytest.approx(ci.half_width)


@pytest.mark.parametrize("scale", [-3.0, 0.01, 7.0])
def test_mean_ci_is_scale_equivariant(scale: float) -> None:
    """Multiplying by k scales the mean by k and the half-width by |k|."""
    ci, scaled = mean_ci(SAMPLE), mean_ci([v * scale for v in SAMPLE])
    assert scaled.mean == pytest.approx(ci.mean * scale)
    assert scaled.half_width == pytest.approx(ci.half_width * abs(scale))


def test_mean_ci_drops_nan_and_handles_tiny_samples() -> None:
    """NaNs are dropped; one value has no half-width; no values have no mean."""
    with_nan = mean_ci([1.0, math.nan, 2.0, 3.0, 4.0, 5.0])
    assert with_nan == mean_ci(SAMPLE)
    one = mean_ci([2.5, math.nan])
    assert (one.mean, one.n) == (2.5, 1) and math.isnan(one.half_width)
    none = mean_ci([])
    assert none.n == 0 and math.isnan(none.mean) and math.isnan(none.half_width)


# Seed effects dominate (spread ~1.6); the variant adds a constant 0.1 plus small noise.
SEED_EFFECT = {0: 1.0, 1: 2.0, 2: 3.0, 3: 4.0, 4: 5.0}
NOISE = {0: 0.01, 1: -0.01, 2: 0.0, 3: 0.005, 4: -0.005}
SHIFTED = {s: SEED_EFFECT[s] + 0.1 + NOISE[s] for s in SEED_EFFECT}


def test_paired_equals_one_sample_test_on_differences() -> None:
    """Same seed sets: p is the one-sample t-test of the differences, and the CI is their
    mean_ci."""
    c = compare(SEED_EFFECT, SHIFTED)
    d = [SHIFTED[s] - SEED_EFFECT[s] for s in SEED_EFFECT]
    assert c.test == "paired t" and c.n == 5
    assert c.p == pytest.approx(stats.ttest_1samp(d, 0.0).pvalue)
    ci = mean_ci(d)
    assert (c.diff, c.low, c.high) == pytest.approx((ci.mean, ci.low, ci.high))


def test_paired_detects_a_constant_shift_that_welch_misses() -> None:
    """The seed component cancels in the pairs; unpaired, it swamps the 0.1 shift."""
    paired = compare(SEED_EFFECT, SHIFTED)
    assert paired.p < 1e-3 and verdict(paired) == "worse"
    relabelled = {s + 100: v for s, v in SHIFTED.items()}
    welch = compare(SEED_EFFECT, relabelled)
    assert welch.test == "Welch t"
    assert welch.p > 0.5 and verdict(welch) == "not significant"
    assert welch.diff == pytest.approx(paired.diff)


def test_mismatched_seed_sets_fall_back_to_welch() -> None:
    """Different seed sets: Welch's t-test with diff = other mean − baseline mean."""
    base = {0: 1.0, 1: 1.4, 2: 0.9}
    other = {0: 0.7, 1: 0.8, 5: 0.6, 6: 0.75}
    c = compare(base, other)
    assert c.test == "Welch t" and c.n == 3
    expected = stats.ttest_ind(list(other.values()), list(base.values()), equal_var=False)
    assert c.p == pytest.approx(expected.pvalue)
    assert c.diff == pytest.approx(np.mean(list(other.values())) - np.mean(list(base.values())))
    assert c.low < c.diff < c.high


def test_one_seed_is_too_few() -> None:
    """A single seed on either side supports no test."""
    for base, other in [({0: 1.0}, {0: 0.5}), ({0: 1.0, 1: 1.1}, {0: 0.5})]:
        c = compare(base, other)
        assert c.test == "too few seeds" and math.isnan(c.p)
        assert verdict(c) == "too few seeds"


def test_nan_values_are_dropped_before_choosing_the_test() -> None:
    """A seed whose value is NaN no longer counts, so the seed sets differ: Welch."""
    c = compare({0: 1.0, 1: 1.2, 2: 1.1}, {0: 0.9, 1: 1.0, 2: math.nan})
    assert c.test == "Welch t" and c.n == 2


def test_identical_nonzero_differences_are_certain() -> None:
    """Every seed shifted by exactly the same amount: p = 0, zero-width interval."""
    c = compare({0: 1.0, 1: 2.0, 2: 3.0}, {0: 1.5, 1: 2.5, 2: 3.5})
    assert c.p == 0.0 and c.low == c.high == c.diff == 0.5


def test_identical_runs_show_no_difference() -> None:
    """All differences zero: p = 1 (scipy would answer nan)."""
    c = compare({0: 1.0, 1: 2.0}, {0: 1.0, 1: 2.0})
    assert c.p == 1.0 and c.diff == 0.0 and verdict(c) == "not significant"


def test_holm_hand_example() -> None:
    """Sorted 0.01, 0.03, 0.04 → 3·0.01, max(0.03, 2·0.03), max(0.06, 1·0.04)."""
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])


def test_holm_properties() -> None:
    """Adjusted ≥ raw, monotone in raw order, smallest = Bonferroni, nothing above 1."""
    raw = list(np.random.default_rng(1).uniform(0.0, 0.3, size=12))
    adj = holm(raw)
    assert all(a >= r for a, r in zip(adj, raw, strict=True))
    order = np.argsort(raw)
    assert all(np.diff(np.asarray(adj)[order]) >= 0)
    i = int(np.argmin(raw))
    assert adj[i] == pytest.approx(min(1.0, len(raw) * raw[i]))
    assert max(adj) <= 1.0
    assert holm([0.5, 0.6, 0.9]) == [1.0, 1.0, 1.0]


def test_holm_passes_nan_through_and_does_not_count_it() -> None:
    """NaNs stay NaN in place and the family size is the number of real p-values."""
    adj = holm([0.01, math.nan, 0.02])
    assert math.isnan(adj[1])
    assert adj[0] == pytest.approx(0.02) and adj[2] == pytest.approx(0.02)
    assert holm([]) == []


def test_adjust_sets_p_adjusted_and_verdict_uses_it() -> None:
    """p = 0.03 passes alone at α = 0.05 but not as one of three comparisons."""
    alone = Comparison(-0.1, -0.2, -0.01, 0.03, "paired t", 5)
    assert verdict(alone) == "better"
    family = adjust([alone, Comparison(0.1, 0.0, 0.2, 0.2, "paired t", 5), alone])
    assert family[0].p_adjusted == pytest.approx(0.09)
    assert family[0].p == 0.03
    assert verdict(family[0]) == "not significant"


def test_verdict_direction_for_a_loss() -> None:
    """A significantly lower loss is better; higher is worse."""
    assert verdict(Comparison(-0.1, -0.2, -0.05, 0.001, "Welch t", 3)) == "better"
    assert verdict(Comparison(0.1, 0.05, 0.2, 0.001, "Welch t", 3)) == "worse"
