"""Reading the project's imports: what a fresh interpreter loads after some code, and the graph of
the project's file-level imports (``import_graph``), with a circle finder. The import-direction
tests (``tests/test_layout.py``, ``tests/reports/test_imports.py``, ``tests/record/test_layers.py``)
read them."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path


def modules_after(code: str) -> set[str]:
    """Modules loaded after running ``code`` in a fresh interpreter."""
    probe = f"{code}\nimport sys\nprint(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def loaded_after(code: str) -> set[str]:
    """Top-level packages loaded after running ``code`` in a fresh interpreter."""
    return {m.split(".")[0] for m in modules_after(code)}


ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("reports", "nas", "trainers", "search_spaces", "stats", "record")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def file_level(tree: ast.Module) -> Iterator[ast.Import | ast.ImportFrom]:
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


def targets(node: ast.Import | ast.ImportFrom, modules: set[str]) -> set[str]:
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


def anywhere(tree: ast.Module) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import a module holds, those deferred into a function too."""
    return (n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom))


def import_graph(packages: tuple[str, ...], deferred: bool = False) -> dict[str, set[str]]:
    """module -> the project modules it imports at file level (with ``deferred``, also inside
    its functions)."""
    files = {module_name(p): p for pkg in packages for p in (ROOT / pkg).rglob("*.py")}
    modules = set(files)
    found = anywhere if deferred else file_level
    return {
        name: set().union(*(targets(n, modules) for n in found(ast.parse(path.read_text()))))
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
