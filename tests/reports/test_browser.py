"""A written report opens in a real headless Chromium: title, decoded figures, tables.

Skipped with the reason when no Chromium can be had. The screenshot is kept as an artifact under
``$NAS_TEST_ARTIFACTS`` when set, else under the test's tmp_path; its path is printed.
"""

from __future__ import annotations

import io
import time
from pathlib import Path

from reports.document import Document, Figure, Paragraph, Section, Table
from reports.write import write_report
from tests.reports.browser import artifact_dir, check_page


def plot_png(slope: float) -> bytes:
    """A small line plot, drawn on the Agg canvas directly (no pyplot, no global backend)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure as MplFigure

    fig = MplFigure(figsize=(4, 3), dpi=80)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.plot(range(10), [slope * x for x in range(10)])
    ax.set_xlabel("depth")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    return buf.getvalue()


def browser_doc() -> Document:
    table = Table(("variant", "loss"), (("baseline", "3.10"), ("attnres", "2.95")), highlight=(0,))
    return Document(
        title="Browser check",
        sections=(
            Section("Summary", (Paragraph("AttnRes keeps `loss` lower.", kind="note"), table)),
            Section(
                "Figures",
                (
                    Figure("loss", plot_png(-0.3), "Loss against depth"),
                    Figure("grad", plot_png(0.5), "Gradient norm against depth"),
                ),
            ),
        ),
    )


def test_report_renders_in_chromium(chromium: str, tmp_path: Path) -> None:
    """The written HTML report shows its title, both figures decoded, and its table."""
    (page,) = write_report(browser_doc(), tmp_path / "report", ["html"])
    screenshot = artifact_dir(tmp_path) / "report.png"
    start = time.monotonic()
    seen = check_page(page, screenshot, chromium)
    print(f"screenshot: {screenshot} (check_page took {time.monotonic() - start:.1f}s)")
    assert seen.title == "Browser check"
    assert seen.images == seen.decoded == 2
    assert seen.tables >= 1
    assert screenshot.read_bytes().startswith(b"\x89PNG")


def test_broken_image_is_reported_undecoded(chromium: str, tmp_path: Path) -> None:
    """An invalid PNG data URI counts as an image that did not decode: the check can fail."""
    page = tmp_path / "broken.html"
    page.write_text(
        '<!DOCTYPE html><html><head><meta charset="utf-8"><title>Broken</title></head><body>'
        '<img alt="broken" src="data:image/png;base64,bm90IGEgcG5n"></body></html>',
        encoding="utf-8",
    )
    screenshot = artifact_dir(tmp_path) / "broken.png"
    seen = check_page(page, screenshot, chromium)
    print(f"screenshot: {screenshot}")
    assert seen.title == "Broken"
    assert (seen.images, seen.decoded, seen.tables) == (1, 0, 0)
