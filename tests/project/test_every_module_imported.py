"""Every module of the product is imported by at least one test (issue 22).

A module no test imports can break unseen; and a newcomer looking for a module's
test finds it under the same path in tests/ (tests/README.md). Imports are read
from the test files' source, so a module counts only if a test names it (a package
counts when one of its modules is imported: Python runs its ``__init__``).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: The packages whose every module a test must import.
CHECKED = ("panda_predictor", "model_registry", "pipelines")


def modules(package: str) -> set[str]:
    """Return the dotted names of the package's modules (a package is its name)."""
    names = set()
    for path in (ROOT / package).rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        names.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def imported_by_tests() -> set[str]:
    """Return every dotted name a test file imports, with the packages above it."""
    names: set[str] = set()
    for path in (ROOT / "tests").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module)
                # ``from package import module`` imports the module too.
                names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {
        ".".join(name.split(".")[:i])
        for name in names
        for i in range(1, name.count(".") + 2)
    }


def test_every_module_is_imported_by_a_test():
    imported = imported_by_tests()
    untested = sorted(
        name for package in CHECKED for name in modules(package) - imported
    )
    assert not untested, (
        "These modules are imported by no test; add one under the folder that "
        f"mirrors the module's package (tests/README.md): {untested}"
    )


def test_the_check_sees_imports_of_both_forms():
    # `from panda_predictor.plugins import jedi_refiner` names a module as well.
    imported = imported_by_tests()
    assert "panda_predictor.plugins.jedi_refiner" in imported
    assert "panda_predictor.plugins" in imported
    assert "panda_predictor.hook" in imported
