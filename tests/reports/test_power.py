"""reports/power.py: the minimum detectable effect and the seeds needed checked against a seeded
simulation of the report's own t-tests, against reference values of R's ``power.t.test``,
against the normal approximation (which they must approach for many seeds and exceed for few),
and Holm's first step as the report's ``adjust`` applies it; and the noisy-arm rule."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from scipy import stats

from reports.power import (
    DEFAULT_EFFECT,
    POWER,
    detection_power,
    mde,
    noisy_arms,
    sd_range,
    seeds_needed,
)
from reports.published import TABLE2, TABLE2_COLUMNS
from stats.compare import Comparison, adjust, first_step_alpha

DRAWS = 4000
# A simulated rejection rate's standard error at the target power; 4 of them is the tolerance
# (a correct implementation misses it with probability 6e-5).
TOLERANCE = 4 * math.sqrt(POWER * (1 - POWER) / DRAWS)


def _paired_rate(
    rng: np.random.Generator, sigma: float, n: int, delta: float, alpha: float
) -> float:
    """The share of simulated sweeps in which the report's paired test (a one-sample t on the
    per-seed differences) rejects at ``alpha``."""
    d = rng.normal(delta, sigma, size=(DRAWS, n))
    return float(np.mean(stats.ttest_1samp(d, 0.0, axis=1).pvalue < alpha))


def _unpaired_rate(
    rng: np.random.Generator, sigma: float, n: int, delta: float, alpha: float, welch: bool
) -> float:
    base = rng.normal(0.0, sigma, size=(DRAWS, n))
    other = rng.normal(delta, sigma, size=(DRAWS, n))
    p = stats.ttest_ind(other, base, axis=1, equal_var=not welch).pvalue
    return float(np.mean(p < alpha))


@pytest.mark.parametrize("sigma,n,alpha", [(0.04, 3, 0.05), (0.04, 4, 0.05 / 3), (0.1, 8, 0.01)])
def test_paired_mde_is_detected_at_the_target_power_in_simulation(
    sigma: float, n: int, alpha: float
) -> None:
    """At the MDE, simulated paired tests reject 80% of the time, within simulation error."""
    delta = mde(sigma, n, alpha, POWER, paired=True)
    rate = _paired_rate(np.random.default_rng(n), sigma, n, delta, alpha)
    assert abs(rate - POWER) < TOLERANCE, (delta, rate)


@pytest.mark.parametrize("sigma,n,alpha", [(0.04, 3, 0.05), (0.05, 6, 0.05 / 4)])
def test_unpaired_mde_is_detected_at_the_target_power_in_simulation(
    sigma: float, n: int, alpha: float
) -> None:
    """Unpaired: Student's two-sample t rejects 80% of the time at the MDE; Welch's test, which
    the report runs, approaches it from below (never more power, within simulation error)."""
    delta = mde(sigma, n, alpha, POWER, paired=False)
    student = _unpaired_rate(np.random.default_rng(n), sigma, n, delta, alpha, welch=False)
    welch = _unpaired_rate(np.random.default_rng(n), sigma, n, delta, alpha, welch=True)
    assert abs(student - POWER) < TOLERANCE, (delta, student)
    assert welch <= student + TOLERANCE


@pytest.mark.parametrize("paired", [True, False])
def test_seeds_needed_is_the_first_count_that_reaches_the_power(paired: bool) -> None:
    """At the seeds needed the simulated test reaches 80% power; one seed fewer, it falls short
    (exactly, by the noncentral t; and in simulation, within its error)."""
    sigma, effect, alpha = 0.05, 0.06, 0.05 / 2
    n = seeds_needed(sigma, effect, alpha, POWER, paired)
    assert n is not None
    assert detection_power(sigma, n, effect, alpha, paired) >= POWER
    assert detection_power(sigma, n - 1, effect, alpha, paired) < POWER
    rng = np.random.default_rng(7)
    for seeds, reaches in ((n, True), (n - 1, False)):
        if paired:
            rate = _paired_rate(rng, sigma, seeds, effect, alpha)
        else:
            rate = _unpaired_rate(rng, sigma, seeds, effect, alpha, welch=False)
        assert (rate > POWER - TOLERANCE) if reaches else (rate < POWER + TOLERANCE), rate


def test_seed_counts_match_r_power_t_test() -> None:
    """R's ``power.t.test(delta = 1, sd = 1, power = 0.8)``: n = 9.94 (paired / one-sample)
    and 16.71 per group (two-sample), so 10 and 17 seeds."""
    assert seeds_needed(1.0, 1.0, 0.05, 0.8, paired=True) == 10
    assert seeds_needed(1.0, 1.0, 0.05, 0.8, paired=False) == 17


def _normal_seeds(sigma: float, effect: float, alpha: float, paired: bool) -> float:
    """The normal approximation: n = (z_{1-α/2} + z_power)² σ² / δ² (twice that per arm,
    unpaired)."""
    z = stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(POWER)
    return (2 if not paired else 1) * (z * sigma / effect) ** 2


@pytest.mark.parametrize("paired", [True, False])
@pytest.mark.parametrize("alpha", [0.05, 0.05 / 4])
def test_many_seeds_agree_with_the_normal_approximation(paired: bool, alpha: float) -> None:
    """For many seeds the t-test's seed count exceeds the normal one by about z²/2 (Guenther
    1981: the t's heavier tails; z = z_{1-α/2}), never by less than 0 nor more than z²/2 + 1,
    and its MDE exceeds the normal z·σ·√(k/n) by O(1/df): less than 3/df."""
    z_a, z_b = stats.norm.ppf(1 - alpha / 2), stats.norm.ppf(POWER)
    sigma, effect = 1.0, (z_a + z_b) / 20  # 400 seeds (800 unpaired) by the normal formula
    normal = _normal_seeds(sigma, effect, alpha, paired)
    exact = seeds_needed(sigma, effect, alpha, POWER, paired, cap=2000)
    assert exact is not None and 0 < exact - normal <= z_a**2 / 2 + 1
    n = 1000
    k = 1 if paired else 2
    df = n - 1 if paired else 2 * n - 2
    normal_mde = (z_a + z_b) * sigma * math.sqrt(k / n)
    assert 0 < mde(sigma, n, alpha, POWER, paired) / normal_mde - 1 < 3 / df


@pytest.mark.parametrize("ratio", [0.5, 1.0, 2.0])
def test_few_seeds_need_more_than_the_normal_approximation_says(ratio: float) -> None:
    """At few seeds the normal formula is optimistic: the noncentral t asks for more."""
    alpha = 0.05 / 3
    normal = math.ceil(_normal_seeds(ratio, 1.0, alpha, paired=True))
    exact = seeds_needed(ratio, 1.0, alpha, POWER, paired=True)
    assert exact is not None and exact > normal


def test_seeds_needed_past_the_cap_is_none_and_zero_noise_needs_the_minimum() -> None:
    """An effect far below the noise needs more than the cap; seeds that agree exactly detect
    any effect (MDE 0, the test's minimum of 2 seeds)."""
    assert seeds_needed(1.0, 0.01, cap=100) is None
    assert mde(0.0, 3) == 0.0 and seeds_needed(0.0, 0.01) == 2


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: mde(-1.0, 3), "sigma -1.0"),
        (lambda: mde(1.0, 1), "n 1: a t-test needs at least 2 seeds"),
        (lambda: mde(1.0, 3, alpha=0.0), "alpha 0.0"),
        (lambda: mde(1.0, 3, power=0.01), "power 0.01"),
        (lambda: seeds_needed(1.0, 0.0), "effect 0.0: give a positive number"),
        (lambda: seeds_needed(1.0, math.nan), "effect nan"),
    ],
)
def test_bad_inputs_are_refused_naming_the_value(call: Callable[[], object], match: str) -> None:
    """Each bad argument is named with its value."""
    with pytest.raises(ValueError, match=match):
        call()


