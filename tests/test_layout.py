"""Architecture rules that must hold as the project grows."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_impl_never_imports_spec():
    offenders = [p for p in (ROOT / "impl").rglob("*.py") if "spec" in imported_modules(p)]
    assert offenders == []


def test_spec_is_pure():
    forbidden = {"time", "random", "socket", "trio", "os", "subprocess", "impl", "model_check"}
    for path in (ROOT / "spec").rglob("*.py"):
        assert imported_modules(path) & forbidden == set(), path


def test_the_import_check_can_fail(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from spec.actions import step\nimport spec\n")
    assert "spec" in imported_modules(bad)
