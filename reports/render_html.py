"""Render a ``Document`` as one self-contained HTML5 page.

Self-contained means the file opens the same from a mail attachment, an artifact store or an
air-gapped machine: the CSS is inline, figures are ``data:`` URIs, and nothing (no font, script,
stylesheet or image) is fetched from anywhere. Every piece of text goes through ``html.escape``.
"""

from __future__ import annotations

import base64
import re
from html import escape

from reports.document import Document, Figure, Paragraph, Section, Table, inline_spans

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; line-height: 1.5;
       max-width: 60rem; margin: 2rem auto; padding: 0 1rem; color: #1b1b1b; }
h1 { margin-bottom: 0.2rem; }
.subtitle { color: #555; margin-top: 0; }
nav ol { padding-left: 1.5rem; }
nav .toc-3 { margin-left: 1.5rem; } nav .toc-4, nav .toc-5, nav .toc-6 { margin-left: 3rem; }
table { border-collapse: collapse; margin: 1rem 0; font-variant-numeric: tabular-nums; }
caption { caption-side: top; text-align: left; font-weight: 600; padding-bottom: 0.3rem; }
th, td { border: 1px solid #bbb; padding: 0.3rem 0.6rem; text-align: left; }
thead th { background: #e8e8e8; }
tbody tr:nth-child(even) { background: #f6f6f6; }
tbody tr.highlight { font-weight: bold; background: #fff6d6; }
figure { margin: 1.5rem 0; }
figure img { max-width: 100%; height: auto; }
figcaption { color: #444; font-size: 0.95em; }
code, pre { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 0.92em; }
code { background: #f0f0f0; padding: 0 0.2em; border-radius: 3px; }
pre { background: #f4f4f4; padding: 0.8rem; overflow-x: auto; border-radius: 4px; }
pre code { background: none; padding: 0; }
.callout { border-left: 4px solid; padding: 0.5rem 0.9rem; margin: 1rem 0; border-radius: 3px; }
.callout.note { border-color: #3b82c4; background: #eef5fc; }
.callout.warning { border-color: #d08a00; background: #fff5e0; }
""".strip()


def render_html(doc: Document) -> str:
    """The whole page as one string."""
    ids = section_ids(doc)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(doc.title)}</title>",
        f"<style>\n{_CSS}\n</style>",
        "</head>",
        "<body>",
        f"<h1>{escape(doc.title)}</h1>",
    ]
    if doc.subtitle:
        parts.append(f'<p class="subtitle">{escape(doc.subtitle)}</p>')
    parts.append(_toc(doc.sections, ids))
    parts.extend(_section(s, sid) for s, sid in zip(doc.sections, ids, strict=True))
    parts += ["</body>", "</html>", ""]
    return "\n".join(parts)


def section_ids(doc: Document) -> tuple[str, ...]:
    """One unique, URL-safe ``id`` per section, derived from its title."""
    seen: set[str] = set()
    ids = []
    for section in doc.sections:
        base = re.sub(r"[^a-z0-9]+", "-", section.title.lower()).strip("-") or "section"
        sid, n = base, 2
        while sid in seen:
            sid, n = f"{base}-{n}", n + 1
        seen.add(sid)
        ids.append(sid)
    return tuple(ids)


def _toc(sections: tuple[Section, ...], ids: tuple[str, ...]) -> str:
    if not sections:
        return ""
    items = [
        f'<li class="toc-{s.level}"><a href="#{sid}">{escape(s.title)}</a></li>'
        for s, sid in zip(sections, ids, strict=True)
    ]
    return (
        '<nav aria-label="Contents">\n<h2>Contents</h2>\n<ol>\n'
        + "\n".join(items)
        + "\n</ol>\n</nav>"
    )


def _section(section: Section, sid: str) -> str:
    h = f"h{section.level}"
    body = [f'<section id="{sid}">', f"<{h}>{escape(section.title)}</{h}>"]
    for block in section.blocks:
        if isinstance(block, Paragraph):
            body.append(_paragraph(block))
        elif isinstance(block, Table):
            body.append(_table(block))
        else:
            body.append(_figure(block))
    body.append("</section>")
    return "\n".join(body)


def _inline(text: str) -> str:
    """Escaped prose with backtick spans as ``<code>``."""
    return "".join(
        f"<code>{escape(piece)}</code>" if is_code else escape(piece)
        for piece, is_code in inline_spans(text)
    )


def _paragraph(p: Paragraph) -> str:
    if p.kind == "code":
        return f"<pre><code>{escape(p.text)}</code></pre>"
    if p.kind == "text":
        return f"<p>{_inline(p.text)}</p>"
    label = "Note" if p.kind == "note" else "Warning"
    role = ' role="note"' if p.kind == "note" else ' role="alert"'
    return f'<div class="callout {p.kind}"{role}><strong>{label}:</strong> {_inline(p.text)}</div>'


def _table(t: Table) -> str:
    lines = ["<table>"]
    if t.caption:
        lines.append(f"<caption>{_inline(t.caption)}</caption>")
    head = "".join(f'<th scope="col">{_inline(c)}</th>' for c in t.columns)
    lines += ["<thead>", f"<tr>{head}</tr>", "</thead>", "<tbody>"]
    marked, bold = set(t.highlight), set(t.bold)
    for i, row in enumerate(t.rows):
        cls = ' class="highlight"' if i in marked else ""
        cells = "".join(
            f"<td><strong>{_inline(c)}</strong></td>"
            if (i, j) in bold
            else f"<td>{_inline(c)}</td>"
            for j, c in enumerate(row)
        )
        lines.append(f"<tr{cls}>{cells}</tr>")
    lines += ["</tbody>", "</table>"]
    return "\n".join(lines)


def _figure(f: Figure) -> str:
    data = base64.b64encode(f.png).decode("ascii")
    caption = escape(f.caption)
    return (
        f'<figure id="figure-{f.name}">\n'
        f'<img src="data:image/png;base64,{data}" alt="{caption}">\n'
        f"<figcaption>{caption}</figcaption>\n"
        "</figure>"
    )
