"""``record.redact``: no password survives in any form a database or server URI takes, and
nothing else is changed."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from record.redact import redact


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("postgresql://nas:s3cret@db:5432/runs", "postgresql://nas:***@db:5432/runs"),
        ("postgresql+psycopg2://nas:pa/ss@db/runs", "postgresql+psycopg2://nas:***@db/runs"),
        ("postgresql://nas:p@ss@db/runs", "postgresql://nas:***@db/runs"),
        ("http://:token@127.0.0.1:5000", "http://:***@127.0.0.1:5000"),
        ("postgresql://nas@db/runs?password=pw", "postgresql://nas@db/runs?password=***"),
        (
            "postgresql://db/runs?sslmode=require&password=p/w&user=nas",
            "postgresql://db/runs?sslmode=require&password=***&user=nas",
        ),
        ("host=db user=nas password=pw dbname=runs", "host=db user=nas password=*** dbname=runs"),
        ("host=db password='p w\\'s' dbname=runs", "host=db password='***' dbname=runs"),
        ("DRIVER={ODBC};SERVER=db;PWD={p;w};", "DRIVER={ODBC};SERVER=db;PWD={***};"),
        (
            "mssql+pyodbc://?odbc_connect=SERVER%3Ddb%3BPWD%3Dp%25w%3BUID%3Dnas",
            "mssql+pyodbc://?odbc_connect=SERVER%3Ddb%3BPWD%3D***%3BUID%3Dnas",
        ),
        (
            "--study-storage postgresql://a:x@h/d --tracking-uri http://b:y@s:5000",
            "--study-storage postgresql://a:***@h/d --tracking-uri http://b:***@s:5000",
        ),
    ],
)
def test_every_password_form_is_redacted(text: str, expected: str) -> None:
    assert redact(text) == expected
    assert redact(expected) == expected  # redacting twice changes nothing


@pytest.mark.parametrize(
    "text",
    [
        "sqlite:///mlflow.db",
        "postgresql://nas@db:5432/runs",
        "http://127.0.0.1:5000/#/experiments",
        "train.password_hint=x",  # a longer word that only contains one of the keys
        "no URI here: user@example.org",
    ],
)
def test_text_without_a_password_is_unchanged(text: str) -> None:
    assert redact(text) == text


# Property: whatever a password holds and whichever form carries it, no part of it survives.
# Every generated password starts and ends with MARK, which nothing else generated can spell (the
# other parts use lowercase letters without z, digits and a few separators), so a password cut
# short at either end still leaves a MARK to find.
MARK = "Zq9"
NAME = st.text(alphabet="abcdefghijklmnopqrstuvwxy0123456789-_.", min_size=1, max_size=10)
# What a driver reads from a password once it has undone percent-encoding: anything printable
# (spaces included).
RAW = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=12)
SCHEMES = st.sampled_from(
    ["postgresql", "postgresql+psycopg2", "mysql+pymysql", "mssql+pyodbc", "http", "https"]
)
AROUND = st.sampled_from(
    [("", ""), ("--tracking-uri ", ""), ("store ", " failed (timeout)"), ("'", "'"), ("(", ")")]
)


def _secret(body: str) -> str:
    return f"{MARK}{body}{MARK}"


@st.composite
def _host(draw: st.DrawFn) -> str:
    port = draw(st.one_of(st.none(), st.integers(1, 65535)))
    return draw(NAME) + ("" if port is None else f":{port}")


@st.composite
def _userinfo(draw: st.DrawFn) -> tuple[str, str]:
    """scheme://user:password@host/db, the password percent-encoded as a URI needs it or with
    the characters drivers accept raw there (/, @, :, ...), but never a space."""
    raw = _secret(draw(RAW))
    password = quote(raw, safe="") if draw(st.booleans()) else raw.replace(" ", "%20")
    host, db = draw(_host()), draw(NAME)
    return f"{draw(SCHEMES)}://{draw(NAME)}:{password}@{host}/{db}", host


@st.composite
def _query(draw: st.DrawFn) -> tuple[str, str]:
    """scheme://[user@]host/db?...&password=...&..., the value percent-encoded."""
    key = draw(st.sampled_from(["password", "PASSWORD", "passwd", "pwd"]))
    params = [f"{key}={quote(_secret(draw(RAW)), safe='')}"]
    params += [f"{draw(NAME)}={draw(NAME)}" for _ in range(draw(st.integers(0, 2)))]
    params = draw(st.permutations(params))
    user = draw(st.one_of(st.just(""), NAME.map(lambda u: u + "@")))
    host = draw(_host())
    return f"{draw(SCHEMES)}://{user}{host}/{draw(NAME)}?{'&'.join(params)}", host


@st.composite
def _libpq(draw: st.DrawFn) -> tuple[str, str]:
    """host=... password=... dbname=...: the value bare (no space, quote or %) or quoted, a
    quote or backslash inside escaped by a backslash."""
    body = draw(RAW)
    if draw(st.booleans()):
        value = "'" + _secret(body).replace("\\", "\\\\").replace("'", "\\'") + "'"
    else:
        value = _secret("".join(c for c in body if c not in " '\\%&"))
    host = draw(NAME)
    words = [f"host={host}", f"password={value}", f"dbname={draw(NAME)}"]
    return " ".join(draw(st.permutations(words))), host


@st.composite
def _odbc(draw: st.DrawFn) -> tuple[str, str]:
    """An ODBC connection string (PWD=...; the value braced where it holds a ;), raw or
    percent-encoded in a URI's odbc_connect."""
    body = "".join(c for c in draw(RAW) if c not in "{}")
    value = "{" + _secret(body) + "}" if ";" in body or draw(st.booleans()) else _secret(body)
    value = value if value.startswith("{") else value.replace(";", "").replace(" ", "")
    host = draw(NAME)
    odbc = f"DRIVER={{ODBC Driver 18}};SERVER={host};UID={draw(NAME)};PWD={value};"
    if draw(st.booleans()):
        return odbc, host
    return f"mssql+pyodbc://?odbc_connect={quote(odbc, safe='')}", host


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.one_of(_userinfo(), _query(), _libpq(), _odbc()), AROUND)
def test_no_part_of_a_generated_password_survives(form: tuple[str, str], around: tuple) -> None:
    text, host = form
    out = redact(around[0] + text + around[1])
    assert MARK not in out
    assert host.split(":")[0] in out  # the host still says where the store is
    assert redact(out) == out
