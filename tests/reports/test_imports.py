"""Imports flow one way: the report reads what MLflow recorded and loads neither ``nas`` nor
torch; of ``trainers`` it reads only the torch-free catalogue and config (what a wiring is, the
config's defaults), so that it restates none of them. The ``nas report`` parser reads the plan
choices without loading pandas."""

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


# The trainers modules that import no torch, and that reports may read.
TORCH_FREE_TRAINERS = {"trainers", "trainers.catalogue", "trainers.config"}


def _modules_after(code: str) -> set[str]:
    """Modules loaded after running ``code`` in a fresh interpreter."""
    probe = f"{code}\nimport sys\nprint(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def _loaded_after(code: str) -> set[str]:
    """Top-level packages loaded after running ``code`` in a fresh interpreter."""
    return {m.split(".")[0] for m in _modules_after(code)}


def test_reports_import_neither_nas_nor_torch() -> None:
    """Every report module loads without ``nas`` or torch, and of ``trainers`` only its
    torch-free catalogue and config."""
    loaded = _modules_after("\n".join(f"import {m}" for m in REPORT_MODULES))
    assert not {m.split(".")[0] for m in loaded} & {"nas", "torch"}
    assert {m for m in loaded if m.split(".")[0] == "trainers"} <= TORCH_FREE_TRAINERS


def test_plan_choices_load_without_pandas() -> None:
    """The CLI's ``--plan`` choices come from a module that stays light for ``--help``."""
    loaded = _loaded_after("from reports.plans import PLAN_CHOICES")
    assert not loaded & {"pandas", "numpy", "mlflow"}
