"""Secrets out of everything the harness writes or prints: a URI's password becomes ``***``,
whether in its user information (``postgresql://user:secret@host/db``, ``http://user:secret@host``)
or in its query (``postgresql://user@host/db?password=secret``, as libpq and SQLAlchemy accept),
and so does a libpq keyword string's (``host=h password=secret``). Applied where a URI or a
command line reaches a tag, an artifact, the report, the terminal or an error message."""

from __future__ import annotations

import re

# scheme://user:password@host: the user may be empty; the password runs to the last @ of the
# URI (which holds no space), so a / or an @ inside it is covered.
_USERINFO = re.compile(
    r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^:/@\s]*):(?P<secret>\S*?)@(?=[^@\s]*(?:\s|$))"
)
# password=... as a URI query parameter (?password= or &password=) or a libpq keyword (a word
# of its own): the value runs to the next & or space.
_KEYWORD = re.compile(r"(?P<head>(?:[?&]|(?<![\w.-]))(?:password|passwd|pwd)=)[^&\s]*", re.I)


def redact(text: str) -> str:
    """``text`` with every URI and keyword password replaced by ``***``."""
    text = _USERINFO.sub(lambda m: f"{m['head']}:***@", text)
    return _KEYWORD.sub(lambda m: f"{m['head']}***", text)
