"""An exception as one line: what the harness prints, tags and reports for an error that must
not reach the user as a traceback."""

from __future__ import annotations

# Long enough for a database's message with its statement cut off, short enough for a terminal
# line's neighbourhood and an MLflow tag (8000 characters).
LINE_LIMIT = 300


def first_line(err: BaseException, limit: int = LINE_LIMIT) -> str:
    """The first line of ``err``'s message, cut at ``limit`` characters; its type's name when
    the message is empty."""
    text = str(err).strip()
    return (text.splitlines() or [type(err).__name__])[0][:limit]
