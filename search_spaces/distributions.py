"""Distributions over one configuration field: frozen, validated values that round-trip to the
plain mapping used in space files (``{"choice": [...]}``, ``{"int": [lo, hi], "log": true}``,
``{"float": [lo, hi], "log": true}``, or a bare value for a fixed one)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Fixed:
    value: Any

    def to_data(self) -> Any:
        return self.value

    def grid(self) -> tuple[Any, ...]:
        return (self.value,)


@dataclass(frozen=True)
class Choice:
    values: tuple[Any, ...]

    def __post_init__(self) -> None:
        if not self.values:
            raise ValueError("choice: empty; give at least one value")

    def to_data(self) -> dict[str, Any]:
        return {"choice": list(self.values)}

    def grid(self) -> tuple[Any, ...]:
        return self.values


@dataclass(frozen=True)
class IntRange:
    low: int
    high: int
    log: bool = False

    def __post_init__(self) -> None:
        _check_range(self.low, self.high, self.log)

    def to_data(self) -> dict[str, Any]:
        return {"int": [self.low, self.high], "log": self.log}

    def grid(self) -> tuple[Any, ...]:
        raise ValueError("int range: a grid needs listed values (use choice)")


@dataclass(frozen=True)
class FloatRange:
    low: float
    high: float
    log: bool = False

    def __post_init__(self) -> None:
        _check_range(self.low, self.high, self.log)

    def to_data(self) -> dict[str, Any]:
        return {"float": [self.low, self.high], "log": self.log}

    def grid(self) -> tuple[Any, ...]:
        raise ValueError("float range: a grid needs listed values (use choice)")


Distribution = Fixed | Choice | IntRange | FloatRange


def _check_range(low: float, high: float, log: bool) -> None:
    if low > high:
        raise ValueError(f"range: low {low} > high {high}; low must not exceed high")
    if log and low <= 0:
        raise ValueError(f"range: a log range must stay above zero, got low {low}")


def _pair(data: Mapping[str, Any], key: str) -> tuple[Any, Any]:
    bounds = data[key]
    if not isinstance(bounds, (list, tuple)) or len(bounds) != 2:
        raise ValueError(f"{key}: expected [low, high], got {bounds!r}")
    return bounds[0], bounds[1]


def from_data(data: Any) -> Distribution:
    """Parse one distribution; errors say what is allowed (the caller adds file and key)."""
    if not isinstance(data, Mapping):
        if isinstance(data, list):
            return Choice(tuple(data))
        return Fixed(data)
    extra = set(data) - {"choice", "int", "float", "log"}
    kinds = [k for k in ("choice", "int", "float") if k in data]
    if extra or len(kinds) != 1 or ("log" in data and kinds[0] == "choice"):
        raise ValueError(
            "expected one of {choice: [..]}, {int: [low, high], log: bool}, "
            f"{{float: [low, high], log: bool}}, a list or a value; got {dict(data)!r}"
        )
    log = data.get("log", False)
    if not isinstance(log, bool):
        raise ValueError(f"log: expected true or false, got {log!r}")
    kind = kinds[0]
    if kind == "choice":
        if not isinstance(data["choice"], list):
            raise ValueError(f"choice: expected a list, got {data['choice']!r}")
        return Choice(tuple(data["choice"]))
    low, high = _pair(data, kind)
    if kind == "int":
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (low, high)):
            raise ValueError(f"int: bounds must be integers, got {[low, high]!r}")
        return IntRange(low, high, log)
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (low, high)):
        raise ValueError(f"float: bounds must be numbers, got {[low, high]!r}")
    return FloatRange(float(low), float(high), log)
