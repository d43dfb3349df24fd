"""Which store a command writes: a relative SQLite path means the file where the command was
run, also for trial workers, which run in folders of their own."""

from __future__ import annotations

from pathlib import Path

import pytest

from nas.tracking import resolve_tracking_uri


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
