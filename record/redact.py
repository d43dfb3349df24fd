"""Secrets out of everything the harness writes or prints: a URI's password (``postgresql://
user:secret@host/db``, ``http://user:secret@host``) becomes ``***``. Applied where a URI or a
command line reaches a tag, an artifact, the report, the terminal or an error message."""

from __future__ import annotations

import re

# scheme://user:password@  (the user may be empty; the password runs to the last @ before the
# host, so an @ inside it is covered)
_USERINFO = re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^:/@\s]*):(?P<secret>[^/\s]*)@")


def redact(text: str) -> str:
    """``text`` with every URI password replaced by ``***``."""
    return _USERINFO.sub(lambda m: f"{m['head']}:***@", text)
