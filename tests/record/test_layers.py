"""The ground floor stays the ground floor: ``record`` loads no other package of the project
and nothing heavy, and ``nas`` reaches ``reports`` only to build a report."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.imports import loaded_after

ROOT = Path(__file__).resolve().parents[2]
RECORD_MODULES = (
    "record.schema",
    "record.read",
    "record.client",
    "record.uri",
    "record.stores",
    "record.upgrade",
)
# What builds a report: the commands (``nas report``, ``nas diff``) and the screen a sweep ends
# with (the report's first table), the only importers of reports.
REPORT_BUILDERS = {"nas/commands/report.py", "nas/commands/diff.py", "nas/sweep/summary.py"}


def test_record_loads_no_other_package_of_the_project_nor_anything_heavy() -> None:
    loaded = loaded_after("\n".join(f"import {m}" for m in RECORD_MODULES))
    project = {"nas", "reports", "trainers", "search_spaces", "benchmarks", "stats"}
    assert not loaded & (project | {"torch", "pandas", "numpy", "mlflow", "lightning"})


def _imported(path: Path) -> set[str]:
    """Top-level packages a file imports, at module level or inside functions."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
    return found


def test_nas_imports_reports_only_to_build_a_report() -> None:
    importers = {
        str(p.relative_to(ROOT)) for p in (ROOT / "nas").rglob("*.py") if "reports" in _imported(p)
    }
    assert importers <= REPORT_BUILDERS, importers - REPORT_BUILDERS


def test_lower_floors_import_neither_nas_nor_reports() -> None:
    """``trainers`` and ``search_spaces`` sit below the driver and the report; ``record`` below
    everything."""
    for package, above in (
        ("trainers", {"nas", "reports"}),
        ("search_spaces", {"nas", "reports"}),
        ("record", {"nas", "reports", "trainers", "search_spaces"}),
    ):
        for path in (ROOT / package).rglob("*.py"):
            assert not _imported(path) & above, path
