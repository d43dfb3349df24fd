"""A sweep recorded before the record carried its schema version still loads and reports as it
did: the report, ``trials.csv`` and ``arms.csv`` of the kept store equal the files the code of
commit c297def wrote from it (``tests/data/old_record``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from reports.load import load_sweep
from tests.reports.old_record import EXPECTED, FILES, report_files, unpack


@pytest.fixture(scope="module")
def reported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return report_files(tmp_path_factory.mktemp("old_record"))


@pytest.mark.parametrize("name", FILES)
def test_old_record_reports_as_it_did(reported: dict[str, str], name: str) -> None:
    """Each file of the old sweep's report is, byte for byte, what c297def wrote (the store's
    place aside)."""
    assert reported[name] == (EXPECTED / name).read_text()


def test_old_record_reads_as_version_one(tmp_path: Path) -> None:
    """Its runs carry no schema version: the loader reads them as version 1, every trial's
    status and seed from its tags."""
    data = load_sweep(unpack(tmp_path), "smoke")
    assert sorted(data.trials["arm"]) == ["block_attnres", "standard"]
    assert list(data.trials["status"]) == ["finished", "finished"]
    assert list(data.trials["seed"]) == [0, 0]
