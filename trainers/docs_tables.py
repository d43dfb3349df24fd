"""Rewrites the tables of ``docs/variants.md`` that are generated from the catalogue: the residual
wirings, the attention variants, the validity matrix and the parametrization x residual table. ``python -m trainers.docs_tables`` after
adding or changing a catalogue entry; ``tests/trainers/test_catalogue.py`` fails until it is run.

Each table is found by its header row and replaced with what the code renders; the prose around
them is the docs' own. Torch-free.
"""

from __future__ import annotations

import sys
from pathlib import Path

from trainers.catalogue import attentions_markdown, parametrizations_markdown, wirings_markdown
from trainers.config import validity_matrix_markdown

VARIANTS = Path(__file__).resolve().parents[1] / "docs" / "variants.md"


def tables() -> tuple[str, ...]:
    """The generated tables, each a block of Markdown table rows."""
    return (
        wirings_markdown(),
        attentions_markdown(),
        validity_matrix_markdown(),
        parametrizations_markdown(),
    )


def replaced(text: str, table: str) -> str:
    """``text`` with the table whose header row is ``table``'s replaced by ``table``."""
    lines = text.split("\n")
    header = table.split("\n", 1)[0]
    start = lines.index(header)  # a ValueError names a docs page without the table
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    return "\n".join([*lines[:start], table, *lines[end:]])


def main(path: Path = VARIANTS) -> int:
    text = path.read_text()
    new = text
    for table in tables():
        new = replaced(new, table)
    if new != text:
        path.write_text(new)
        print(f"rewrote the generated tables of {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
