"""Imports flow one way: the report reads what MLflow recorded and loads neither ``nas`` nor
torch; of ``trainers`` it reads only torch-free modules (the catalogue, the config, the budget and
FLOP rules), so that it restates none of them. The ``nas report`` parser reads the plan
choices without loading pandas; and no project module takes part in a file-level import
circle."""

from __future__ import annotations

import ast

from tests.imports import (
    PACKAGES,
    file_level,
    find_cycle,
    import_graph,
    loaded_after,
    modules_after,
    targets,
)

REPORT_MODULES = (
    "reports.brief",
    "reports.build",
    "reports.load",
    "reports.plans",
    "reports.sections",
    "reports.write",
    "reports.importance",
    "reports.flops",
)


# The trainers modules that import no torch, and that reports may read.
TORCH_FREE_TRAINERS = {
    "trainers",
    "trainers.budget",
    "trainers.catalogue",
    "trainers.config",
    "trainers.flops",
    "trainers.identity",
    "trainers.measure",
    "trainers.measure.coordcheck_table",
}


def test_reports_import_neither_nas_nor_torch() -> None:
    """Every report module loads without ``nas`` or torch, and of ``trainers`` only its
    torch-free catalogue and config."""
    loaded = modules_after("\n".join(f"import {m}" for m in REPORT_MODULES))
    assert not {m.split(".")[0] for m in loaded} & {"nas", "torch"}
    assert {m for m in loaded if m.split(".")[0] == "trainers"} <= TORCH_FREE_TRAINERS


def test_plan_choices_load_without_pandas() -> None:
    """The CLI's ``--plan`` choices come from a module that stays light for ``--help``."""
    loaded = loaded_after("from reports.plans import PLAN_CHOICES")
    assert not loaded & {"pandas", "numpy", "mlflow"}


def test_no_file_level_import_circle() -> None:
    """No two project modules import each other, directly or through others, at file level:
    not even for type checking only (``if TYPE_CHECKING:``), which hides a layering fault."""
    assert find_cycle(import_graph(PACKAGES)) == []


def test_the_circle_check_finds_a_type_only_circle() -> None:
    """The check sees through ``if TYPE_CHECKING:``: the circle ``reports.load`` <->
    ``reports.plans`` had (``plans`` importing ``SweepData`` for its annotations only)."""
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from a import X\n")
    imported = set().union(*(targets(n, {"a", "b"}) for n in file_level(tree)))
    assert imported == {"a"}
    assert find_cycle({"a": {"b"}, "b": imported}) == ["a", "b", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) == []
