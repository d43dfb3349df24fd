"""A per-arm learning-rate stage: the grid of learning rates each arm of a grid space trains first
(``LrStage``), and the rule that picks each arm's best from what those trials reached
(``choose``), with its two warnings: the best lies on the grid's edge (not bracketed), or the
basin is so flat that the choice is noise.

Plain data and pure functions, torch-free: the sweep plans with them and the report reads the
same rule, so the two can never disagree on which learning rate an arm was compared at.

In a space file::

    tune: {train.lr: {float: [1e-4, 3e-2], log: true}, points: 7, seeds: 1}
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

MIN_POINTS = 3  # a best point inside the grid needs a point either side of it
# A basin whose best and worst points differ by no more than this (final validation loss, nats)
# or by no more than the seed noise, whichever is larger, is flat: the choice is noise.
FLAT_NATS = 0.01
OPTIONS = ("points", "seeds")
K = TypeVar("K")


@dataclass(frozen=True)
class LrStage:
    """The learning-rate stage of a grid space: ``points`` values of ``param`` from ``low`` to
    ``high`` (geometric when ``log``), each trained with seeds ``0 .. seeds-1`` for every arm
    before the space's own seeds run at the arm's best value."""

    param: str  # the dotted field the stage sets, e.g. train.lr
    low: float
    high: float
    log: bool = True
    points: int = 5
    seeds: int = 1  # how many seeds each point trains (0 .. seeds-1)

    def __post_init__(self) -> None:
        where = f"tune.{self.param}"
        if not (self.low > 0 and self.high > 0 and math.isfinite(self.high)):
            raise ValueError(f"{where}: bounds must be positive, got [{self.low}, {self.high}]")
        if self.low >= self.high:
            raise ValueError(f"{where}: low {self.low} must be below high {self.high}")
        if self.points < MIN_POINTS:
            raise ValueError(
                f"tune.points: {self.points}; a learning-rate grid needs at least {MIN_POINTS} "
                "points (a best value inside it needs one either side)"
            )
        if self.seeds < 1:
            raise ValueError(f"tune.seeds: {self.seeds}; give at least 1")

    @property
    def name(self) -> str:
        """The field's short name, as arm labels write it (``lr``)."""
        return self.param.split(".")[-1]

    def values(self) -> tuple[float, ...]:
        """The grid, low to high, each value at 6 significant digits (labels and keys stay
        short and the same on every machine)."""
        n = self.points - 1
        if self.log:
            ratio = math.log(self.high / self.low)
            raw = [self.low * math.exp(ratio * i / n) for i in range(self.points)]
        else:
            raw = [self.low + (self.high - self.low) * i / n for i in range(self.points)]
        return tuple(float(f"{v:.6g}") for v in raw)

    def seed_list(self) -> tuple[int, ...]:
        return tuple(range(self.seeds))

    def to_data(self) -> dict[str, Any]:
        kind = {"float": [self.low, self.high], "log": self.log}
        return {self.param: kind, "points": self.points, "seeds": self.seeds}


def stage_from_data(data: Any) -> LrStage:
    """Parse a space file's ``tune`` block: one dotted field with a ``{float: [lo, hi], log}``
    range, plus ``points`` and ``seeds``. Errors name the key and what is allowed."""
    if not isinstance(data, Mapping):
        raise ValueError("tune: expected {<field>: {float: [low, high], log: true}, points: N}")
    fields = [k for k in data if "." in str(k)]
    unknown = [k for k in data if "." not in str(k) and k not in OPTIONS]
    if unknown:
        raise ValueError(
            f"tune: {unknown[0]!r}: unknown key; allowed: {', '.join(OPTIONS)} and one "
            "dotted field (train.lr)"
        )
    if len(fields) != 1:
        raise ValueError(f"tune: expected exactly one dotted field to tune, got {fields or 'none'}")
    param = str(fields[0])
    low, high, log = _range(param, data[param])
    return LrStage(
        param,
        low,
        high,
        log,
        _count("tune.points", data.get("points", 5)),
        _count("tune.seeds", data.get("seeds", 1)),
    )


