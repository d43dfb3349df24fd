"""The report's document model: what a report says, independent of how it is rendered.

A report is a ``Document`` of ``Section``s, each holding ``Paragraph``, ``Table`` and ``Figure``
blocks, and beside them the report's tables as data (``DataFile``s: ``trials.csv``,
``arms.csv``). Every block is a frozen value object validated at construction, so the renderers
(``render_html``, ``render_md``, ``render_tex``) never meet a malformed table or an unsafe figure
name, and ``reports.write`` only writes what the document holds.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, get_args

ParagraphKind = Literal["text", "note", "warning", "code"]
PARAGRAPH_KINDS: tuple[str, ...] = get_args(ParagraphKind)

# Figure names become file names (``figures/<name>.png``) and HTML ids: keep them to a safe stem.
_FIGURE_NAME = re.compile(r"[a-z0-9_-]+")
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_DATA_FILE_NAME = re.compile(r"[a-z0-9_-]+\.csv")


@dataclass(frozen=True)
class Paragraph:
    """A run of prose. ``note``/``warning`` render as a callout, ``code`` as a preformatted block."""

    text: str
    """The words. Backticks mark inline code spans (not in ``code`` paragraphs, taken verbatim)."""
    kind: ParagraphKind = "text"
    """One of ``text``, ``note``, ``warning``, ``code``."""

    def __post_init__(self) -> None:
        if self.kind not in PARAGRAPH_KINDS:
            raise ValueError(
                f"Paragraph kind {self.kind!r}: unknown; valid: {', '.join(PARAGRAPH_KINDS)}"
            )


@dataclass(frozen=True)
class Table:
    """A table of already formatted cells; every row has one cell per column."""

    columns: tuple[str, ...]
    """Header cells."""
    rows: tuple[tuple[str, ...], ...]
    """Body rows, each as long as ``columns``."""
    caption: str = ""
    """Shown above the table; empty for none."""
    highlight: tuple[int, ...] = ()
    """Indices into ``rows`` to emphasize (e.g. the baseline)."""
    bold: tuple[tuple[int, int], ...] = ()
    """``(row, column)`` cells set in bold (e.g. each column's best value); the caption says
    what bold means."""

    def __post_init__(self) -> None:
        if not self.columns:
            raise ValueError("Table: needs at least one column")
        for i, row in enumerate(self.rows):
            if len(row) != len(self.columns):
                raise ValueError(f"Table row {i}: {len(row)} cells for {len(self.columns)} columns")
        bad = [i for i in self.highlight if not 0 <= i < len(self.rows)]
        if bad:
            raise ValueError(
                f"Table highlight {bad}: no such rows (the table has {len(self.rows)})"
            )
        outside = [
            (r, c)
            for r, c in self.bold
            if not (0 <= r < len(self.rows) and 0 <= c < len(self.columns))
        ]
        if outside:
            raise ValueError(
                f"Table bold {outside}: no such cells (the table has {len(self.rows)} rows of "
                f"{len(self.columns)})"
            )


@dataclass(frozen=True)
class Figure:
    """A rendered PNG image with its caption, and where it was drawn, the drawing as PDF."""

    name: str
    """File stem, ``[a-z0-9_-]+``, unique within a document."""
    png: bytes
    """The encoded PNG file."""
    caption: str
    """Shown under the figure and used as its alt text."""
    pdf: Callable[[], bytes] | None = field(default=None, compare=False, repr=False)
    """Saves the same drawing as a vector PDF. Called only by a renderer that wants one (LaTeX),
    so a report without it never pays for a second rendering; None for a figure that exists only
    as pixels."""

    def __post_init__(self) -> None:
        if not _FIGURE_NAME.fullmatch(self.name):
            raise ValueError(f"Figure name {self.name!r}: use only a-z, 0-9, '_' and '-'")
        # The Markdown renderer writes these bytes to ``<name>.png``; catch a wrong format here.
        if not self.png.startswith(_PNG_SIGNATURE):
            raise ValueError(f"Figure {self.name!r}: png is not a PNG file")


Block = Paragraph | Table | Figure


@dataclass(frozen=True)
class DataFile:
    """One of the report's tables as data for pandas or R (``reports.tidy`` makes them): a file
    written beside the report, unformatted, where the ``csv`` format is asked for."""

    name: str
    """File name, ``[a-z0-9_-]+.csv``, unique within a document."""
    content: bytes
    """The file's bytes."""

    def __post_init__(self) -> None:
        if not _DATA_FILE_NAME.fullmatch(self.name):
            raise ValueError(f"DataFile name {self.name!r}: use only a-z, 0-9, '_', '-' and .csv")


@dataclass(frozen=True)
class Section:
    """A titled part of the report; ``level`` 2 is a top-level section (the title is level 1)."""

    title: str
    blocks: tuple[Block, ...]
    level: int = 2
    """Heading level, 2 to 6."""

    def __post_init__(self) -> None:
        if not 2 <= self.level <= 6:
            raise ValueError(f"Section {self.title!r}: level {self.level} is not within 2..6")


@dataclass(frozen=True)
class Document:
    """A whole report."""

    title: str
    sections: tuple[Section, ...]
    subtitle: str = ""
    data_files: tuple[DataFile, ...] = ()
    """The report's tables as data; none for a document not built from a sweep."""

    def __post_init__(self) -> None:
        names = [f.name for f in self.figures()]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"Document: figure names used twice: {', '.join(dupes)}")
        files = [f.name for f in self.data_files]
        if len(set(files)) < len(files):
            raise ValueError(f"Document: data files named twice: {', '.join(files)}")

    def figures(self) -> tuple[Figure, ...]:
        """Every figure, in reading order."""
        return tuple(b for s in self.sections for b in s.blocks if isinstance(b, Figure))


def inline_spans(text: str) -> tuple[tuple[str, bool], ...]:
    """Split prose into ``(text, is_code)`` pieces at backtick pairs.

    An unpaired trailing backtick stays literal text, so a stray one never swallows the rest.
    """
    parts = text.split("`")
    if len(parts) % 2 == 0:  # odd number of backticks: the last one has no partner
        parts = [*parts[:-2], parts[-2] + "`" + parts[-1]]
    return tuple((p, i % 2 == 1) for i, p in enumerate(parts) if p)
