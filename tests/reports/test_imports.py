"""Imports flow one way: the report reads what MLflow recorded and loads neither ``nas`` nor
torch; of ``trainers`` it reads only torch-free modules (the catalogue, the config, the budget and
FLOP rules), so that it restates none of them. The ``nas report`` parser reads the plan
choices without loading pandas; and no project module takes part in a file-level import
circle."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

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
    "trainers.coordcheck_table",
    "trainers.flops",
    "trainers.identity",
    "trainers.power",
    "trainers.routing",
}


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


ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("reports", "nas", "trainers", "search_spaces")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _file_level(tree: ast.Module) -> Iterator[ast.Import | ast.ImportFrom]:
    """The imports a module runs, or names for the type checker, at file level: its own
    statements and those under a file-level ``if`` (``if TYPE_CHECKING:``) or ``try``; not
    those inside a function, which run only when it is called."""
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If | ast.Try):
            pending.extend(ast.iter_child_nodes(node))  # type: ignore[arg-type]


def _targets(node: ast.Import | ast.ImportFrom, modules: set[str]) -> set[str]:
    """The project modules an import statement names: ``import a.b`` and ``from a import b``
    (a module) name ``a.b``; ``from a import X`` (a name) names ``a``."""
    if isinstance(node, ast.Import):
        names = {alias.name for alias in node.names}
    elif node.module is None or node.level:
        return set()  # the project imports absolutely
    else:
        names = {
            f"{node.module}.{alias.name}"
            if f"{node.module}.{alias.name}" in modules
            else node.module
            for alias in node.names
        }
    return names & modules


def import_graph(packages: tuple[str, ...]) -> dict[str, set[str]]:
    """module -> the project modules it imports at file level."""
    files = {_module_name(p): p for pkg in packages for p in (ROOT / pkg).rglob("*.py")}
    modules = set(files)
    return {
        name: set().union(*(_targets(n, modules) for n in _file_level(ast.parse(path.read_text()))))
        - {name}
        for name, path in files.items()
    }


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import circle of ``graph`` (its modules, the first repeated last), or none."""
    done: set[str] = set()
    for start in sorted(graph):
        path: list[str] = []
        on_path: set[str] = set()
        stack = [(start, iter(sorted(graph[start])))]
        if start in done:
            continue
        path.append(start)
        on_path.add(start)
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                path.pop()
                on_path.discard(node)
                done.add(node)
            elif child in on_path:
                return [*path[path.index(child) :], child]
            elif child not in done:
                stack.append((child, iter(sorted(graph[child]))))
                path.append(child)
                on_path.add(child)
    return []


def test_no_file_level_import_circle() -> None:
    """No two project modules import each other, directly or through others, at file level:
    not even for type checking only (``if TYPE_CHECKING:``), which hides a layering fault."""
    assert find_cycle(import_graph(PACKAGES)) == []


def test_the_circle_check_finds_a_type_only_circle() -> None:
    """The check sees through ``if TYPE_CHECKING:``: the circle ``reports.load`` <->
    ``reports.plans`` had (``plans`` importing ``SweepData`` for its annotations only)."""
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from a import X\n")
    imported = set().union(*(_targets(n, {"a", "b"}) for n in _file_level(tree)))
    assert imported == {"a"}
    assert find_cycle({"a": {"b"}, "b": imported}) == ["a", "b", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) == []
