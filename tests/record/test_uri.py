"""Which store a command writes: a relative SQLite path means the file where the command was
run, also for trial workers, which run in folders of their own."""

from __future__ import annotations

from pathlib import Path

import pytest

from record.uri import missing_sqlite, resolve_tracking_uri, sqlite_file, sqlite_uri


def test_a_relative_sqlite_path_is_made_absolute_from_the_working_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    here = tmp_path.resolve()
    assert resolve_tracking_uri("sqlite:///store/m.db") == f"sqlite:///{here / 'store/m.db'}"
    assert resolve_tracking_uri("sqlite:///m.db?timeout=5") == f"sqlite:///{here}/m.db?timeout=5"
    assert resolve_tracking_uri(None) == f"sqlite:///{here / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///env.db")
    assert resolve_tracking_uri(None) == f"sqlite:///{here / 'env.db'}"
    # already absolute, in memory, or not a file: unchanged
    for uri in ("sqlite:////abs/m.db", "sqlite:///:memory:", "http://127.0.0.1:5000"):
        assert resolve_tracking_uri(uri) == uri


@pytest.mark.parametrize(
    ("uri", "path", "query"),
    [
        ("sqlite:///mlflow.db", "mlflow.db", ""),
        ("sqlite:///runs/mlflow.db?timeout=5", "runs/mlflow.db", "timeout=5"),
        ("sqlite:////abs/mlflow.db?timeout=5&uri=true", "/abs/mlflow.db", "timeout=5&uri=true"),
        ("sqlite+pysqlite:////abs/m.db", "/abs/m.db", ""),
        ("sqlite:///:memory:", ":memory:", ""),
    ],
)
def test_one_sqlite_parser_keeps_the_query_out_of_the_file(uri: str, path: str, query: str) -> None:
    parsed = sqlite_uri(uri)
    assert parsed is not None and (parsed.path, parsed.query) == (path, query)


def test_a_store_reached_through_a_query_is_the_same_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``?timeout=5`` names no other file: the store exists, or is missing, as without it."""
    monkeypatch.chdir(tmp_path)
    for uri in ("sqlite:///m.db?timeout=5", f"sqlite:///{tmp_path}/m.db?timeout=5"):
        assert sqlite_file(uri) == tmp_path / "m.db"
        assert missing_sqlite(uri)
    (tmp_path / "m.db").touch()
    assert not missing_sqlite("sqlite:///m.db?timeout=5")
    assert not missing_sqlite(f"sqlite:///{tmp_path}/m.db?timeout=5")
    for other in ("sqlite:///:memory:", "postgresql://u@127.0.0.1/db", "http://127.0.0.1:5000"):
        assert sqlite_file(other) is None and not missing_sqlite(other)