def test_holm_first_step_alpha_suffices_whatever_the_others_show() -> None:
    """``first_step_alpha`` is α over the comparisons ``adjust`` counts (a comparison with too
    few seeds has no p and is not one); in many random families, a p at or below it is
    adjusted to at most α, and the smallest p just above it is adjusted above α."""
    rng = np.random.default_rng(0)
    untested = Comparison(-0.1, math.nan, math.nan, math.nan, "too few seeds", 1)
    for _ in range(500):
        m = int(rng.integers(1, 8))
        ps = list(rng.uniform(0, 0.2, size=m))
        family = [Comparison(0.0, 0.0, 0.0, p, "paired t", 3) for p in ps] + [untested]
        alpha = first_step_alpha(family)
        assert alpha == pytest.approx(0.05 / m)
        for c in adjust(family):
            if c.p <= alpha:
                assert c.p_adjusted <= 0.05 + 1e-12
    just_above = [Comparison(0.0, 0.0, 0.0, 0.05 / 3 * 1.01, "paired t", 3)] * 3
    assert all(c.p_adjusted > 0.05 for c in adjust(just_above))
    assert math.isnan(first_step_alpha([untested]))


def test_default_effect_is_the_papers_smallest_block_attnres_gain() -> None:
    """0.02 nats: the smallest gain of Block AttnRes over the PreNorm baseline in Table 2."""
    standard = TABLE2_COLUMNS.index("standard")
    block = TABLE2_COLUMNS.index("block_attnres")
    gains = [float(row[standard]) - float(row[block]) for row in TABLE2]
    assert round(min(gains), 3) == DEFAULT_EFFECT


def test_sd_range_is_the_chi_square_interval() -> None:
    """From 3 seeds the true sd lies within 0.52 to 6.28 times the estimate (95%), and the
    interval narrows with more seeds."""
    low, high = sd_range(3)
    assert (low, high) == pytest.approx((0.521, 6.285), abs=1e-3)
    assert sd_range(10)[1] < high


def test_noisy_arm_is_named_and_chance_spread_is_not() -> None:
    """An arm whose seeds spread ten times the others' is named (its ratio and Holm p); arms
    whose sds differ by chance at 3 seeds, and an arm of 2 seeds, are not."""
    spreads = {"a": (0.01, 4), "b": (0.012, 4), "c": (0.1, 4), "d": (1.0, 2)}
    found = noisy_arms(spreads)
    assert list(found) == ["c"]
    ratio, p = found["c"]
    assert ratio == pytest.approx(0.1 / math.sqrt((0.01**2 + 0.012**2) / 2)) and p < 0.05
    assert noisy_arms({"a": (0.01, 3), "b": (0.018, 3), "c": (0.013, 3)}) == {}
    assert noisy_arms({"a": (0.01, 3)}) == {}
