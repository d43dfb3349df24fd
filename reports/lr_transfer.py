"""Does the optimal learning rate move with depth? A tuned grid whose learning-rate stage ran at
several depths per family (a family: one wiring x parametrization, every configuration field
but the depth, the tuned value and the seed alike) answers it, as CompleteP's Fig. 1 does.

Per family and depth the optimum is the stage's own choice (``search_spaces.lr_stage.choose``,
the rule the sweep used), refined below the grid's step by the vertex of the parabola in log
learning rate through the best point and its two neighbours (kept at the grid value where the
best lies on the grid's edge or a neighbour did not finish). The drift is the least-squares
slope of log optimum against log depth, with its standard error and a 95% Student-t interval
from the fit's residuals (three depths or more), and the number of grid points the chosen value
moved from the shallowest depth to the deepest.

Pure functions of numbers and frames; the section (``reports.sections.lr_transfer``) words it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np
import pandas as pd

from reports.ablation import DEPTH_KEY
from reports.normalize import PARAM_PREFIXES, SEED_KEY, STAGE_ARM
from trainers.budget import DERIVED_KEYS

if TYPE_CHECKING:
    from search_spaces.lr_stage import Choice

DriftVerdict = Literal["drifts", "drifts within a step", "no drift detected", "too few depths"]
# A drift of less than half a grid step over the whole depth range rests on the refinement
# between grid points alone (the grid's own choice barely moves): said, not hidden.
RESOLVED_STEPS = 0.5
MIN_DEPTHS_FOR_INTERVAL = 3  # a slope's residuals need one degree of freedom


@dataclass(frozen=True)
class Optimum:
    """One family's stage at one depth: the chosen grid value, its index in the grid, the
    refined estimate (``estimate``), whether a grid value lies either side of it, its mean loss
    (``loss``) and its lead over the next-best grid value (``margin``, nats; nan with one)."""

    depth: int
    best: float
    index: int
    estimate: float
    bracketed: bool
    loss: float = math.nan
    margin: float = math.nan


@dataclass(frozen=True)
class Drift:
    """One family's optima across depth and the fitted slope d log(lr*) / d log(depth)."""

    family: str
    optima: tuple[Optimum, ...]  # shallowest first
    slope: float  # nan with fewer than two depths
    stderr: float  # nan with fewer than MIN_DEPTHS_FOR_INTERVAL depths
    low: float  # the slope's 95% interval; nan where stderr is
    high: float
    steps_moved: int  # grid index at the deepest minus at the shallowest
    resolution: float  # the slope one grid step over the depth range amounts to
    verdict: DriftVerdict

    @property
    def depths(self) -> tuple[int, ...]:
        return tuple(o.depth for o in self.optima)


def refine(values: Sequence[float], depth: int, choice: Choice) -> Optimum:
    """``choice`` (the stage's pick at ``depth`` over the grid ``values``) as an ``Optimum``."""
    index = min(range(len(values)), key=lambda k: abs(values[k] - choice.best))
    bracketed = 0 < index < len(values) - 1
    estimate = _vertex(values, index, choice) if bracketed else choice.best
    finite = sorted(m for m in choice.curve.values() if math.isfinite(m))
    margin = finite[1] - finite[0] if len(finite) > 1 else math.nan
    loss = choice.curve.get(choice.best, math.nan)
    return Optimum(depth, choice.best, index, estimate, bracketed, loss, margin)


def _vertex(values: Sequence[float], index: int, choice: Choice) -> float:
    """The vertex of the parabola in log value through the chosen point and its two neighbours,
    which lies between the neighbours since the chosen point is the lowest; the grid value
    itself where a neighbour did not finish or the three losses are equal."""
    x = np.log(np.asarray(values[index - 1 : index + 2], dtype=float))
    y = np.asarray([choice.curve.get(v, math.inf) for v in values[index - 1 : index + 2]])
    if not np.isfinite(y).all():
        return choice.best
    curvature = (y[2] - y[1]) / (x[2] - x[1]) - (y[1] - y[0]) / (x[1] - x[0])
    if curvature <= 0:
        return choice.best
    a = curvature / (x[2] - x[0])
    b = (y[1] - y[0]) / (x[1] - x[0]) - a * (x[0] + x[1])
    return float(math.exp(-b / (2 * a)))