def _range(param: str, value: Any) -> tuple[float, float, bool]:
    shape = "{float: [low, high], log: true}"
    if not isinstance(value, Mapping) or set(value) - {"float", "log"} or "float" not in value:
        raise ValueError(f"tune.{param}: expected {shape}, got {value!r}")
    bounds, log = value["float"], value.get("log", True)
    numbers = [_number(b) for b in bounds] if isinstance(bounds, list) else []
    if len(numbers) != 2 or None in numbers:
        raise ValueError(f"tune.{param}: expected {shape}, got {value!r}")
    if not isinstance(log, bool):
        raise ValueError(f"tune.{param}.log: expected true or false, got {log!r}")
    return float(numbers[0] or 0), float(numbers[1] or 0), log


def _number(value: Any) -> float | None:
    """A bound as a number; YAML 1.1 reads ``1e-4`` (no dot) as text, which is one too."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(value) if isinstance(value, str) else None
    except ValueError:
        return None


def _count(key: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{key}: expected an integer, got {value!r}")
    return value


@dataclass(frozen=True)
class Choice:
    """One arm's pick: ``best`` (the value with the lowest mean final validation loss over its
    seeds), the ``curve`` (value -> mean loss; inf where every seed diverged or failed), and
    what is doubtful about it (``warnings``: one sentence each)."""

    best: float
    curve: Mapping[float, float]
    warnings: tuple[str, ...] = ()


def choose(losses: Mapping[float, Sequence[float]], flat_nats: float = FLAT_NATS) -> Choice | None:
    """The best value of a learning-rate grid (value -> each seed's final validation loss, inf
    for a seed that diverged), or None when no value trained without diverging. Warns where
    the best is the grid's lowest or highest value (the optimum may lie outside it) and where
    the basin is flat: the finite means span no more than ``flat_nats`` or the seed noise
    (the largest standard deviation across seeds at one value)."""
    curve = {v: _mean(ls) for v, ls in sorted(losses.items())}
    finite = {v: m for v, m in curve.items() if math.isfinite(m)}
    best = lowest_mean(dict(sorted(losses.items())))
    if best is None:
        return None
    warnings = []
    if best in (min(curve), max(curve)):
        side = "lowest" if best == min(curve) else "highest"
        warnings.append(f"best value {best:g} is the grid's {side}: not bracketed")
    spread = max(finite.values()) - min(finite.values())
    noise = max((statistics.stdev(ls) for ls in losses.values() if _spread_known(ls)), default=0)
    if len(finite) > 1 and spread <= max(flat_nats, noise):
        warnings.append(
            f"flat basin: the points span {spread:.4f} nats, within "
            f"{'the seed noise' if noise > flat_nats else f'{flat_nats} nats'}; the choice is noise"
        )
    return Choice(best, curve, tuple(warnings))


def lowest_mean(losses: Mapping[K, Sequence[float]]) -> K | None:
    """The key whose losses (each seed's final validation loss, inf for a seed that did not
    finish) have the lowest mean, a key with an unfinished seed never chosen; None where no key
    has every seed finished. Ties: the first in ``losses``' order. The rule of the
    learning-rate stage, and of a search report's arms at their best points."""
    means = {k: _mean(ls) for k, ls in losses.items()}
    finite = {k: m for k, m in means.items() if math.isfinite(m)}
    return min(finite, key=finite.__getitem__) if finite else None


def _mean(losses: Sequence[float]) -> float:
    return statistics.fmean(losses) if losses and all(map(math.isfinite, losses)) else math.inf


def _spread_known(losses: Sequence[float]) -> bool:
    return len(losses) > 1 and all(map(math.isfinite, losses))
