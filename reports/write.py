"""Write a rendered report to a folder atomically: readers see the old report or the new one.

Everything is built in a temporary folder beside ``out`` (same filesystem, so renames are atomic)
and only then renamed into place; a previous report is moved aside first and deleted last. A
render that fails half-way leaves ``out`` as it was and removes its temporary folder.

Formats: ``html`` (one self-contained page), ``md`` (Markdown, PNG figures), ``tex`` (LaTeX,
PDF figures) and ``csv`` (the tidy ``trials.csv`` and ``arms.csv`` that ``reports.build`` put in
the document). Nothing here computes a number: it renders the document and writes the files.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from reports.document import Document
from reports.render_html import render_html
from reports.render_md import render_markdown
from reports.render_tex import render_tex

FORMATS = ("html", "md", "tex", "csv")
HTML_FILE = "report.html"
MD_FILE = "report.md"
TEX_FILE = "report.tex"
CSV_FILES = ("trials.csv", "arms.csv")  # reports.tidy's; restated so that --help stays light
FIGURE_DIR = "figures"
FIGURE_SUFFIXES = (".png", ".pdf")


def write_report(doc: Document, out: Path, formats: Sequence[str]) -> list[Path]:
    """Write ``report.html``, ``report.md`` (+ ``figures/*.png``), ``report.tex`` (+
    ``figures/*.pdf``) and/or ``trials.csv`` + ``arms.csv`` (the document's data files) as the
    folder ``out``: only what ``build_report`` put in the document (its tables included).

    Returns the written files (under ``out``). Raises ValueError, one line, when ``out`` cannot be
    created or written, or when it is an existing folder holding something other than a report:
    replacing it would delete files this function did not write.
    """
    wanted = _check_formats(formats)
    if "csv" in wanted and not doc.data_files:
        raise ValueError("format csv: this document holds no tables (build_report makes them)")
    out = Path(out).resolve()
    _check_replaceable(out)
    _make_parent(out)
    staging = _staging_dir(out)
    try:
        try:
            relative = _write(doc, staging, wanted)
        except OSError as err:
            raise _unwritable(out, _reason(err)) from None
        _swap_in(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # a no-op once it has been renamed to out
    return [out / rel for rel in relative]


def _check_formats(formats: Sequence[str]) -> tuple[str, ...]:
    unknown = [f for f in formats if f not in FORMATS]
    if unknown or not formats:
        raise ValueError(f"formats {list(formats)}: choose one or more of {', '.join(FORMATS)}")
    return tuple(f for f in FORMATS if f in formats)


def _unwritable(out: Path, why: object) -> ValueError:
    reason = " ".join(str(why).split())  # one line, whatever the OS message holds
    return ValueError(f"--out {out}: not a writable folder ({reason})")


def _reason(err: OSError) -> str:
    """``strerror: path`` where the OS says which path; the path is the useful half."""
    what = err.strerror or str(err)
    return f"{what}: {err.filename}" if err.filename else what


def _is_report_file(rel: Path) -> bool:
    if len(rel.parts) == 1 and rel.parts[0] in (HTML_FILE, MD_FILE, TEX_FILE, FIGURE_DIR):
        return True
    if len(rel.parts) == 1 and rel.parts[0] in CSV_FILES:
        return True
    return len(rel.parts) == 2 and rel.parts[0] == FIGURE_DIR and rel.suffix in FIGURE_SUFFIXES


def _check_replaceable(out: Path) -> None:
    """``out`` is absent, or a folder holding only what an earlier ``write_report`` wrote."""
    if not out.exists() and not out.is_symlink():
        return
    if not out.is_dir():
        raise _unwritable(out, "it exists and is not a folder")
    try:
        foreign = sorted(
            str(p.relative_to(out))
            for p in out.rglob("*")
            if not _is_report_file(p.relative_to(out))
        )
    except OSError as err:
        raise _unwritable(out, _reason(err)) from None
    if foreign:
        shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
        raise _unwritable(out, f"it holds files that are not part of a report: {shown}")


def _make_parent(out: Path) -> None:
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise _unwritable(out, _reason(err)) from None


def _staging_dir(out: Path) -> Path:
    """A fresh folder beside ``out``: same filesystem, so moving it to ``out`` is one rename."""
    try:
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
        staging.chmod(0o755)  # mkdtemp makes it private; the report is meant to be read
    except OSError as err:
        raise _unwritable(out, _reason(err)) from None
    return staging


def _write(doc: Document, staging: Path, formats: tuple[str, ...]) -> list[Path]:
    """Render each format and write its files into ``staging``; the relative paths written."""
    written: list[str] = []
    for fmt in formats:
        files = _render(doc, fmt)
        for rel, content in files.items():
            path = staging / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
        written.extend(files)
    return sorted(Path(rel) for rel in written)


def _render(doc: Document, fmt: str) -> dict[str, bytes]:
    """One format's files, keyed by path relative to the report folder."""
    if fmt == "csv":
        return {f.name: f.content for f in doc.data_files}
    if fmt == "html":
        return {HTML_FILE: render_html(doc).encode("utf-8")}
    if fmt == "tex":
        text, figures = render_tex(doc, FIGURE_DIR)
        return {TEX_FILE: text.encode("utf-8"), **figures}
    text, figures = render_markdown(doc, FIGURE_DIR)
    return {MD_FILE: text.encode("utf-8"), **figures}


def _swap_in(staging: Path, out: Path) -> None:
    """Rename ``staging`` to ``out``, moving an earlier report aside first and deleting it last.

    Between the two renames ``out`` is briefly absent, never half-written. (An atomic exchange
    needs Linux ``renameat2``, which the standard library does not offer.)
    """
    if not out.exists():
        _rename(staging, out)
        return
    aside = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
    try:
        os.replace(out, aside)  # replaces the empty placeholder folder
    except OSError as err:
        aside.rmdir()
        raise _unwritable(out, _reason(err)) from None
    try:
        _rename(staging, out)
    except ValueError:
        os.replace(aside, out)  # put the previous report back
        raise
    shutil.rmtree(aside, ignore_errors=True)


def _rename(src: Path, dst: Path) -> None:
    try:
        os.replace(src, dst)
    except OSError as err:
        raise _unwritable(dst, _reason(err)) from None
