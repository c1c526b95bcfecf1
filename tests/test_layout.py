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


FINGERPRINT = """
from spec import Config, initial_state, step
from spec.actions import FollowerSendFetch, LeaderHandleFetch
c = Config(brokers=3)
s = step(c, initial_state(c), FollowerSendFetch(0, 1))
s = step(c, s, LeaderHandleFetch(0, 0, 1))  # a FetchResponse (strings) and empty slots (None)
print(hash(s))
"""


def test_fingerprints_are_the_same_in_every_process():
    # Parallel workers and reported counterexamples rely on it: str hashes change with
    # PYTHONHASHSEED and hash(None) with the address space, so run under different seeds.
    import os
    import subprocess
    import sys

    outputs = {
        subprocess.run([sys.executable, "-c", FINGERPRINT], cwd=ROOT, capture_output=True,
                       text=True, check=True, env={**os.environ, "PYTHONHASHSEED": seed}).stdout
        for seed in ("1", "2", "3")
    }
    assert len(outputs) == 1 and outputs.pop().strip().lstrip("-").isdigit()
