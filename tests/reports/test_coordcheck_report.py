"""The coord-check section: a sweep under a parametrization other than sp shows each recorded
check's slopes, its verdict per axis (a failing one as a warning naming the class) and its
figure, and says what was checked; an sp sweep has no such section; a non-sp sweep that recorded
no check says so. The tables are constructed with known slopes."""

from __future__ import annotations

from typing import Any

from reports.build import build_report
from reports.document import Figure, Paragraph, Section, Table
from reports.render_md import render_markdown
from reports.sections.coordcheck import TITLE, coordcheck_section
from reports.sweep import RecordedCoordCheck
from tests.reports.frames import sweep, trial
from trainers.measure import coordcheck_table as ct

COMPLETEP = {
    "model.parametrization": "completep",
    "model.base_width": 32,
    "model.base_depth": 2,
    "model.depth_alpha": 1.0,
}


def table(sizes: tuple[int, ...], slopes: dict[str, float]) -> tuple[dict[str, float], ...]:
    """A check's table over ``sizes`` at steps 0 and 1 whose update grows as size^slope per
    class (0 where not given)."""
    rows = []
    for step in (0, 1):
        for size in sizes:
            row = {"size": float(size), "step": float(step)}
            for c in ct.CLASSES:
                row[c] = 1.0
                row[ct.column(c, "deltas")] = step * 0.01 * size ** slopes.get(c, 0.0)
            rows.append(row)
    return tuple(rows)


def check(axis: str, sizes: tuple[int, ...], **slopes: float) -> RecordedCoordCheck:
    model = {"model.residual": "standard", "model.placement": "pre", **COMPLETEP}
    entry: dict[str, Any] = {
        "name": f"completep-{axis}-0123456789",
        "axis": axis,
        "sizes": list(sizes),
        "steps": 1,
        "seeds": [0],
        "batch_size": 4,
        "lr": 0.003,
        "model": model,
        "file": f"coordcheck/completep-{axis}-0123456789.csv",
    }
    return RecordedCoordCheck(entry, table(sizes, slopes))


def completep_sweep(*checks: RecordedCoordCheck) -> Any:
    rows = [trial("standard", s, 3.0 + s / 10, **COMPLETEP) for s in (0, 1)]
    return sweep(rows, coordchecks=checks)


def _section(data: Any) -> Section:
    found = coordcheck_section(data)
    assert found is not None and found.title == TITLE
    return found


def test_an_sp_sweep_has_no_coord_check_section() -> None:
    """The standard parametrization, recorded or not (a record from before the field): no
    section, so its report is the one it was."""
    for rows in (
        [trial("standard", 0, 3.0)],
        [trial("standard", 0, 3.0, model__parametrization="sp")],
    ):
        assert coordcheck_section(sweep(rows)) is None


def test_a_recorded_check_shows_its_verdict_per_axis_and_its_figure() -> None:
    """A width check whose classes stay flat passes; a depth check whose stream grows as depth
    fails, shown as a warning naming the stream; one figure per check; the text says what was
    checked (sizes, steps, seeds, lr)."""
    width = check("width", (32, 64, 128), attention_out=-0.2)
    depth = check("depth", (2, 4, 8), stream=1.0, mlp_out=-0.5)
    section = _section(completep_sweep(width, depth))
    (summary,) = [b for b in section.blocks if isinstance(b, Table)]
    assert [r[1] for r in summary.rows] == ["width", "depth"]
    assert [r[-1] for r in summary.rows] == ["pass", "fail"]
    assert summary.rows[0][0] == "standard/pre (completep, alpha 1)"
    stream = summary.columns.index("stream")
    mlp = summary.columns.index("mlp_out")
    assert summary.rows[1][stream] == "+1.00"
    assert summary.rows[1][mlp] == "(-0.50)"  # not judged across depths
    warnings = [b.text for b in section.blocks if isinstance(b, Paragraph) and b.kind == "warning"]
    assert len(warnings) == 1 and "depth" in warnings[0] and "stream ~ depth^+1.00" in warnings[0]
    text = section.blocks[0]
    assert isinstance(text, Paragraph)
    assert "reduced coord check" in text.text and "lr 0.003" in text.text
    assert "1 seed" in text.text and "not the sweep's own sizes" in text.text
    shown = [b for b in section.blocks if isinstance(b, Figure)]
    assert [f.name for f in shown] == [
        "coordcheck-completep-width-0123456789",
        "coordcheck-completep-depth-0123456789",
    ]


def test_the_section_renders() -> None:
    """The Markdown report carries the section after the results, its verdict and its
    figure."""
    doc = build_report(completep_sweep(check("width", (32, 64, 128))))
    titles = [s.title for s in doc.sections]
    assert titles.index(TITLE) > titles.index("Results")
    md, files = render_markdown(doc)
    assert "## Coord check" in md and "| pass |" in md
    assert "figures/coordcheck-completep-width-0123456789.png" in md
    assert "coordcheck-completep-width-0123456789.png" in " ".join(files)


def test_a_check_not_run_is_said() -> None:
    """A model whose sizes the configuration refused is listed with the reason, no figure."""
    refused = RecordedCoordCheck(
        {**check("depth", (2, 4, 8)).entry, "error": "model.attnres_blocks: too many"}, None
    )
    section = _section(completep_sweep(check("width", (32, 64, 128)), refused))
    warnings = [b.text for b in section.blocks if isinstance(b, Paragraph) and b.kind == "warning"]
    assert warnings == [
        "standard/pre (completep, alpha 1), depth: not checked, its base sizes are refused "
        "(model.attnres_blocks: too many)."
    ]
    assert len([b for b in section.blocks if isinstance(b, Figure)]) == 1


def test_a_non_sp_sweep_without_a_recorded_check_says_so() -> None:
    """Trials under completep and no check on the record (a sweep from before): a warning, no
    figure, no verdict."""
    section = _section(completep_sweep())
    (only,) = section.blocks
    assert isinstance(only, Paragraph) and only.kind == "warning"
    assert "recorded no coord check" in only.text and "`completep`" in only.text
