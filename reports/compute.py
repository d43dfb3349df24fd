"""Compute advantage for ``nas report``: how much more training compute the baseline would need
to match a variant's loss, from loss-vs-compute power laws fitted to the user's own runs.

This is the AttnRes paper's headline form ("Block AttnRes matches a baseline trained with 1.25×
compute"), measured here instead of quoted. Pure numerics; the caller supplies one
(compute, loss) point per finished run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class PowerLaw:
    """``loss(C) = a · C^(−alpha)``, fitted in log-log space."""

    a: float
    """Scale: the loss at C = 1."""
    alpha: float
    """Exponent; positive when loss falls with compute."""
    r2: float
    """Coefficient of determination of the log-log fit; nan when every log loss is equal."""
    n: int
    """Number of (compute, loss) points fitted."""

    def loss(self, c: float) -> float:
        return self.a * c ** (-self.alpha)

    def compute_for(self, loss: float) -> float:
        """The compute at which this curve reaches ``loss``; nan for a flat curve (alpha = 0),
        which reaches no loss but its own."""
        if self.alpha == 0:
            return math.nan
        # In logs, so compute values around 1e20 neither overflow nor lose digits.
        return math.exp((math.log(self.a) - math.log(loss)) / self.alpha)


def _validate(compute: np.ndarray, loss: np.ndarray) -> None:
    if compute.shape != loss.shape or compute.ndim != 1:
        raise ValueError(
            f"compute and loss must be 1-D and of equal length (got {compute.shape} and {loss.shape})"
        )
    if not (np.all(np.isfinite(compute)) and np.all(np.isfinite(loss))):
        raise ValueError(
            "compute and loss must be finite (a diverged run has no place on the curve)"
        )
    if np.any(compute <= 0) or np.any(loss <= 0):
        raise ValueError("compute and loss must be positive: a power law is fitted on their logs")
    if len(np.unique(compute)) < 2:
        raise ValueError(
            f"a power law needs at least 2 distinct compute values (got {len(np.unique(compute))})"
        )


def fit_power_law(compute: Sequence[float], loss: Sequence[float]) -> PowerLaw:
    """Least squares on ``log L = log A − alpha · log C``; ValueError on inputs it cannot fit."""
    return _fit(np.asarray(compute, dtype=float), np.asarray(loss, dtype=float))


def _fit(compute: np.ndarray, loss: np.ndarray) -> PowerLaw:
    _validate(compute, loss)
    x, y = np.log(compute), np.log(loss)
    xc, yc = x - x.mean(), y - y.mean()
    slope = float(xc @ yc / (xc @ xc))
    intercept = float(y.mean() - slope * x.mean())
    ss_res = float(np.sum((y - intercept - slope * x) ** 2))
    ss_tot = float(yc @ yc)
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else math.nan
    return PowerLaw(a=math.exp(intercept), alpha=-slope, r2=r2, n=len(x))


def compute_multiplier(baseline: PowerLaw, variant: PowerLaw, at_compute: float) -> float:
    """The m such that the baseline trained with m · C reaches the loss the variant reaches with
    C = ``at_compute``. m > 1: the variant is better (the baseline needs more compute)."""
    return baseline.compute_for(variant.loss(at_compute)) / at_compute


@dataclass(frozen=True)
class Advantage:
    """A compute multiplier with its bootstrap percentile interval."""

    multiplier: float
    """Point estimate from the fits to all points (see ``compute_multiplier``)."""
    low: float
    """Lower percentile of the bootstrap multipliers; nan when no resample was usable."""
    high: float
    """Upper percentile of the bootstrap multipliers; nan when no resample was usable."""
    at_compute: float
    """The variant compute C the multiplier is read at."""
    n_boot: int
    """Resamples the interval rests on: those requested, less those that could not be fitted."""


def _resample(rng: np.random.Generator, c: np.ndarray, lo: np.ndarray) -> PowerLaw | None:
    idx = rng.integers(0, len(c), len(c))
    # A resample that drew a single compute value has no slope to fit; skipping it (rather
    # than failing) slightly narrows the interval when there are very few points.
    if len(np.unique(c[idx])) < 2:
        return None
    return _fit(c[idx], lo[idx])


def _bootstrap(
    base: tuple[np.ndarray, np.ndarray],
    var: tuple[np.ndarray, np.ndarray],
    at_compute: float,
    n_boot: int,
    seed: int,
) -> np.ndarray:
    # Points are resampled within each group: the two curves come from independent runs.
    rng = np.random.default_rng(seed)
    out: list[float] = []
    for _ in range(n_boot):
        fb, fv = _resample(rng, *base), _resample(rng, *var)
        if fb is None or fv is None:
            continue
        m = compute_multiplier(fb, fv, at_compute)
        if math.isfinite(m):
            out.append(m)
    return np.asarray(out)


def compute_advantage(
    base_c: Sequence[float],
    base_l: Sequence[float],
    var_c: Sequence[float],
    var_l: Sequence[float],
    at_compute: float | None = None,
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> Advantage:
    """Compute multiplier of the variant over the baseline, with a seeded bootstrap interval.

    ``at_compute`` defaults to the geometric mean of the variant's compute values: the middle
    of its data in log space, where the fit is best constrained. Far outside the fitted range
    the multiplier is an extrapolation of both power laws.
    """
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1) (got {level})")
    if n_boot < 0:
        raise ValueError(f"n_boot must be non-negative (got {n_boot})")
    base = (np.asarray(base_c, dtype=float), np.asarray(base_l, dtype=float))
    var = (np.asarray(var_c, dtype=float), np.asarray(var_l, dtype=float))
    fb, fv = _fit(*base), _fit(*var)
    at = float(np.exp(np.log(var[0]).mean())) if at_compute is None else at_compute
    if not at > 0:
        raise ValueError(f"at_compute must be positive (got {at})")
    boots = _bootstrap(base, var, at, n_boot, seed)
    if len(boots) == 0:
        low = high = math.nan
    else:
        low, high = (float(q) for q in np.percentile(boots, [50 * (1 - level), 50 * (1 + level)]))
    return Advantage(compute_multiplier(fb, fv, at), low, high, at, len(boots))


# A multiplier needs at least this many distinct compute values per wiring. A power law through
# two compute values fits them exactly whatever the true curve is: nothing checks the form, and
# the multiplier would be an extrapolation along a line the data cannot test. From three on
# there is a residual, and resampling runs shows how much the slope rests on any one value.
MIN_DISTINCT_COMPUTE = 3


@dataclass(frozen=True)
class Trend:
    """A fitted power law with a bootstrap interval of its exponent: whether these runs say that
    loss falls with compute, the one case where a compute multiplier means something."""

    law: PowerLaw
    """The fit to all points."""
    alpha_low: float
    """Lower percentile of the bootstrap exponents; nan when no resample was usable."""
    alpha_high: float
    """Upper percentile of the bootstrap exponents; nan when no resample was usable."""
    distinct: int
    """Distinct compute values among the points."""

    @property
    def falls(self) -> bool:
        """Loss falls with compute: enough distinct compute values, and the exponent's interval
        excludes zero on the side where more compute gives lower loss (alpha > 0)."""
        return self.distinct >= MIN_DISTINCT_COMPUTE and self.alpha_low > 0


def scaling_trend(
    compute: Sequence[float],
    loss: Sequence[float],
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> Trend:
    """The power-law fit of ``loss`` against ``compute`` and a seeded percentile bootstrap
    interval of its exponent (runs resampled with replacement)."""
    c, lo = np.asarray(compute, dtype=float), np.asarray(loss, dtype=float)
    law = _fit(c, lo)
    rng = np.random.default_rng(seed)
    fits = (_resample(rng, c, lo) for _ in range(n_boot))
    alphas = np.asarray([f.alpha for f in fits if f is not None])
    if len(alphas) == 0:
        low = high = math.nan
    else:
        low, high = (float(q) for q in np.percentile(alphas, [50 * (1 - level), 50 * (1 + level)]))
    return Trend(law, low, high, len(np.unique(c)))


# ---- matched FLOPs: the compute-optimal frontier of a budgeted sweep ----------------------------
# A wiring's runs by cell: (FLOP budget, n_layers) -> the final losses of its runs (its seeds).
Cells = Mapping[tuple[float, int], Sequence[float]]


def frontier_points(cells: Cells) -> dict[float, tuple[int, float]]:
    """Per budget, the compute-optimal depth (lowest mean loss over its runs) and that mean."""
    best: dict[float, tuple[int, float]] = {}
    for (budget, depth), losses in sorted(cells.items()):
        if len(losses) == 0:
            continue
        loss = float(np.mean(losses))
        if budget not in best or loss < best[budget][1]:
            best[budget] = (depth, loss)
    return best


def _frontier_law(cells: Cells) -> PowerLaw:
    best = frontier_points(cells)
    budgets = sorted(best)
    return _fit(np.asarray(budgets, dtype=float), np.asarray([best[b][1] for b in budgets]))


def _resample_cells(rng: np.random.Generator, cells: Cells) -> dict[tuple[float, int], Any]:
    return {k: np.asarray(v)[rng.integers(0, len(v), len(v))] for k, v in cells.items() if len(v)}


def _interval(values: list[float], level: float) -> tuple[float, float]:
    if not values:
        return math.nan, math.nan
    low, high = np.percentile(values, [50 * (1 - level), 50 * (1 + level)])
    return float(low), float(high)


@dataclass(frozen=True)
class FrontierAdvantage:
    """Power laws through two wirings' compute-optimal frontiers and the compute multiplier at
    matched FLOPs, each with a bootstrap interval."""

    baseline: Trend
    variant: Trend
    advantage: Advantage


def frontier_advantage(
    baseline: Cells, variant: Cells, n_boot: int = 1000, level: float = 0.95, seed: int = 0
) -> FrontierAdvantage:
    """The compute multiplier of ``variant`` over ``baseline`` at matched FLOPs: a power law
    through each frontier (per budget, the best depth's mean loss, against the budget), read at
    the geometric mean of the variant's budgets. The bootstrap resamples the runs within every
    (budget, depth) cell and picks each frontier again, so the interval includes the choice of
    the optimal depth. ValueError with fewer than two budgets."""
    fb, fv = _frontier_law(baseline), _frontier_law(variant)
    budgets = np.asarray(sorted(frontier_points(variant)), dtype=float)
    at = float(np.exp(np.log(budgets).mean()))
    rng = np.random.default_rng(seed)
    alphas: tuple[list[float], list[float]] = ([], [])
    multipliers: list[float] = []
    for _ in range(n_boot):
        bb = _frontier_law(_resample_cells(rng, baseline))
        bv = _frontier_law(_resample_cells(rng, variant))
        alphas[0].append(bb.alpha)
        alphas[1].append(bv.alpha)
        m = compute_multiplier(bb, bv, at)
        if math.isfinite(m):
            multipliers.append(m)
    trends = [
        Trend(law, *_interval(a, level), len(frontier_points(cells)))
        for law, a, cells in ((fb, alphas[0], baseline), (fv, alphas[1], variant))
    ]
    low, high = _interval(multipliers, level)
    adv = Advantage(compute_multiplier(fb, fv, at), low, high, at, len(multipliers))
    return FrontierAdvantage(trends[0], trends[1], adv)
