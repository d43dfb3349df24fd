"""``record.redact``: no password survives in any form a database or server URI takes, and
nothing else is changed."""

from __future__ import annotations

import pytest

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
