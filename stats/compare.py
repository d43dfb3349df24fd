"""Seed statistics for ``nas report``: intervals for a mean, variant-vs-baseline tests, and
Holm's correction across the family of comparisons one report makes.

Pure functions of numbers; nothing here reads MLflow or knows what a run is. Values are losses,
so lower is better wherever a direction matters (``verdict``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from stats.power import first_step_alpha as holm_first_step

TestName = Literal["paired t", "Welch t", "too few seeds"]
Verdict = Literal["better", "worse", "not significant", "too few seeds"]


@dataclass(frozen=True)
class Interval:
    """A mean and the half-width of its confidence interval."""

    mean: float
    """Sample mean; nan when there were no values."""
    half_width: float
    """Half the interval's width; nan when ``n < 2`` (no spread to estimate)."""
    n: int
    """Number of finite values the interval rests on."""
    sd: float = math.nan
    """Standard deviation of the values (n − 1 in the denominator); nan when ``n < 2``."""

    @property
    def low(self) -> float:
        return self.mean - self.half_width

    @property
    def high(self) -> float:
        return self.mean + self.half_width


@dataclass(frozen=True)
class Comparison:
    """One variant against the baseline: ``other − baseline``, negative when the variant's loss
    is lower."""

    diff: float
    """Mean difference (paired) or difference of means (Welch), other − baseline."""
    low: float
    """Lower end of the confidence interval of ``diff``; nan where not computable."""
    high: float
    """Upper end of the confidence interval of ``diff``; nan where not computable."""
    p: float
    """Two-sided p-value of ``diff == 0``; nan where not computable."""
    test: TestName
    """Which test produced ``p``."""
    n: int
    """Pairs for the paired test; the smaller group's size otherwise."""
    p_adjusted: float = math.nan
    """``p`` after Holm's correction over the report's comparisons (``adjust``); nan until set."""
    sd: float = math.nan
    """The seed noise the test's standard error comes from: the standard deviation of the
    per-seed differences (paired t), or the two arms' root-mean-square standard deviation,
    ``sqrt((s_base² + s_other²) / 2)`` (Welch t); nan with too few seeds."""


def _finite(values: Sequence[float]) -> np.ndarray:
    # A NaN is a missing measurement (e.g. a metric that was never logged); it carries no
    # information about the mean, so it is dropped rather than poisoning every statistic.
    arr = np.asarray(values, dtype=float)
    return arr[~np.isnan(arr)]


def mean_ci(values: Sequence[float], level: float = 0.95) -> Interval:
    """Student-t confidence interval for the mean of ``values`` (NaNs dropped)."""
    from scipy import stats

    x = _finite(values)
    n = len(x)
    if n == 0:
        return Interval(math.nan, math.nan, 0)
    mean = float(x.mean())
    if n < 2:
        return Interval(mean, math.nan, n)
    sd = float(x.std(ddof=1))
    t_crit = float(stats.t.ppf(0.5 + level / 2, n - 1))
    return Interval(mean, t_crit * sd / math.sqrt(n), n, sd)


def _degenerate(diff: float, test: TestName, n: int) -> Comparison:
    # Zero variance: scipy divides 0 by 0 and returns nan when diff is 0, and warns about
    # catastrophic cancellation otherwise. The limits are clear, so state them: every seed
    # agrees exactly, so a nonzero diff is certain (p = 0, zero-width interval) and a zero diff
    # is no evidence of any difference (p = 1).
    return Comparison(diff, diff, diff, 0.0 if diff != 0 else 1.0, test, n, sd=0.0)


def _paired(baseline: Mapping[int, float], other: Mapping[int, float], level: float) -> Comparison:
    from scipy import stats

    seeds = sorted(baseline)
    d = np.array([other[s] - baseline[s] for s in seeds], dtype=float)
    if np.all(d == d[0]):
        return _degenerate(float(d[0]), "paired t", len(d))
    # A paired t-test is exactly a one-sample t-test on the per-seed differences.
    res = stats.ttest_1samp(d, 0.0)
    ci = res.confidence_interval(confidence_level=level)
    return Comparison(
        float(d.mean()),
        float(ci.low),
        float(ci.high),
        float(res.pvalue),
        "paired t",
        len(d),
        sd=float(d.std(ddof=1)),
    )


