"""Whether a tracking store answers, asked before MLflow is: MLflow retries an unreachable
database for about a minute and a half, printing a warning each time, and answers a URI it has
no store for with a paragraph about its model registry, where a user wants one line at once. A
URI's scheme must be one MLflow opens; a PostgreSQL URI is tried with one connection (5 s
time-out); other stores are left to MLflow."""

from __future__ import annotations

from urllib.parse import urlparse

from record.errors import first_line
from record.redact import redact

POSTGRES_SCHEMES = ("postgresql", "postgres")
CONNECT_TIMEOUT_S = 5

# The schemes MLflow 3 opens a tracking store for (its registry in
# mlflow/tracking/_tracking_service/utils.py): SQLAlchemy databases, whose scheme may name a
# driver after a "+" (postgresql+psycopg), a tracking server, Databricks, and a local folder
# (a path, no scheme, or file:).
DATABASE_SCHEMES = ("sqlite", "postgresql", "mysql", "mssql")
OTHER_SCHEMES = ("http", "https", "databricks", "file", "")
STORE_FORMS = (
    "sqlite:///<file>, postgresql://<user>@<host>/<database> (or mysql://, mssql://; "
    "a driver may follow a +), http(s)://<tracking server>, databricks, or a folder "
    "(a path or file:///<folder>)"
)


def libpq_url(uri: str) -> str | None:
    """The URI in libpq's form (``postgresql+psycopg://`` -> ``postgresql://``), or None when
    it is not PostgreSQL."""
    scheme, sep, rest = uri.partition("://")
    if not sep or scheme.split("+")[0] not in POSTGRES_SCHEMES:
        return None
    return f"postgresql://{rest}"


def _check_scheme(uri: str, flag: str) -> None:
    """ValueError, one line, when MLflow has no store for the URI's scheme."""
    scheme = urlparse(uri).scheme.lower()
    if len(scheme) == 1 or scheme.split("+")[0] in DATABASE_SCHEMES or scheme in OTHER_SCHEMES:
        return  # a one-letter scheme is a Windows drive: a path
    hint = "write postgresql://" if scheme == "postgres" else f"a store is {STORE_FORMS}"
    raise ValueError(redact(f"{flag} {uri}: unknown scheme {scheme!r}; {hint}"))


def check_store(uri: str, flag: str = "--tracking-uri") -> None:
    """ValueError, one line with the password redacted, when MLflow has no store for the
    URI's scheme, or a PostgreSQL store cannot be reached or logged into."""
    _check_scheme(uri, flag)
    url = libpq_url(uri)
    if url is None:
        return
    import psycopg

    try:
        psycopg.connect(url, connect_timeout=CONNECT_TIMEOUT_S).close()
    except psycopg.Error as err:
        message = f"{flag} {uri}: cannot connect to the database ({first_line(err)})"
        raise ValueError(redact(message)) from None


def check_study_storage(url: str, flag: str = "--study-storage") -> None:
    """ValueError, one line with the password redacted, unless ``url`` is an Optuna study
    database a search can keep (SQLite or PostgreSQL) and, for PostgreSQL, takes the login."""
    scheme = url.partition("://")[0].split("+")[0]  # as SQLAlchemy reads it: lower case
    if scheme not in ("sqlite", "postgresql", "postgres"):
        raise ValueError(redact(f"{flag} {url}: give a sqlite:///<file> or postgresql:// URL"))
    check_store(url, flag=flag)
