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


# The shared vocabulary -------------------------------------------------------------------------

PROJECT = {"vocab", "spec", "impl", "model_check", "pyspark_harness", "isrlab", "tests", "bench",
           "apache_kafka"}


def project_imports(path: Path) -> set[str]:
    return imported_modules(path) & PROJECT


def test_vocab_imports_nothing_of_the_project_only_stdlib_and_msgspec():
    import sys

    allowed = set(sys.stdlib_module_names) | {"msgspec", "vocab", "__future__"}
    paths = sorted((ROOT / "vocab").rglob("*.py"))
    assert len(paths) >= 5  # actions, outcomes, trace, config, properties
    for path in paths:
        assert project_imports(path) <= {"vocab"}, path
        assert imported_modules(path) <= allowed, path


def test_each_layer_may_use_the_vocabulary():
    # spec and impl take their config keys from the same table, never from each other.
    for layer in ("spec", "impl"):
        assert "vocab" in imported_modules(ROOT / layer / "config.py"), layer
    for layer in ("spec", "impl", "model_check", "pyspark_harness"):
        for path in (ROOT / layer).rglob("*.py"):
            assert "isrlab" not in imported_modules(path), path


def test_the_vocab_check_can_fail(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from vocab.config import KEYS\nfrom impl.config import VARIANTS\n")
    assert project_imports(bad) == {"vocab", "impl"}


# The command line: one shape, no private imports -------------------------------------------------


def private_imports(path: Path) -> list[str]:
    """`from <project module> import _name`, and `module._name` on an imported project module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    modules, found = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and \
                node.module.split(".")[0] in PROJECT:
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append(f"{node.module}.{alias.name}")
                else:
                    modules.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in PROJECT:
                    modules.add(alias.asname or alias.name.split(".")[0])
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                node.value.id in modules and node.attr.startswith("_") and \
                not node.attr.startswith("__"):
            found.append(f"{node.value.id}.{node.attr}")
    return found


def test_no_isrlab_module_imports_a_private_name_from_another():
    offenders = {p.name: private_imports(p) for p in (ROOT / "isrlab").glob("*.py")}
    assert {name: found for name, found in offenders.items() if found} == {}


def test_the_private_import_check_can_fail(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from isrlab.cli import _kafka_config, main\nimport isrlab.cli as cli\n"
                   "from isrlab import options\n"
                   "cli._Parser, options._hidden, options.UsageError, cli.__doc__\n")
    assert sorted(private_imports(bad)) == ["cli._Parser", "isrlab.cli._kafka_config",
                                            "options._hidden"]


def bench_and_tests_imports(path: Path) -> set[str]:
    """Names of bench/ or tests/ modules a file imports (as packages or via sys.path)."""
    names = {"bench", "tests"} | {p.stem for d in ("bench", "tests") for p in (ROOT / d).glob("*.py")}
    return imported_modules(path) & names


def test_bench_never_imports_tests_and_tests_never_import_bench():
    bench = {p.stem for p in (ROOT / "bench").glob("*.py")}
    tests = {p.stem for p in (ROOT / "tests").rglob("*.py")}
    for path in (ROOT / "bench").glob("*.py"):
        assert bench_and_tests_imports(path) & (tests | {"tests"}) == set(), path
    for path in (ROOT / "tests").rglob("*.py"):
        assert bench_and_tests_imports(path) & (bench | {"bench"}) == set(), path


def test_the_bench_tests_check_can_fail(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from tests.test_symbolic_diff import x\nfrom mutants_bench import y\n")
    assert bench_and_tests_imports(bad) == {"tests", "mutants_bench"}


def test_every_subcommand_is_a_module_of_one_shape():
    import argparse
    import importlib

    from isrlab import cli

    modules = sorted(p.stem.removeprefix("cmd_") for p in (ROOT / "isrlab").glob("cmd_*.py"))
    assert sorted(cli.COMMANDS) == modules and len(modules) >= 9
    # cli.py builds no subcommand parser itself.
    assert "add_parser(" not in (ROOT / "isrlab" / "cli.py").read_text(encoding="utf-8")
    for name in modules:
        module = importlib.import_module(f"isrlab.cmd_{name}")
        parser = argparse.ArgumentParser()
        sub = parser.add_subparsers()
        module.register(sub)
        assert list(sub.choices) == [name]
        leaves, todo = [], [sub.choices[name]]
        while todo:
            p = todo.pop()
            nested = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
            todo += [c for a in nested for c in a.choices.values()]
            if not nested:
                leaves.append(p)
        assert leaves and all(p.get_default("func") is module.run for p in leaves), name


def test_an_xdist_group_reaches_the_node_id(request):
    # make test runs `--dist loadgroup` so that a module's session fixtures (the Spark report,
    # campaign corpora) are built by one worker. pytest-xdist 3.8 marks a group by setting
    # Item._nodeid; pytest 9 derives nodeid elsewhere and the group silently splits across
    # workers (each building the fixtures again). pyproject.toml keeps pytest below 9 for it.
    item = request.node
    saved = item.nodeid
    try:
        item._nodeid = f"{saved}@group"
        assert item.nodeid == f"{saved}@group"
    finally:
        item._nodeid = saved


def test_apache_kafka_is_judged_from_the_outside():
    # Kafka's runner knows the trace vocabulary and nothing of either description of the
    # protocol, so a result about Kafka never leans on the spec or the reference broker.
    paths = sorted((ROOT / "apache_kafka").rglob("*.py"))
    assert len(paths) >= 3
    for path in paths:
        assert project_imports(path) <= {"apache_kafka", "vocab"}, path


# model_check: three rooms by what a check runs against ------------------------------------------

SOURCES = ("vocab", "spec", "impl", "model_check", "pyspark_harness", "isrlab", "apache_kafka",
           "bench")
# What each subpackage of model_check may import of the project (itself included).
MODEL_CHECK_RULES = {
    "model_check.explore": {"spec", "vocab", "model_check.explore"},
    "model_check.prove": {"spec", "vocab", "model_check.explore", "model_check.prove"},
    "model_check.conformance": {"spec", "impl", "vocab", "pyspark_harness",
                                "model_check.explore", "model_check.conformance"},
}


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules(root: Path = ROOT, top: tuple[str, ...] = SOURCES) -> dict[str, Path]:
    return {module_name(p, root): p for d in top for p in sorted((root / d).rglob("*.py"))}


def import_edges(path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules a file imports, wherever the import stands (in a function too):
    `from a.b import c` names a.b.c when that is a module, else a.b."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in modules)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if full in modules:
                    found.add(full)
                elif node.module in modules:
                    found.add(node.module)
    return found


def import_graph(root: Path = ROOT, top: tuple[str, ...] = SOURCES) -> dict[str, set[str]]:
    modules = project_modules(root, top)
    graph = {name: import_edges(path, modules) - {name} for name, path in modules.items()}
    for name in graph:  # a package's __init__ re-exporting its modules is not a cycle
        graph[name] = {m for m in graph[name] if not name.startswith(m + ".")}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_module_imports_another_that_imports_it_back():
    # Imports placed inside functions count: a cycle hidden there is still a cycle.
    assert cycles(import_graph()) == []


def test_the_cycle_check_can_fail(tmp_path):
    pkg = tmp_path / "model_check" / "explore"
    pkg.mkdir(parents=True)
    (pkg / "a.py").write_text("from model_check.explore.b import f\n")
    (pkg / "b.py").write_text("def f():\n    from model_check.explore import a\n")
    (pkg / "c.py").write_text("import model_check.explore.a\n")
    assert cycles(import_graph(tmp_path, ("model_check",))) == [
        ["model_check.explore.a", "model_check.explore.b"]]


def owner(module: str) -> str:
    """The room a module belongs to: a model_check subpackage, else its top-level package."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "model_check" else parts[0]


def test_model_check_is_three_subpackages_with_their_import_rules():
    top = sorted(p.name for p in (ROOT / "model_check").iterdir()
                 if p.suffix == ".py" or (p.is_dir() and p.name != "__pycache__"))
    assert top == ["__init__.py", "conformance", "explore", "prove"]
    graph = import_graph()
    broken = {m: sorted(owner(d) for d in deps if owner(d) not in MODEL_CHECK_RULES[owner(m)])
              for m, deps in graph.items() if owner(m) in MODEL_CHECK_RULES}
    assert {m: d for m, d in broken.items() if d} == {}
    # Only the campaign hands its corpus to Spark.
    spark = sorted(m for m, deps in graph.items()
                   if m.startswith("model_check") and any(owner(d) == "pyspark_harness"
                                                          for d in deps))
    assert spark == ["model_check.conformance.campaign"]
    # Nothing outside model_check.conformance (the command line and benches aside) reads both
    # descriptions of the protocol.
    both = sorted(m for m, deps in graph.items()
                  if {"spec", "impl"} <= {owner(d) for d in deps}
                  and owner(m) not in ("model_check.conformance", "isrlab", "bench"))
    assert both == []


def test_each_model_check_subpackage_opens_with_a_theory_of_operation():
    for name in MODEL_CHECK_RULES:
        path = ROOT / name.replace(".", "/") / "__init__.py"
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        assert len(doc.split()) >= 80, f"{path}: a short docstring"


def test_the_import_rules_can_fail():
    graph = {"model_check.explore.model": {"model_check.prove.por", "spec.state"}}
    assert sorted(owner(d) for d in graph["model_check.explore.model"]
                  if owner(d) not in MODEL_CHECK_RULES["model_check.explore"]) == [
        "model_check.prove"]


def test_no_room_holds_a_quarter_of_the_code():
    lines: dict[str, int] = {}
    for name, path in project_modules().items():
        room = owner(name)
        lines[room] = lines.get(room, 0) + len(path.read_text(encoding="utf-8").splitlines())
    total = sum(lines.values())
    assert {room: n for room, n in lines.items() if n >= total / 4} == {}


def test_no_module_imports_a_private_name_of_another():
    offenders = {str(p.relative_to(ROOT)): private_imports(p)
                 for p in project_modules().values()}
    assert {name: found for name, found in offenders.items() if found} == {}
