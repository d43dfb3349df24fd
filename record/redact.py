"""Secrets out of everything the harness writes or prints: a URI's password becomes ``***``,
whether in its user information (``postgresql://user:secret@host/db``, ``http://user:secret@host``)
or in its query (``postgresql://user@host/db?password=secret``, as libpq and SQLAlchemy accept),
and so does a libpq keyword string's (``host=h password=secret``, quoted or not) and an ODBC
connection string's (``PWD=secret``, percent-encoded inside a URI's ``odbc_connect`` too).
Applied where a URI or a command line reaches a tag, an artifact, the report, the terminal or an error message."""

from __future__ import annotations

import re

# scheme://user:password@host: the user may be empty; the password runs to the last @ of the
# URI (which holds no space), so a / or an @ inside it is covered.
_USERINFO = re.compile(
    r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^:/@\s]*):(?P<secret>\S*?)@(?=[^@\s]*(?:\s|$))"
)
# password=... as a URI query parameter (?password= or &password=), a libpq keyword (a word of
# its own) or an ODBC attribute (;PWD=). The value is quoted ('...', libpq, which may hold
# spaces), braced ({...}, ODBC) or runs to the next & or space (a ; is kept inside: libpq allows
# it raw, and for ODBC that redacts too much, never too little).
_KEYWORD = re.compile(
    r"(?P<head>(?:[?&;]|(?<![\w.%-]))(?:password|passwd|pwd)=)"
    r"(?:(?P<open>'|\{)(?:(?<=')(?:[^'\\]|\\.)*'|(?<=\{)[^}]*\})|[^&\s]*)",
    re.I,
)
# The same ODBC attribute percent-encoded inside a URI (odbc_connect=...%3BPWD%3D...%3B...): its
# = and ; read %3D and %3B, its braces %7B and %7D.
_ENCODED = re.compile(
    r"(?P<head>(?:%3B|=)(?:password|passwd|pwd)%3D)"
    r"(?:(?P<open>%7B)(?:(?!%7D)\S)*%7D|(?:(?!%3B)[^&\s])*)",
    re.I,
)


def redact(text: str) -> str:
    """``text`` with every URI and keyword password replaced by ``***``."""
    text = _USERINFO.sub(lambda m: f"{m['head']}:***@", text)
    text = _KEYWORD.sub(_keyword, text)
    return _ENCODED.sub(_keyword, text)


_CLOSE = {"'": "'", "{": "}", "%7b": "%7D"}


def _keyword(m: re.Match[str]) -> str:
    """The keyword's value as ***, inside the quotes or braces it had, so that redacting again
    changes nothing."""
    opened = m["open"]
    if opened is None:
        return f"{m['head']}***"
    return f"{m['head']}{opened}***{_CLOSE[opened.lower()]}"
