"""Render a ``Document`` as GitHub-flavoured Markdown plus the figure files it links to.

Markdown cannot embed images the way the HTML page does, so the renderer returns the text and a
``{relative path: bytes}`` map of figure files; ``reports.write`` puts both on disk. Text is
escaped so that a metric name like ``loss*`` or a cell holding ``a|b`` stays literal.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from reports.document import Document, Figure, Paragraph, Section, Table, inline_spans

# Characters with a meaning anywhere in a line; ``|`` only matters in tables (see _cell).
# An underscore inside a word (``block_attnres``) is literal in GFM and stays unescaped.
_SPECIAL = re.compile(r"([\\*\[\]<>&~]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")
# Line openings that would start a heading, quote, list, rule or setext underline.
_LINE_START = re.compile(r"^(\s*)([#>+=-])")
_LIST_NUMBER = re.compile(
    r"^(\s*\d+)([.)])"
)  # "1." escapes as "1\." (a backslash before a digit is literal)


def render_markdown(doc: Document, figure_dir: str = "figures") -> tuple[str, dict[str, bytes]]:
    """The Markdown text and the figure files to write next to it, keyed by relative path."""
    figure_dir = check_figure_dir(figure_dir)
    parts = [f"# {_escape(doc.title)}"]
    if doc.subtitle:
        parts.append(f"*{_escape(doc.subtitle)}*")
    parts.extend(_section(s, figure_dir) for s in doc.sections)
    files = {_figure_path(f, figure_dir): f.png for f in doc.figures()}
    return "\n\n".join(parts) + "\n", files


def check_figure_dir(figure_dir: str) -> str:
    """A relative folder inside the report: the links must keep working when it is moved."""
    path = PurePosixPath(figure_dir)
    if path.is_absolute() or ".." in path.parts or str(path) in ("", "."):
        raise ValueError(f"figure_dir {figure_dir!r}: must be a relative folder inside the report")
    return str(path)


def _figure_path(f: Figure, figure_dir: str) -> str:
    return f"{figure_dir}/{f.name}.png"


def _section(section: Section, figure_dir: str) -> str:
    parts = [f"{'#' * section.level} {_escape(section.title)}"]
    for block in section.blocks:
        if isinstance(block, Paragraph):
            parts.append(_paragraph(block))
        elif isinstance(block, Table):
            parts.append(_table(block))
        else:
            parts.append(_figure(block, figure_dir))
    return "\n\n".join(parts)


def _escape(text: str) -> str:
    """Prose made literal, line by line (a line break stays a line break)."""
    return "\n".join(_escape_line(line) for line in text.split("\n"))


def _escape_line(line: str) -> str:
    line = _SPECIAL.sub(r"\\\1", line)
    return _LIST_NUMBER.sub(r"\1\\\2", _LINE_START.sub(r"\1\\\2", line))


def _code_span(code: str) -> str:
    # A span that starts or ends with a space would lose it (CommonMark strips one each side).
    return f"` {code} `" if code.startswith(" ") and code.endswith(" ") else f"`{code}`"


def _inline(text: str) -> str:
    return "".join(
        _code_span(piece) if is_code else _escape(piece) for piece, is_code in inline_spans(text)
    )


def _paragraph(p: Paragraph) -> str:
    if p.kind == "code":
        # The fence must be longer than any backtick run inside, or the code would close it.
        longest = max((len(run) for run in re.findall(r"`+", p.text)), default=0)
        fence = "`" * max(3, longest + 1)
        return f"{fence}\n{p.text}\n{fence}"
    if p.kind == "text":
        return _inline(p.text)
    label = "Note" if p.kind == "note" else "Warning"
    lines = f"**{label}:** {_inline(p.text)}".split("\n")
    return "\n".join(f"> {line}" if line else ">" for line in lines)


def _cell(text: str, bold: bool = False) -> str:
    """One table cell: on one line, with ``|`` escaped even inside code spans (GFM requires it)."""
    # Only inline escapes: a cell cannot open a heading, list or quote, so "4.19" stays as is.
    one_line = " ".join(text.split("\n")).strip()
    cell = "".join(
        _code_span(piece) if is_code else _SPECIAL.sub(r"\\\1", piece)
        for piece, is_code in inline_spans(one_line)
    ).replace("|", "\\|")
    return f"**{cell}**" if bold and cell.strip() else cell


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _table(t: Table) -> str:
    lines = [f"**{_inline(t.caption)}**", ""] if t.caption else []
    lines.append(_row([_cell(c) for c in t.columns]))
    lines.append(_row(["---"] * len(t.columns)))
    marked, bold = set(t.highlight), set(t.bold)
    lines.extend(
        _row([_cell(c, bold=i in marked or (i, j) in bold) for j, c in enumerate(row)])
        for i, row in enumerate(t.rows)
    )
    return "\n".join(lines)


def _figure(f: Figure, figure_dir: str) -> str:
    # The alt text is inline Markdown too: escaped like prose, kept on one line.
    alt = _SPECIAL.sub(r"\\\1", " ".join(f.caption.split()))
    return f"![{alt}]({_figure_path(f, figure_dir)})\n\n*{_escape(f.caption)}*"
