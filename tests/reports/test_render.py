"""The report renderers and writer: escaping, self-containment, figures, tables, atomic writes."""

from __future__ import annotations

import base64
import dataclasses
import re
from pathlib import Path

import pytest

import reports.write
from reports.document import DataFile, Document, Figure, Paragraph, Section, Table
from reports.render_html import render_html, section_ids
from reports.render_md import render_markdown
from reports.write import write_report
from tests.reports.images import tiny_png

SCRIPT = "<script>alert('x')</script>"


def sample_doc() -> Document:
    table = Table(
        columns=("variant", "loss | val", "note"),
        rows=(("baseline", "3.10", "a|b"), ("attnres", "`2|9`", SCRIPT)),
        caption="Final loss",
        highlight=(0,),
    )
    return Document(
        title="Depth sweep <1>",
        subtitle="seed 0 & friends",
        sections=(
            Section(
                "Summary",
                (
                    Paragraph(f"Residual `x + f(x)` beats {SCRIPT}."),
                    Paragraph("Only 2 seeds.", kind="note"),
                    Paragraph("Diverged at depth 64.", kind="warning"),
                    Paragraph("nas report --out out/\nline <two>", kind="code"),
                ),
            ),
            Section("Results", (table, Figure("loss_curve", tiny_png(3, 2, 10), "Loss <curve>"))),
            Section("Results", (Figure("grad-norm", tiny_png(2, 2, 200), "Gradient norm"),), 3),
        ),
    )


def md_table_rows(md: str) -> list[str]:
    return [line for line in md.splitlines() if line.startswith("|")]


def count_cells(row: str) -> int:
    """GFM cells: split on pipes not escaped with a backslash."""
    return len(re.split(r"(?<!\\)\|", row.strip()[1:-1]))


def test_html_escapes_script_in_text_and_cells() -> None:
    """A ``<script>`` in prose, a table cell or a title comes out as text, never as markup."""
    page = render_html(sample_doc())
    assert "<script" not in page.lower()
    assert page.count("&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;") == 2
    assert "<title>Depth sweep &lt;1&gt;</title>" in page


def test_html_figures_are_data_uris_of_the_exact_bytes() -> None:
    """Each figure appears once as a data URI that decodes to its PNG bytes, with alt and caption."""
    doc = sample_doc()
    page = render_html(doc)
    uris = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(uris) == len(doc.figures()) == 2
    for fig, uri in zip(doc.figures(), uris, strict=True):
        assert base64.b64decode(uri, validate=True) == fig.png
        assert page.count(uri) == 1
    assert 'alt="Loss &lt;curve&gt;"' in page
    assert "<figcaption>Loss &lt;curve&gt;</figcaption>" in page


def test_html_has_no_external_references() -> None:
    """The page is self-contained: no URL, absolute path or protocol-relative reference."""
    page = render_html(sample_doc())
    assert '<meta charset="utf-8">' in page
    for needle in ("http://", "https://", 'src="/', 'href="/', "url(", "@import", "<link"):
        assert needle not in page.lower(), needle


def test_html_toc_anchors_match_section_ids() -> None:
    """Every TOC link targets a section id, one per section, unique even for repeated titles."""
    doc = sample_doc()
    page = render_html(doc)
    links = re.findall(r'<a href="#([^"]+)">', page)
    ids = re.findall(r'<section id="([^"]+)">', page)
    assert links == ids == list(section_ids(doc)) == ["summary", "results", "results-2"]
    assert '<tr class="highlight"><td>baseline</td>' in page
    assert 'class="callout note"' in page and 'class="callout warning"' in page
    assert "<pre><code>nas report --out out/\nline &lt;two&gt;</code></pre>" in page
    assert "<code>x + f(x)</code>" in page


def test_markdown_tables_keep_their_column_count_with_pipes() -> None:
    """Every row of a GFM table has as many cells as the header, pipes in cells included."""
    md, _ = render_markdown(sample_doc())
    rows = md_table_rows(md)
    assert len(rows) == 4  # header, delimiter, two rows
    assert {count_cells(r) for r in rows} == {3}
    assert "**baseline**" in rows[2]
    assert "`2\\|9`" in rows[3]  # GFM needs the escape inside code spans in tables too


def test_markdown_figure_files_match_links() -> None:
    """The returned files are exactly the images linked, with the figures' bytes."""
    doc = sample_doc()
    md, files = render_markdown(doc, figure_dir="img")
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
    assert sorted(links) == sorted(files) == ["img/grad-norm.png", "img/loss_curve.png"]
    assert files["img/loss_curve.png"] == doc.figures()[0].png
    assert "![Loss \\<curve\\>](img/loss_curve.png)" in md  # `<` escaped: not raw HTML


def test_markdown_callouts_code_and_escaping() -> None:
    """Notes are quoted callouts, code is fenced verbatim, prose specials are escaped."""
    md, _ = render_markdown(sample_doc())
    assert "> **Note:** Only 2 seeds." in md
    assert "> **Warning:** Diverged at depth 64." in md
    assert "```\nnas report --out out/\nline <two>\n```" in md
    assert "`x + f(x)`" in md
    assert "\\<script\\>" in md


