"""The one-axis section on constructed sweeps: a field an arm does not read is no axis of that
arm, no table is printed in which no row holds two values, and a sweep in which nothing varies
but the wiring gets one line instead of the results table again."""

from __future__ import annotations

from typing import Any

import pytest

from reports.document import Paragraph, Section, Table
from reports.sections import axis_effects
from reports.sweep import SweepData
from tests.reports.frames import sweep, trial

SEEDS = range(3)
DEFAULT_N = 8  # ModelConfig.attnres_blocks's default: what a sweep records where it is unread


def _arm(arm: str, loss: float, **config: Any) -> list[dict[str, Any]]:
    """``arm``'s three seeds, losses ``loss`` + seed / 100."""
    return [trial(arm, s, loss + s / 100, **config) for s in SEEDS]


def _standard(loss: float = 3.0, **config: Any) -> list[dict[str, Any]]:
    return _arm("standard", loss, model__attnres_blocks=DEFAULT_N, **config)


def _block(n: int, arm: str = "block_attnres", loss: float = 2.9, **config: Any) -> list[dict]:
    return _arm(arm, loss, model__residual="block_attnres", model__attnres_blocks=n, **config)


def _full(loss: float = 2.8, **config: Any) -> list[dict[str, Any]]:
    return _arm(
        "attnres", loss, model__residual="attnres", model__attnres_blocks=DEFAULT_N, **config
    )


def _demo() -> SweepData:
    """The demo's shape: standard (N unread, at its default 8) against Block AttnRes at N = 4."""
    return sweep([*_standard(model__n_layers=8), *_block(4, model__n_layers=8)])


def _tables(section: Section | None) -> dict[str, Table]:
    assert section is not None
    return {b.caption: b for b in section.blocks if isinstance(b, Table)}


def _text(section: Section | None) -> str:
    assert section is not None
    return " ".join(b.text for b in section.blocks if isinstance(b, Paragraph))


def _row(table: Table, first: str) -> dict[str, str]:
    row = next(r for r in table.rows if r[0] == first)
    return dict(zip(table.columns, row, strict=True))


def _holds_two(row: tuple[str, ...]) -> bool:
    return sum(cell != "—" for cell in row[1:]) >= 2


def test_the_demo_says_in_one_line_that_only_the_wiring_varies() -> None:
    """standard does not read model.attnres_blocks, so its default (8) beside Block AttnRes's
    4 is no axis: nothing varies but the residual, and the section says so in one line, with
    no table (the results table already holds the two arms)."""
    section = axis_effects(_demo())
    assert section is not None
    assert _tables(section) == {}
    (line,) = section.blocks
    assert isinstance(line, Paragraph)
    assert "Nothing varies but the wiring (`model.residual`)" in line.text
    assert "attnres_blocks" not in line.text


def test_an_unread_field_is_no_axis_and_splits_no_row() -> None:
    """standard, Full and Block AttnRes (N = 4) at two depths: N is read by Block AttnRes alone,
    where it takes one value, so it is no axis; the residual's rows are the depths alone, each
    holding all three arms."""
    rows = [
        *[r for depth in (4, 8) for r in _standard(model__n_layers=depth)],
        *[r for depth in (4, 8) for r in _full(model__n_layers=depth)],
        *[r for depth in (4, 8) for r in _block(4, model__n_layers=depth)],
    ]
    tables = _tables(axis_effects(sweep(rows)))
    assert set(tables) == {"effect of model.residual", "effect of model.n_layers"}
    residual = tables["effect of model.residual"]
    assert residual.columns == ("model.n_layers", "attnres", "block_attnres", "standard")
    assert [r[0] for r in residual.rows] == ["4", "8"]
    assert all("—" not in r for r in residual.rows)
    assert [r[0] for r in tables["effect of model.n_layers"].rows] == [
        "attnres",
        "block_attnres",
        "standard",
    ]


def test_arms_that_do_not_read_a_row_field_share_one_row() -> None:
    """Block AttnRes at N = 2 and 4 beside standard and Full AttnRes, which do not read N: the
    residual's table has a row per N Block AttnRes ran and one "(not read)" row holding the
    other two arms; N's own table holds only the arms that read it (no column 8 for the
    default the others recorded)."""
    rows = [*_standard(), *_full(), *_block(2, "block/N=2"), *_block(4, "block/N=4", 2.7)]
    tables = _tables(axis_effects(sweep(rows)))
    residual = tables["effect of model.residual"]
    assert [r[0] for r in residual.rows] == ["2", "4", "(not read)"]
    unread = _row(residual, "(not read)")
    assert unread["attnres"] == "2.8100" and unread["standard"] == "3.0100"
    assert unread["block_attnres"] == "—"
    blocks = tables["effect of model.attnres_blocks"]
    assert blocks.columns == ("", "2", "4")
    assert blocks.rows == (("all", "2.9100", "2.7100"),)


def test_axes_that_vary_only_together_get_one_line() -> None:
    """standard at 4 layers and Block AttnRes at 8: no two trials differ in one axis alone, so
    there is no table (each row would hold one number) and one line says why."""
    rows = [*_standard(model__n_layers=4), *_block(4, model__n_layers=8)]
    section = axis_effects(sweep(rows))
    assert _tables(section) == {}
    text = _text(section)
    assert "vary together" in text and "`model.n_layers`" in text and "`model.residual`" in text


def _sweeps() -> dict[str, SweepData]:
    both_depths = [
        *[r for depth in (4, 8) for r in _standard(model__n_layers=depth)],
        *[r for depth in (4, 8) for r in _block(4, model__n_layers=depth)],
    ]
    n_sweep = [*_full(), *[r for n in (1, 2, 4, 8) for r in _block(n, f"block/N={n}")]]
    return {
        "demo": _demo(),
        "depths": sweep(both_depths),
        "together": sweep([*_standard(model__n_layers=4), *_block(4, model__n_layers=8)]),
        "block sizes": sweep(n_sweep),
        "mixed": sweep([*_standard(), *_full(), *_block(2, "b2"), *_block(4, "b4")]),
    }


@pytest.mark.parametrize("name", list(_sweeps()))
def test_every_table_has_a_row_holding_two_values(name: str) -> None:
    """Whatever the sweep, each one-axis table printed has a row that compares two values of
    its axis: a table of one number per row shows no effect of anything."""
    section = axis_effects(_sweeps()[name])
    assert section is not None
    for caption, table in _tables(section).items():
        assert any(_holds_two(r) for r in table.rows), caption
