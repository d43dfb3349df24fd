"""Imports flow one way: the report reads what MLflow recorded and loads neither ``nas`` nor
``trainers``; the ``nas report`` parser reads the plan choices without loading pandas."""

from __future__ import annotations

import subprocess
import sys

REPORT_MODULES = (
    "reports.build",
    "reports.load",
    "reports.plans",
    "reports.sections",
    "reports.write",
    "reports.importance",
    "reports.flops",
)


def _loaded_after(code: str) -> set[str]:
    """Top-level packages loaded after running ``code`` in a fresh interpreter."""
    probe = f"{code}\nimport sys\nprint(' '.join(sorted({{m.split('.')[0] for m in sys.modules}})))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_reports_import_neither_nas_nor_trainers() -> None:
    """Every report module loads without ``nas`` or ``trainers``."""
    loaded = _loaded_after("\n".join(f"import {m}" for m in REPORT_MODULES))
    assert not loaded & {"nas", "trainers", "torch"}


def test_plan_choices_load_without_pandas() -> None:
    """The CLI's ``--plan`` choices come from a module that stays light for ``--help``."""
    loaded = _loaded_after("from reports.plans import PLAN_CHOICES")
    assert not loaded & {"pandas", "numpy", "mlflow"}
