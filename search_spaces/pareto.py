"""The Pareto front of a multi-objective search: the trials no other trial beats on every
objective at once."""

from __future__ import annotations

from collections.abc import Sequence


def _dominates(a: Sequence[float], b: Sequence[float], signs: Sequence[float]) -> bool:
    """a dominates b: no worse on every objective and better on one (signs turn max into min)."""
    pairs = [(s * x, s * y) for x, y, s in zip(a, b, signs, strict=True)]
    return all(x <= y for x, y in pairs) and any(x < y for x, y in pairs)


def pareto_front(points: Sequence[Sequence[float]], modes: Sequence[str]) -> list[int]:
    """Indices of the non-dominated points, in input order. Quadratic, which is fine for the
    hundreds of trials a sweep has."""
    signs = [1.0 if m == "min" else -1.0 for m in modes]
    return [
        i
        for i, p in enumerate(points)
        if not any(_dominates(q, p, signs) for j, q in enumerate(points) if j != i)
    ]
