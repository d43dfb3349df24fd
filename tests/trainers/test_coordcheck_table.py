"""The coord check's torch-free table (``trainers.measure.coordcheck_table``): a table round-trips
its CSV exactly, so a verdict read from a recorded table is the one the check gave; the verdict
reads each class's slope against the band; a table lacking a column is refused."""

from __future__ import annotations

import pytest

from trainers.measure import coordcheck_table as ct


def _table(slope: float) -> list[dict[str, float]]:
    """Steps 0 and 1 at widths 32 and 128; every class's update grows as width^slope."""
    return [
        {"size": float(size), "step": float(step)}
        | {c: 1.0 + step / 3 for c in ct.CLASSES}
        | {ct.column(c, "deltas"): step * size**slope / 7 for c in ct.CLASSES}
        for step in (0, 1)
        for size in (32, 128)
    ]


def test_the_csv_round_trip_is_exact() -> None:
    """Every float comes back bit for bit (1/3, 1/7: no rounding in the file)."""
    table = _table(0.1)
    assert ct.from_csv(ct.to_csv(table)) == table


def test_the_verdict_reads_the_slope_against_the_band() -> None:
    """Slopes inside the band pass; one above it fails, naming each class and its slope."""
    assert ct.verdict(_table(0.1), "width")[0]
    assert ct.slopes(_table(0.5))["stream"] == pytest.approx(0.5)
    ok, line = ct.verdict(_table(0.5), "depth")
    assert not ok and line.startswith("fail: embedding ~ depth^+0.50, stream ~ depth^+0.50")


def test_a_table_without_the_check_columns_is_refused() -> None:
    """A CSV that is not a coord check's table: ValueError naming what it lacks."""
    with pytest.raises(ValueError, match="missing attention_logits"):
        ct.from_csv("size,step,embedding\n32,0,1.0\n")
