"""No test module imports another test module: what tests share (spaces, recorded stores, images,
a browser) lives in helper modules (tests/nas/spaces.py, tests/nas/sweeps.py, tests/reports/...),
so a test module can be moved, renamed or split without breaking another; and the slow marks
(tests/conftest.py) name tests that exist."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).parent
ALLOWED: set[tuple[str, str]] = set()


def _test_module(name: str) -> bool:
    return name.startswith("tests.") and name.rpartition(".")[2].startswith("test_")


def test_no_test_module_imports_another() -> None:
    """Every ``from tests... import`` and ``import tests...`` in a test module names a helper
    module, not a ``test_*`` module (beyond ``ALLOWED``)."""
    found = set()
    for path in TESTS.rglob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            found |= {(path.relative_to(TESTS).as_posix(), n) for n in names if _test_module(n)}
    assert found <= ALLOWED, sorted(found - ALLOWED)


def test_every_slow_name_is_a_test_module_or_function() -> None:
    """A renamed module or test would silently leave ``make test-fast``'s exclusions: each of
    conftest's ``SLOW_MODULES`` is a file and each ``SLOW_TESTS`` name a function in its file."""
    from tests.conftest import SLOW_MODULES, SLOW_TESTS

    assert all(path.is_file() for path in SLOW_MODULES), sorted(map(str, SLOW_MODULES))
    for name in SLOW_TESTS:
        module, _, function = name.partition("::")
        tree = ast.parse((TESTS / module).read_text())
        assert function in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}, name