def test_document_rejects_bad_values() -> None:
    """Bad figure names, ragged rows, unknown kinds and duplicate figures fail at construction."""
    with pytest.raises(ValueError, match="Figure name"):
        Figure("Loss Curve", tiny_png(1, 1, 0), "x")
    with pytest.raises(ValueError, match="not a PNG"):
        Figure("loss", b"GIF89a", "x")
    with pytest.raises(ValueError, match="2 cells for 3 columns"):
        Table(("a", "b", "c"), (("1", "2"),))
    with pytest.raises(ValueError, match="valid: text, note, warning, code"):
        Paragraph("x", kind="tip")  # type: ignore[arg-type]
    fig = Figure("same", tiny_png(1, 1, 0), "x")
    with pytest.raises(ValueError, match="used twice: same"):
        Document("t", (Section("a", (fig,)), Section("b", (fig,))))


def test_write_report_writes_both_formats(tmp_path: Path) -> None:
    """Both formats land in ``out`` with the figures, and the written paths are returned."""
    out = tmp_path / "new" / "report"
    written = write_report(sample_doc(), out, ["md", "html"])
    rel = sorted(str(p.relative_to(out)) for p in written)
    assert rel == ["figures/grad-norm.png", "figures/loss_curve.png", "report.html", "report.md"]
    assert all(p.is_file() for p in written)
    assert sorted(p.name for p in out.parent.iterdir()) == ["report"]  # no leftovers


def test_write_report_replaces_a_previous_report(tmp_path: Path) -> None:
    """A second write replaces the whole folder: a stale figure from the first one is gone."""
    out = tmp_path / "report"
    write_report(sample_doc(), out, ["md"])
    (out / "figures" / "stale.png").write_bytes(tiny_png(1, 1, 0))
    write_report(sample_doc(), out, ["html"])
    assert sorted(p.name for p in out.iterdir()) == ["report.html"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]


def test_write_report_failure_leaves_previous_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A render failing after the HTML was staged leaves the old report and no temporary folder."""
    out = tmp_path / "report"
    write_report(sample_doc(), out, ["html"])
    before = (out / "report.html").read_bytes()

    def broken(*_: object, **__: object) -> tuple[str, dict[str, bytes]]:
        raise RuntimeError("render failed mid-way")

    monkeypatch.setattr(reports.write, "render_markdown", broken)
    with pytest.raises(RuntimeError, match="mid-way"):
        write_report(sample_doc(), out, ["html", "md"])
    assert sorted(p.name for p in out.iterdir()) == ["report.html"]
    assert (out / "report.html").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]


def test_write_report_unwritable_out_is_one_line(tmp_path: Path) -> None:
    """An ``out`` below a regular file raises ValueError with one line naming the folder."""
    blocker = tmp_path / "file.txt"
    blocker.write_text("not a folder")
    with pytest.raises(ValueError, match=r"^--out .*: not a writable folder \(") as err:
        write_report(sample_doc(), blocker / "report", ["html"])
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="not a writable folder"):
        write_report(sample_doc(), blocker, ["html"])


def test_write_report_refuses_a_folder_that_is_not_a_report(tmp_path: Path) -> None:
    """Replacing a folder holding other files would delete them; it is refused, untouched."""
    (tmp_path / "notes.txt").write_text("keep me")
    with pytest.raises(ValueError, match="not part of a report: notes.txt"):
        write_report(sample_doc(), tmp_path, ["html"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_write_report_rejects_unknown_formats(tmp_path: Path) -> None:
    """An unknown or empty format list fails before anything is written, listing the valid ones."""
    for formats in (["pdf"], []):
        with pytest.raises(ValueError, match="one or more of html, md"):
            write_report(sample_doc(), tmp_path / "r", formats)
    assert not any(tmp_path.iterdir())


def test_write_report_writes_the_documents_data_files_as_they_are(tmp_path: Path) -> None:
    """The csv format writes the document's data files byte for byte and computes nothing; a
    document without them is refused in one line before anything is written."""
    files = (DataFile("trials.csv", b"run_id\nr1\n"), DataFile("arms.csv", b"arm\na\n"))
    doc = dataclasses.replace(sample_doc(), data_files=files)
    written = write_report(doc, tmp_path / "r", ["csv"])
    assert {p.name: p.read_bytes() for p in written} == {f.name: f.content for f in files}
    with pytest.raises(ValueError, match=r"^format csv: this document holds no tables"):
        write_report(sample_doc(), tmp_path / "s", ["csv"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r"]


def test_a_data_file_name_is_a_csv_file_name() -> None:
    """A data file becomes a file in the report folder: its name is a plain ``.csv`` stem."""
    for name in ("../x.csv", "trials.txt", "a b.csv"):
        with pytest.raises(ValueError, match="DataFile name"):
            DataFile(name, b"")
    with pytest.raises(ValueError, match="data files named twice"):
        Document("t", (), data_files=(DataFile("a.csv", b""), DataFile("a.csv", b"")))
