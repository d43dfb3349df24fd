"""The LaTeX renderer and what it needs from the document: escaping, booktabs tables with bold
best values, figures as PDF drawn only on request, and the main table's marks (fast, on
constructed documents and sweeps; the real sweep's report is ``test_formats``)."""

from __future__ import annotations

import numpy as np

from reports import figures
from reports.document import Document, Figure, Paragraph, Section, Table
from reports.render_html import render_html
from reports.render_md import render_markdown
from reports.render_tex import escape, render_tex
from reports.sections import main_table
from reports.sections.results import COLUMNS
from tests.reports.frames import sweep, trial
from tests.reports.images import tiny_png

SPECIAL = r"a_b & c% d# e$ f{g} h~ i^ j\k"
ESCAPED = r"a\_b \& c\% d\# e\$ f\{g\} h\textasciitilde{} i\textasciicircum{} j\textbackslash{}k"


def _doc(*blocks: Paragraph | Table | Figure, title: str = "report") -> Document:
    return Document(title, (Section("Results", blocks),))


def _body(text: str) -> str:
    return text.split("\\begin{document}", 1)[1]


def test_special_characters_are_escaped_everywhere() -> None:
    """LaTeX's ten special characters come out literal in the title, section titles,
    paragraphs, table headers and cells, captions and code spans."""
    doc = Document(
        f"sweep {SPECIAL}",
        (
            Section(
                f"arms {SPECIAL}",
                (
                    Paragraph(f"text {SPECIAL} and `code {SPECIAL}`"),
                    Table((f"col {SPECIAL}",), ((f"arm {SPECIAL}",),), caption=f"cap {SPECIAL}"),
                    Figure("f", tiny_png(2, 2, 9), f"fig {SPECIAL}"),
                ),
            ),
        ),
    )
    text, _ = render_tex(doc)
    for where in ("sweep", "arms", "text", "col", "arm", "cap", "fig"):
        assert f"{where} {ESCAPED}" in text
    assert f"\\texttt{{code {ESCAPED}}}" in text
    # with every escape taken out, no special character is left bare in the body
    bare = _body(text).replace(ESCAPED, "").replace("{%\n", "")  # the renderer's own comment
    rows = [line for line in bare.splitlines() if "&" in line]
    assert rows == [], rows  # the one-column table has no alignment &
    assert not set("%$#_^~") & set(bare.replace("$\\pm$", ""))


def test_symbols_and_dashes_survive_pdflatex_fonts() -> None:
    """The report's non-ASCII symbols become LaTeX commands, an unknown one its code point, and
    doubled hyphens stay two hyphens (not an en dash)."""
    assert escape("4.1 ± 0.2") == r"4.1 $\pm$ 0.2"
    assert escape("Δ vs baseline") == r"$\Delta$ vs baseline"
    assert escape("—") == "---"
    assert escape("漢") == r"\texttt{U+6F22}"
    assert escape("--seeds") == "-{}-seeds"
    assert escape("café") == "café"


def test_code_paragraph_keeps_lines_and_spaces() -> None:
    """A code paragraph keeps every line, its indentation and an empty line, escaped."""
    text, _ = render_tex(_doc(Paragraph("nas sweep x\n\n    --set a_b=1", "code")))
    block = text.split("\\begin{flushleft}", 1)[1].split("\\end{flushleft}")[0]
    lines = block.split("\n")[1:-1]  # after the \ttfamily line, before \end
    assert len(lines) == 3 and lines[1] == "\\mbox{}\\\\"
    assert "\\ \\ \\ \\ -{}-set\\ a\\_b=1" in lines[2]


def test_tables_are_booktabs_with_bold_cells_and_italic_highlight() -> None:
    """A table renders as a booktabs tabular in a table float with its caption; bold cells are
    \\textbf, a highlighted row italic, and the Markdown and HTML twins bold the same cells."""
    table = Table(("arm", "loss"), (("a", "1.0"), ("b", "2.0")), "cap", (1,), ((0, 1),))
    text, _ = render_tex(_doc(table))
    assert "\\begin{table}" in text and "\\caption{cap}" in text
    assert all(rule in text for rule in ("\\toprule", "\\midrule", "\\bottomrule"))
    assert "a & \\textbf{1.0} \\\\" in text
    assert "\\textit{b} & \\textit{2.0} \\\\" in text
    assert "| a | **1.0** |" in render_markdown(_doc(table))[0]
    assert "<td><strong>1.0</strong></td>" in render_html(_doc(table))


def test_figures_include_their_pdf_drawn_only_when_rendered() -> None:
    """A figure with a drawing is included as figures/<name>.pdf holding the drawing's bytes, a
    pixel-only one as its PNG; the PDF is drawn when the LaTeX renders, never for Markdown."""
    calls: list[int] = []

    def draw() -> bytes:
        calls.append(1)
        return b"%PDF-1.4 drawn"

    png = tiny_png(2, 2, 7)
    doc = _doc(Figure("vector", png, "v", draw), Figure("pixels", png, "p"))
    render_markdown(doc)
    assert calls == []
    text, files = render_tex(doc)
    assert calls == [1]
    assert files == {"figures/vector.pdf": b"%PDF-1.4 drawn", "figures/pixels.png": png}
    for path in files:
        assert f"{{{path}}}" in text


def test_figure_functions_draw_the_same_figure_as_pdf() -> None:
    """A report figure's PDF is a real, reproducible PDF of the drawing beside its PNG."""
    c = np.array([1e12, 2e12, 4e12])
    image = figures.compute_fits({"standard/pre": (c, np.array([3.0, 2.8, 2.7]))}, {})
    assert image is not None and image.png.startswith(b"\x89PNG")
    pdf = image.pdf()
    assert pdf.startswith(b"%PDF") and pdf == image.pdf()


def test_main_table_bolds_the_best_means_and_marks_significance() -> None:
    """The lowest mean of each loss column is bold (in every format), and a difference whose
    verdict is significant carries * in its Δ cell, explained in the caption."""
    rows = [trial("base", s, 3.0 + 0.01 * s) for s in range(4)]
    rows += [trial("deep", s, 2.0 + 0.01 * s, model__norm="layernorm") for s in range(4)]
    section, _ = main_table(sweep(rows), "base")
    table = next(b for b in section.blocks if isinstance(b, Table))
    deep = next(i for i, r in enumerate(table.rows) if r[0] == "deep")
    assert (deep, COLUMNS.index("final val loss")) in table.bold
    assert all(i == deep for i, _ in table.bold)
    cells = dict(zip(COLUMNS, table.rows[deep], strict=True))
    assert cells["verdict"] == "better" and cells["Δ vs baseline [95% CI]"].endswith(" *")
    assert "*: Δ significant" in table.caption and "bold" in table.caption
