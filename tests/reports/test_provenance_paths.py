"""Provenance shows paths as a reader of the report can use them: relative to the working
folder where they lie inside it, and the program as ``nas`` however it was started."""

from __future__ import annotations

from pathlib import Path

from reports.sections.provenance import relative_to_here, shown_command


def test_a_store_inside_the_working_folder_is_shown_relative(tmp_path: Path) -> None:
    """``sqlite:////<here>/gallery/mlflow.db`` reads ``sqlite:///gallery/mlflow.db``, which is
    the same store opened from the working folder; a store elsewhere keeps its absolute path."""
    here = tmp_path / "checkout"
    here.mkdir()
    assert relative_to_here(f"sqlite:///{here}/gallery/mlflow.db", here) == (
        "sqlite:///gallery/mlflow.db"
    )
    assert relative_to_here(f"sqlite:///{tmp_path}/other.db", here) == (
        f"sqlite:///{tmp_path}/other.db"
    )
    assert relative_to_here("http://127.0.0.1:5000", here) == "http://127.0.0.1:5000"


def test_the_program_reads_nas_however_it_was_started(tmp_path: Path) -> None:
    """The installed script and ``python -m nas.cli`` (argv[0] is then the module's file) are
    both ``nas``; arguments that are paths inside the working folder are relative."""
    here = tmp_path / "w"
    here.mkdir()
    for program in (f"{here}/.venv/bin/nas", f"{here}/nas/cli.py", "/opt/x/nas/cli.py"):
        line = f"{program} sweep quick --storage-path={here}/gallery/ray"
        assert shown_command(line, here) == "nas sweep quick --storage-path=gallery/ray"
    assert shown_command("nas sweep smoke", here) == "nas sweep smoke"
    assert shown_command("/usr/bin/nasty sweep", here) == "/usr/bin/nasty sweep"