def _welch(base: np.ndarray, other: np.ndarray, level: float) -> Comparison:
    from scipy import stats

    n = min(len(base), len(other))
    diff = float(other.mean() - base.mean())
    if np.all(base == base[0]) and np.all(other == other[0]):
        return _degenerate(diff, "Welch t", n)
    # ``other`` first so the statistic and its Welch–Satterthwaite interval are for other − base.
    res = stats.ttest_ind(other, base, equal_var=False)
    ci = res.confidence_interval(confidence_level=level)
    sd = math.sqrt((base.var(ddof=1) + other.var(ddof=1)) / 2)
    return Comparison(diff, float(ci.low), float(ci.high), float(res.pvalue), "Welch t", n, sd=sd)


def _drop_nan(values: Mapping[int, float]) -> dict[int, float]:
    return {seed: v for seed, v in values.items() if not math.isnan(v)}


def compare(
    baseline: Mapping[int, float], other: Mapping[int, float], level: float = 0.95
) -> Comparison:
    """Test ``other`` against ``baseline``; both map seed → final value (NaNs dropped).

    Same seed set (≥ 2 seeds): paired t-test, which removes the per-seed component (data order,
    init) that both runs of a seed share. Otherwise, with ≥ 2 values on each side: Welch's t-test.
    Otherwise: "too few seeds", with the difference of means and nan for everything else.
    """
    base, oth = _drop_nan(baseline), _drop_nan(other)
    if len(base) >= 2 and base.keys() == oth.keys():
        return _paired(base, oth, level)
    b = np.array(list(base.values()), dtype=float)
    o = np.array(list(oth.values()), dtype=float)
    if len(b) >= 2 and len(o) >= 2:
        return _welch(b, o, level)
    diff = float(o.mean() - b.mean()) if len(b) and len(o) else math.nan
    return Comparison(diff, math.nan, math.nan, math.nan, "too few seeds", min(len(b), len(o)))


def family_size(pvalues: Sequence[float]) -> int:
    """Holm's m: the comparisons that were tested (a nan p, too few seeds, is not one)."""
    return int(np.count_nonzero(~np.isnan(np.asarray(pvalues, dtype=float))))


def first_step_alpha(comparisons: Sequence[Comparison], alpha: float = 0.05) -> float:
    """The level a comparison must pass at Holm's first step over ``comparisons`` (``adjust``'s
    family): alpha / m, nan when none was tested. The smallest level any comparison can face,
    and enough whatever the others show: a p at or below it is adjusted to at most alpha."""
    return holm_first_step(alpha, family_size([c.p for c in comparisons]))


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values, in the input order. NaNs pass through and do not count
    towards the family size m (``family_size``)."""
    p = np.asarray(pvalues, dtype=float)
    out = np.full(len(p), math.nan)
    idx = np.flatnonzero(~np.isnan(p))
    order = idx[np.argsort(p[idx], kind="stable")]
    m = family_size(pvalues)
    # Step-down: the k-th smallest (0-based) is multiplied by m − k; the running maximum keeps
    # the adjusted values in the order of the raw ones, and nothing exceeds 1.
    scaled = p[order] * (m - np.arange(m))
    out[order] = np.minimum(np.maximum.accumulate(scaled), 1.0)
    return [float(v) for v in out]


def adjust(comparisons: Sequence[Comparison]) -> list[Comparison]:
    """Copies of ``comparisons`` with ``p_adjusted`` set by Holm over the whole sequence."""
    adjusted = holm([c.p for c in comparisons])
    return [
        dataclasses.replace(c, p_adjusted=q) for c, q in zip(comparisons, adjusted, strict=True)
    ]


def verdict(c: Comparison, alpha: float = 0.05) -> Verdict:
    """One word for a report table. Uses ``p_adjusted`` once set; lower loss is "better"."""
    if c.test == "too few seeds":
        return "too few seeds"
    p = c.p if math.isnan(c.p_adjusted) else c.p_adjusted
    # A nan p (e.g. infinite values) is no evidence of a difference.
    if math.isnan(p) or p >= alpha:
        return "not significant"
    return "better" if c.diff < 0 else "worse"
