"""What a sweep could detect: the power of the report's t-tests, the minimum detectable effect at
the seeds run, and the seeds a given effect needs.

Pure functions of numbers, exact under the t-test's own model: the statistic of a difference
``delta`` follows a noncentral t with noncentrality ``delta * sqrt(n) / sigma`` (paired: a
one-sample t on the ``n`` per-seed differences, ``n - 1`` degrees of freedom) or
``delta / (sigma * sqrt(2 / n))`` (unpaired: two arms of ``n`` seeds each with standard deviation
``sigma``, ``2n - 2`` degrees of freedom, Student's two-sample t). The report's unpaired test is
Welch's, whose degrees of freedom are at most ``2n - 2``: at few seeds it has less power than
this (3 seeds per arm at the two-sample MDE: about 70% where Student's has 80%, in
``tests/reports/test_power.py``'s simulation), so an unpaired minimum detectable effect
understates what Welch's test needs. Tests are two-sided, as the report's are.

Light at import (scipy is loaded inside the functions), so ``nas report --help`` can read
``DEFAULT_EFFECT``; torch-free and below both ``nas`` (``nas sweep --seeds auto`` sizes its seeds
with it) and ``reports`` (which re-exports it from ``reports.power``).
"""

from __future__ import annotations

import math

# The effect ``nas report`` sizes seeds for unless ``--effect`` says otherwise, in nats of final
# validation loss: the smallest gain of Block AttnRes over the PreNorm baseline that the AttnRes
# paper reports (Kimi Team 2026, Table 2: 0.020 at 241M, 296M and 436M parameters, 0.022 and
# 0.026 at 194M and 528M; Table 4: 0.020). A sweep that cannot detect it can neither confirm
# nor refute the paper's headline effect at its own scale.
DEFAULT_EFFECT = 0.02
POWER = 0.8  # the conventional target: a real effect of the stated size is missed 1 time in 5
MIN_SEEDS = 3  # fewer: the seed noise is not estimated (1 seed has none, 2 give 1 df)
SEEDS_CAP = 100  # beyond it the answer is "a larger effect or less noise", not a seed count


def _design(n: int, paired: bool) -> tuple[int, float]:
    """Degrees of freedom, and the noncentrality per unit of ``delta / sigma``."""
    if paired:
        return n - 1, math.sqrt(n)
    return 2 * n - 2, math.sqrt(n / 2)


def _check(sigma: float, n: int, alpha: float, power: float | None = None) -> None:
    if not (math.isfinite(sigma) and sigma >= 0):
        raise ValueError(f"sigma {sigma}: give a finite standard deviation >= 0")
    if n < 2:
        raise ValueError(f"n {n}: a t-test needs at least 2 seeds")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha {alpha}: give a level between 0 and 1")
    if power is not None and not alpha < power < 1:
        raise ValueError(f"power {power}: give a target between alpha ({alpha}) and 1")


def _power_at(ncp: float, df: int, alpha: float) -> float:
    """Two-sided rejection probability of a t-test with ``df`` degrees of freedom when its
    statistic has noncentrality ``ncp``: both tails, not only the one the effect points to."""
    from scipy import stats

    crit = float(stats.t.ppf(1 - alpha / 2, df))
    # The lower tail as the upper tail of the mirrored statistic (nct(df, -ncp) is -nct(df,
    # ncp)): scipy's cdf far in the lower tail returns nan at large ncp where its sf returns 0.
    return float(stats.nct.sf(crit, df, ncp) + stats.nct.sf(crit, df, -ncp))


def detection_power(
    sigma: float, n: int, effect: float, alpha: float = 0.05, paired: bool = True
) -> float:
    """The probability that the two-sided t-test at ``alpha`` rejects "no difference" when the
    true difference is ``effect`` and the seeds' standard deviation ``sigma`` (paired: of the
    differences; unpaired: of each arm), with ``n`` seeds (per arm)."""
    _check(sigma, n, alpha)
    if sigma == 0:
        return 1.0 if effect else alpha
    df, scale = _design(n, paired)
    return _power_at(abs(effect) * scale / sigma, df, alpha)


def mde(
    sigma: float, n: int, alpha: float = 0.05, power: float = POWER, paired: bool = True
) -> float:
    """The minimum detectable effect: the smallest ``|delta|`` that the two-sided t-test at
    ``alpha`` with ``n`` seeds detects with probability ``power``, found by root-finding on the
    noncentral t's noncentrality. 0 where ``sigma`` is 0 (seeds that agree detect anything)."""
    from scipy import optimize

    _check(sigma, n, alpha, power)
    if sigma == 0:
        return 0.0
    df, scale = _design(n, paired)
    high = 1.0
    while _power_at(high, df, alpha) < power:  # the power rises with the noncentrality
        high *= 2
    ncp = optimize.brentq(lambda x: _power_at(x, df, alpha) - power, 0.0, high, xtol=1e-10)
    return float(ncp) * sigma / scale


def seeds_needed(
    sigma: float,
    effect: float,
    alpha: float = 0.05,
    power: float = POWER,
    paired: bool = True,
    cap: int = SEEDS_CAP,
) -> int | None:
    """The fewest seeds (per arm; pairs where ``paired``) at which the two-sided t-test at
    ``alpha`` detects ``effect`` with probability ``power``; None where more than ``cap`` would
    be needed. The power rises with the seeds, so a bisection over whole seed counts finds it."""
    _check(sigma, 2, alpha, power)
    if not (math.isfinite(effect) and effect > 0):
        raise ValueError(f"effect {effect}: give a positive number")
    if cap < 2:
        raise ValueError(f"cap {cap}: at least 2 seeds")

    def enough(n: int) -> bool:
        return detection_power(sigma, n, effect, alpha, paired) >= power

    if not enough(cap):
        return None
    low, high = 1, cap  # enough(high) holds; low is below every test's minimum of 2
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if mid >= 2 and enough(mid) else (mid, high)
    return high


def sd_range(n: int, level: float = 0.95) -> tuple[float, float]:
    """How far a standard deviation estimated from ``n`` seeds may lie from the true one: the
    factors ``(low, high)`` of the chi-square interval, so that the true sd lies within
    ``(low * s, high * s)`` at ``level`` (3 seeds: about 0.52 to 6.3)."""
    from scipy import stats

    df = n - 1
    tail = (1 - level) / 2
    return (
        math.sqrt(df / float(stats.chi2.ppf(1 - tail, df))),
        math.sqrt(df / float(stats.chi2.ppf(tail, df))),
    )


def first_step_alpha(alpha: float, m: int) -> float:
    """The level a comparison must pass at Holm's first step over a family of ``m`` tested
    comparisons: alpha / m (nan for none), the smallest level any comparison can face."""
    return alpha / m if m else math.nan