def fit_slope(depths: Sequence[int], optima: Sequence[float]) -> tuple[float, float, float, float]:
    """Least-squares slope of log optimum on log depth: (slope, standard error, 95% low, high);
    the last three nan with fewer than ``MIN_DEPTHS_FOR_INTERVAL`` points, all four with fewer
    than two."""
    nan = math.nan
    if len(depths) < 2:
        return nan, nan, nan, nan
    x, y = np.log(np.asarray(depths, dtype=float)), np.log(np.asarray(optima, dtype=float))
    dx = x - x.mean()
    slope = float(np.dot(dx, y - y.mean()) / np.dot(dx, dx))
    if len(depths) < MIN_DEPTHS_FOR_INTERVAL:
        return slope, nan, nan, nan
    residuals = y - y.mean() - slope * dx
    dof = len(depths) - 2
    stderr = float(math.sqrt(np.dot(residuals, residuals) / dof / np.dot(dx, dx)))
    from scipy import stats

    half = float(stats.t.ppf(0.975, dof)) * stderr
    return slope, stderr, slope - half, slope + half


def drift(family: str, values: Sequence[float], choices: Mapping[int, Choice | None]) -> Drift:
    """One family's drift from the stage's choice at each depth (None: nothing finished)."""
    optima = [refine(values, d, c) for d, c in sorted(choices.items()) if c is not None]
    depths = [o.depth for o in optima]
    slope, stderr, low, high = fit_slope(depths, [o.estimate for o in optima])
    resolution = _resolution(values, depths)
    moved = optima[-1].index - optima[0].index if optima else 0
    verdict = _verdict(len(optima), slope, low, high, resolution)
    return Drift(family, tuple(optima), slope, stderr, low, high, moved, resolution, verdict)


def _resolution(values: Sequence[float], depths: Sequence[int]) -> float:
    """The slope a move of one grid step over the depth range amounts to (the grid's mean step
    in log value over the log depth range); nan for one depth."""
    if len(depths) < 2 or len(values) < 2:
        return math.nan
    step = math.log(values[-1] / values[0]) / (len(values) - 1)
    return step / math.log(max(depths) / min(depths))


def _verdict(n: int, slope: float, low: float, high: float, resolution: float) -> DriftVerdict:
    if n < MIN_DEPTHS_FOR_INTERVAL:
        return "too few depths"
    if not (low > 0 or high < 0):
        return "no drift detected"
    if abs(slope) < RESOLVED_STEPS * resolution:
        return "drifts within a step"
    return "drifts"


# ---- from a sweep's learning-rate stage ------------------------------------------------------


def families(stage: pd.DataFrame, param: str) -> dict[str, dict[int, str]]:
    """The stage's arms by family: name -> depth -> the stage arm tuned there, for each family
    whose stage spans at least two depths; empty where none does. A family is every
    configuration field alike but the depth, ``param``, the seed and a budget's derived run
    length; its name is the part its stage arms' labels share."""
    if stage.empty or DEPTH_KEY not in stage:
        return {}
    ignored = {DEPTH_KEY, param, SEED_KEY, *DERIVED_KEYS}
    keys = [c for c in stage.columns if c.startswith(PARAM_PREFIXES) and c not in ignored]
    config = stage[keys].astype(str).agg("|".join, axis=1) if keys else pd.Series("", stage.index)
    out: dict[str, dict[int, str]] = {}
    for _, g in stage.groupby(config, sort=False):
        arms = g.drop_duplicates(STAGE_ARM)
        if arms[DEPTH_KEY].nunique() >= 2:
            by_depth = {
                int(d): str(a) for d, a in zip(arms[DEPTH_KEY], arms[STAGE_ARM], strict=True)
            }
            out[_shared_label(list(by_depth.values()))] = dict(sorted(by_depth.items()))
    return out


def _shared_label(labels: list[str]) -> str:
    """The segments every label holds, in the first label's order (``standard/sp`` of
    ``standard/sp/n_layers=2`` and ``standard/sp/n_layers=4``)."""
    parts = [p.split("/") for p in labels]
    shared = [s for s in parts[0] if all(s in p for p in parts[1:])]
    return "/".join(shared) or labels[0]
