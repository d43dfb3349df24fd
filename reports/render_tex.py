"""Render a ``Document`` as a LaTeX article plus the figure files it includes.

Tables are booktabs ``tabular``s in ``table`` floats, figures ``\\includegraphics`` of
``figures/<name>.pdf`` (the vector drawing; a figure drawn only as pixels is included as its PNG).
The preamble asks for nothing beyond a plain TeX Live (graphicx, booktabs), and every piece of
text is escaped: LaTeX's special characters become literal, and the few non-ASCII symbols the
report writes (±, Δ, —, ×, ...) become their LaTeX commands, since pdflatex's default fonts hold
no Greek or mathematical glyphs.
"""

from __future__ import annotations

from reports.document import Document, Figure, Paragraph, Section, Table, inline_spans
from reports.render_md import check_figure_dir

_PREAMBLE = r"""\documentclass[11pt]{article}
\usepackage[utf8]{inputenc}
\usepackage[margin=2cm]{geometry}
\usepackage{graphicx}
\usepackage{booktabs}
"""

_ESCAPES = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    # The default (OT1) fonts put other glyphs in these slots: < would print as ¡.
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "|": r"\textbar{}",
    "±": r"$\pm$",
    "Δ": r"$\Delta$",
    "α": r"$\alpha$",
    "−": r"$-$",
    "×": r"$\times$",
    "·": r"$\cdot$",
    "≥": r"$\geq$",
    "≤": r"$\leq$",
    "≈": r"$\approx$",
    "→": r"$\rightarrow$",
    "²": r"$^{2}$",
    "—": "---",
    "–": "--",
    "…": r"\ldots{}",
    "§": r"\S{}",
}
_CONTROL_SPACE = "\\ "
# A character TeX joins with its twin (-- is a dash, '' a quote): kept apart by an empty group.
_LIGATURES = "-`'"
_SECTIONING = {2: "section", 3: "subsection", 4: "subsubsection", 5: "paragraph", 6: "subparagraph"}


def render_tex(doc: Document, figure_dir: str = "figures") -> tuple[str, dict[str, bytes]]:
    """The LaTeX source and the figure files to write next to it, keyed by relative path."""
    figure_dir = check_figure_dir(figure_dir)
    parts = [
        _PREAMBLE,
        f"\\title{{{escape(doc.title)}}}",
        f"\\date{{{escape(doc.subtitle)}}}",
        "\\begin{document}",
        "\\maketitle",
    ]
    parts.extend(_section(s, figure_dir) for s in doc.sections)
    parts.append("\\end{document}")
    files = {_figure_path(f, figure_dir): _figure_bytes(f) for f in doc.figures()}
    return "\n\n".join(parts) + "\n", files


def escape(text: str) -> str:
    """``text`` as literal LaTeX text. A character outside Latin-1 with no LaTeX name is shown
    as its code point rather than left to break the build."""
    out = []
    for c, after in zip(text, text[1:] + " ", strict=False):  # "" pairs with " "
        out.append(_escape_char(c) + ("{}" if c in _LIGATURES and after == c else ""))
    return "".join(out)


def _escape_char(c: str) -> str:
    if c in _ESCAPES:
        return _ESCAPES[c]
    if ord(c) < 0x100:  # inputenc's utf8 knows Latin-1 (accented letters and the like)
        return c
    return f"\\texttt{{U+{ord(c):04X}}}"


def _inline(text: str) -> str:
    """Escaped prose with backtick spans in typewriter type; a line break stays a line break."""
    return "".join(
        f"\\texttt{{{escape(piece)}}}" if is_code else escape(piece)
        for piece, is_code in inline_spans(" ".join(text.split("\n")))
    )


def _figure_path(f: Figure, figure_dir: str) -> str:
    return f"{figure_dir}/{f.name}.{'png' if f.pdf is None else 'pdf'}"


def _figure_bytes(f: Figure) -> bytes:
    if f.pdf is None:
        return f.png
    pdf = f.pdf()
    # Checked here rather than in Figure, which would have to draw it to know.
    if not pdf.startswith(b"%PDF"):
        raise ValueError(f"Figure {f.name!r}: its pdf drawing is not a PDF file")
    return pdf


def _section(section: Section, figure_dir: str) -> str:
    parts = [f"\\{_SECTIONING[section.level]}{{{escape(section.title)}}}"]
    for block in section.blocks:
        if isinstance(block, Paragraph):
            parts.append(_paragraph(block))
        elif isinstance(block, Table):
            parts.append(_table(block))
        else:
            parts.append(_figure(block, figure_dir))
    return "\n\n".join(parts)


def _paragraph(p: Paragraph) -> str:
    if p.kind == "code":
        return _code(p.text)
    if p.kind == "text":
        return _inline(p.text)
    label = "Note" if p.kind == "note" else "Warning"
    return f"\\begin{{quote}}\n\\textbf{{{label}:}} {_inline(p.text)}\n\\end{{quote}}"


def _code(text: str) -> str:
    """A preformatted block, line for line. Not ``verbatim``: its text would reach pdflatex
    unescaped, and a symbol like ± in a command line would stop the build."""
    # Control spaces keep runs of spaces (indentation) that TeX would otherwise collapse;
    # \mbox{} starts each line so that an empty one is a line too.
    lines = ["\\mbox{}" + escape(line).replace(" ", _CONTROL_SPACE) for line in text.split("\n")]
    return "\\begin{flushleft}\\ttfamily\\small\n" + "\\\\\n".join(lines) + "\n\\end{flushleft}"


def _cell(text: str, bold: bool, italic: bool) -> str:
    cell = _inline(text)
    if bold and cell:
        cell = f"\\textbf{{{cell}}}"
    return f"\\textit{{{cell}}}" if italic and cell else cell


def _table(t: Table) -> str:
    """A booktabs table; a highlighted row (the baseline) in italics, bold being the table's
    own mark (e.g. the best value). Scaled down to the text width only when wider."""
    bold, marked = set(t.bold), set(t.highlight)
    lines = ["\\begin{table}[!htbp]", "\\centering"]
    if t.caption:
        lines.append(f"\\caption{{{_inline(t.caption)}}}")
    lines += [
        "\\resizebox{\\ifdim\\width>\\linewidth\\linewidth\\else\\width\\fi}{!}{%",
        f"\\begin{{tabular}}{{{'l' * len(t.columns)}}}",
        "\\toprule",
        " & ".join(_inline(c) for c in t.columns) + " \\\\",
        "\\midrule",
    ]
    for i, row in enumerate(t.rows):
        cells = [_cell(c, (i, j) in bold, i in marked) for j, c in enumerate(row)]
        lines.append(" & ".join(cells) + " \\\\")
    lines += ["\\bottomrule", "\\end{tabular}}", "\\end{table}"]
    return "\n".join(lines)


def _figure(f: Figure, figure_dir: str) -> str:
    return "\n".join(
        [
            "\\begin{figure}[!htbp]",
            "\\centering",
            "\\includegraphics[width=\\linewidth,height=0.4\\textheight,keepaspectratio]"
            f"{{{_figure_path(f, figure_dir)}}}",
            f"\\caption{{{_inline(f.caption)}}}",
            "\\end{figure}",
        ]
    )
