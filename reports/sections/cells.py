"""How the sections write numbers into table cells and prose."""

from __future__ import annotations

import math

import pandas as pd

from stats.compare import Comparison, Interval

MAX_ROWS = 30  # a longer table is truncated, and its caption says so


def fmt_number(x: float, spec: str) -> str:
    """``x`` in ``spec`` (``",.1f"``), or "—" where it is not a finite number."""
    return format(x, spec) if math.isfinite(x) else "—"


def column_mean(frame: pd.DataFrame, column: str) -> float:
    """The mean of ``column`` over the rows that recorded it (numbers only): NaN if none."""
    if column not in frame:
        return math.nan
    values = pd.to_numeric(frame[column], errors="coerce").dropna()
    return float(values.mean()) if len(values) else math.nan


def fmt(x: float, digits: int = 4) -> str:
    return f"{x:.{digits}f}" if math.isfinite(x) else "—"


def fmt_ci(i: Interval, digits: int = 4) -> str:
    if i.n == 0:
        return "—"
    if not math.isfinite(i.half_width):
        return fmt(i.mean, digits)
    return f"{fmt(i.mean, digits)} ± {fmt(i.half_width, digits)}"


def fmt_diff(c: Comparison | None) -> str:
    """A difference with its interval, signed."""
    if c is None:
        return "—"
    if not math.isfinite(c.low):
        return f"{c.diff:+.4f}"
    return f"{c.diff:+.4f} [{c.low:+.4f}, {c.high:+.4f}]"


def upper(i: Interval) -> float:
    """The interval's upper end, or the value itself for a single trial."""
    return i.mean if not math.isfinite(i.half_width) else i.high
