"""Whether a tracking store answers, asked before MLflow is: MLflow retries an unreachable
database for about a minute and a half, printing a warning each time, where a user wants one
line at once. A PostgreSQL URI is tried with one connection (5 s time-out); other stores are left
to MLflow."""

from __future__ import annotations

from reports.redact import redact

POSTGRES_SCHEMES = ("postgresql", "postgres")
CONNECT_TIMEOUT_S = 5


def libpq_url(uri: str) -> str | None:
    """The URI in libpq's form (``postgresql+psycopg://`` -> ``postgresql://``), or None when
    it is not PostgreSQL."""
    scheme, sep, rest = uri.partition("://")
    if not sep or scheme.split("+")[0] not in POSTGRES_SCHEMES:
        return None
    return f"postgresql://{rest}"


def check_store(uri: str, flag: str = "--tracking-uri") -> None:
    """ValueError, one line with the password redacted, when a PostgreSQL store cannot be
    reached or logged into."""
    url = libpq_url(uri)
    if url is None:
        return
    import psycopg

    try:
        psycopg.connect(url, connect_timeout=CONNECT_TIMEOUT_S).close()
    except psycopg.Error as err:
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
        message = f"{flag} {uri}: cannot reach the database ({reason})"
        raise ValueError(redact(message)) from None
