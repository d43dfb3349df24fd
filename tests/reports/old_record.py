"""A sweep recorded by an earlier version of the harness, kept as test data, and the report
the reader makes of it: the store is unpacked into a test's folder and read as ``nas report``
reads a store (load, plan, merge, build, write)."""

from __future__ import annotations

import sqlite3
import tarfile
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data" / "old_record"
# ``nas sweep smoke --seeds 0`` run with the code of commit c297def (before the record carried
# its schema version): an SQLite store and its artifact folder. The artifact paths in the
# database were rewritten to start with ``PLACEHOLDER``, replaced on unpacking by where the store
# now lies; the dilution PNGs, which no report reads, were left out.
STORE = DATA / "smoke_c297def.tar.gz"
# report.md, trials.csv, arms.csv as c297def wrote them, with what later reports added and the
# old record cannot fill: report.md's seeds section, arms.csv's power columns (empty: one seed)
EXPECTED = DATA / "smoke_c297def"
PLACEHOLDER = "/STORE"
SHOWN_STORE = "STORE"  # where the store lies, in the expected files
FILES = ("report.md", "trials.csv", "arms.csv")


def unpack(folder: Path) -> str:
    """The recorded store unpacked into ``folder``; its tracking URI."""
    with tarfile.open(STORE) as tar:
        tar.extractall(folder, filter="data")
    with sqlite3.connect(folder / "mlflow.db") as db:
        for table, column in (("runs", "artifact_uri"), ("experiments", "artifact_location")):
            db.execute(
                f"UPDATE {table} SET {column} = replace({column}, ?, ?)",
                (PLACEHOLDER, str(folder)),
            )
    return f"sqlite:///{folder}/mlflow.db"


def report_files(folder: Path, sweep: str = "smoke") -> dict[str, str]:
    """The Markdown report and the two tables of ``sweep`` in the store unpacked into
    ``folder``, with the store's place written ``SHOWN_STORE``."""
    from reports.build import build_report
    from reports.load import load_sweep
    from reports.merge import merge_sweeps
    from reports.plans import select_plan
    from reports.write import write_report

    uri = unpack(folder / "store")
    data = merge_sweeps([select_plan(load_sweep(uri, sweep), "all")])
    out = folder / "report"
    write_report(build_report(data), out, ["md", "csv"])
    return {
        name: (out / name).read_text().replace(str(folder / "store"), SHOWN_STORE) for name in FILES
    }
