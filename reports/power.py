"""The report's side of power: the noisy-arm test, and (re-exported from ``stats.power``,
their one home, below both ``nas`` and ``reports``) the power of the report's t-tests, the minimum
detectable effect and the seeds a given effect needs; and both for one of the report's
comparisons, as its seeds section and ``arms.csv`` give them."""

from __future__ import annotations

import math
from collections.abc import Mapping

from stats.compare import Comparison
from stats.power import (
    DEFAULT_EFFECT,
    MIN_SEEDS,
    POWER,
    SEEDS_CAP,
    detection_power,
    mde,
    sd_range,
    seeds_needed,
)

__all__ = [
    "DEFAULT_EFFECT",
    "MIN_SEEDS",
    "NOISY_RATIO",
    "POWER",
    "SEEDS_CAP",
    "comparison_mde",
    "comparison_seeds",
    "detection_power",
    "estimable",
    "mde",
    "noisy_arms",
    "sd_range",
    "seeds_needed",
]


def estimable(c: Comparison, alpha: float) -> bool:
    """Whether ``c``'s noise can size anything: ``MIN_SEEDS`` seeds, a finite sd, a level."""
    return c.n >= MIN_SEEDS and math.isfinite(c.sd) and math.isfinite(alpha)


def comparison_mde(c: Comparison, alpha: float) -> float:
    """The smallest |Δ| ``c``'s test detects with ``POWER`` at level ``alpha`` and its seeds;
    nan under ``MIN_SEEDS`` seeds (the noise cannot be estimated) or when none was tested."""
    if not estimable(c, alpha):
        return math.nan
    return mde(c.sd, c.n, alpha, POWER, c.test == "paired t")


def comparison_seeds(c: Comparison, effect: float, alpha: float) -> int | None:
    """Seeds per arm for ``c``'s test to detect ``effect``; None beyond ``SEEDS_CAP`` or where
    ``comparison_mde`` is nan. Never fewer than ``MIN_SEEDS``: a sweep of fewer could not
    estimate its noise to say what it found."""
    if not estimable(c, alpha):
        return None
    n = seeds_needed(c.sd, effect, alpha, POWER, c.test == "paired t", SEEDS_CAP)
    return None if n is None else max(n, MIN_SEEDS)


# A noisy arm: its seeds' sd at least this many times the other arms' pooled sd, and more than
# the other arms' variance by a one-sided F test at 5% after Holm over the arms tested. The
# ratio keeps a small excess that many seeds make significant from being called a finding; the
# test keeps 3 seeds' chance spread (with 2 df each, one sd is twice another 1 time in 5) from
# being called one.
NOISY_RATIO = 2.0


def noisy_arms(
    spreads: Mapping[str, tuple[float, int]], alpha: float = 0.05, ratio: float = NOISY_RATIO
) -> dict[str, tuple[float, float]]:
    """The arms whose seeds spread more than the others': arm -> (its sd over the other arms'
    pooled sd, the Holm-adjusted p of the F test). ``spreads``: arm -> (sd over its seeds,
    seeds); only arms of at least ``MIN_SEEDS`` seeds take part, and at least two must."""
    from scipy import stats as sp

    from stats.compare import holm

    kept = {a: (sd, n) for a, (sd, n) in spreads.items() if n >= MIN_SEEDS and math.isfinite(sd)}
    if len(kept) < 2:
        return {}
    ratios, pvalues = {}, {}
    for arm, (sd, n) in kept.items():
        df = sum(m - 1 for a, (_, m) in kept.items() if a != arm)
        pooled = math.sqrt(sum((m - 1) * s * s for a, (s, m) in kept.items() if a != arm) / df)
        if pooled == 0:  # the others' seeds agree exactly: any spread exceeds theirs
            ratios[arm], pvalues[arm] = (math.inf, 0.0) if sd > 0 else (math.nan, 1.0)
            continue
        ratios[arm] = sd / pooled
        pvalues[arm] = float(sp.f.sf(ratios[arm] ** 2, n - 1, df))
    adjusted = dict(zip(pvalues, holm(list(pvalues.values())), strict=True))
    return {
        arm: (ratios[arm], adjusted[arm])
        for arm in kept
        if adjusted[arm] < alpha and ratios[arm] >= ratio
    }
