"""The flat encoding and the explorer's expansion loop compiled to C by Cython: the sources
themselves, not second copies.

The explorer spends most of its time in the flat encoding's successor function and
invariants, Python code on tuples. Cython compiles that same source, unchanged, to a C
extension (`model_check.explore._flat_c`), which runs it with the interpreter's dispatch taken out:
the same states, fingerprints, labels and verdicts in a fifth to a third less time
(`bench/check_bench.py --side-by-side` prints both). The explorer's own loop over each
state's successors (`explorer._Expander`) is compiled the same way from explorer.py
(`model_check.explore._explorer_c`): a twentieth less time with two workers. `make install` builds
both (`python -m model_check.explore.compiled`); each is used only when it was built from the file on
disk as it is, and the pure module otherwise (no compiler, or the file edited since).
`tests/test_flat.py` runs its comparisons with the spec on both encodings, and
`tests/test_check.py` compares the two expanders.
"""

from __future__ import annotations

import hashlib
import importlib
import shutil
import sys
import tempfile
from contextlib import chdir
from pathlib import Path
from types import ModuleType

SOURCE = Path(__file__).with_name("flat.py")
# Cython's declarations for it (C integers for the field positions); part of the digest.
DECLARATIONS = Path(__file__).with_name("flat.pxd")
MODULE = "model_check.explore._flat_c"
EXPLORER_SOURCE = Path(__file__).with_name("explorer.py")
EXPLORER_MODULE = "model_check.explore._explorer_c"
# -O1: a quarter of the compile time of Python's default -O3 -g (about 20 s against 86 s on
# this project's machine), and 2% more instructions than -O2 on the explorer's first 50,000
# states (callgrind), within the timing noise.
FLAGS = ["-O1", "-g0"]


def digest() -> str:
    """The SHA-256 of flat.py and flat.pxd as they are now."""
    return hashlib.sha256(SOURCE.read_bytes() + DECLARATIONS.read_bytes()).hexdigest()


def explorer_digest() -> str:
    """The SHA-256 of explorer.py as it is now."""
    return hashlib.sha256(EXPLORER_SOURCE.read_bytes()).hexdigest()


def _imported(name: str | None = None) -> ModuleType | None:
    try:
        return importlib.import_module(name or MODULE)
    except ImportError:
        return None


def _current(module: ModuleType, made_from=digest) -> bool:
    return getattr(module, "BUILT_FROM", None) == made_from()


def state(explorer: bool = False) -> str:
    """'compiled' when the flat encoding's module (with `explorer`, the explorer's) is built
    from its sources as they are now, 'stale' when it is built from others, 'absent' when
    there is none."""
    module = _imported(EXPLORER_MODULE if explorer else None)
    if module is None:
        return "absent"
    return "compiled" if _current(module, explorer_digest if explorer else digest) else "stale"


def load() -> ModuleType | None:
    """The compiled flat encoding when its state is 'compiled'; else None."""
    return _imported() if state() == "compiled" else None


def load_explorer() -> ModuleType | None:
    """The compiled explorer when its state is 'compiled'; else None."""
    return _imported(EXPLORER_MODULE) if state(explorer=True) == "compiled" else None


def build(quiet: bool = True) -> list[Path]:
    """Compile flat.py into model_check/explore/_flat_c.<abi>.so and explorer.py into
    model_check/explore/_explorer_c.<abi>.so; return their paths. Each module records the digest of
    the source it was built from (`BUILT_FROM`), so an edited file is never run from an old
    build."""
    from Cython.Build import cythonize
    from setuptools import Distribution, Extension

    with tempfile.TemporaryDirectory(prefix="isrlab-cython-") as tmp:
        # In a package of its own name, where Cython finds the declarations beside it.
        package = Path(tmp) / "model_check" / "explore"
        package.mkdir(parents=True)
        (package.parent / "__init__.py").write_text("")
        (package / "__init__.py").write_text("")
        extensions = []
        for module, text, made_from in ((MODULE, SOURCE.read_text(), digest()),
                                        (EXPLORER_MODULE, EXPLORER_SOURCE.read_text(),
                                         explorer_digest())):
            source = package / f"{module.rpartition('.')[2]}.py"
            source.write_text(f"{text}\n\nBUILT_FROM = {made_from!r}\n")
            extensions.append(Extension(module, [str(source.relative_to(tmp))],
                                        extra_compile_args=FLAGS))
        shutil.copyfile(DECLARATIONS, package / "_flat_c.pxd")
        targets = []
        with chdir(tmp):
            modules = cythonize(extensions, language_level=3, quiet=quiet, build_dir="c")
            dist = Distribution({"ext_modules": modules, "script_name": "isrlab-build"})
            command = dist.get_command_obj("build_ext")
            command.build_lib, command.build_temp = "lib", "obj"
            command.ensure_finalized()
            command.run()
            for module in (MODULE, EXPLORER_MODULE):
                built = Path(tmp) / command.get_ext_fullpath(module)
                target = SOURCE.with_name(built.name)
                shutil.copyfile(built, target.with_suffix(".tmp"))
                target.with_suffix(".tmp").replace(target)
                targets.append(target)
    return targets


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv != ["--check"]:
        print(f"usage: python -m model_check.explore.compiled [--check]; not {' '.join(argv)!r}",
              file=sys.stderr)
        return 2
    if argv == ["--check"]:
        print(f"compiled flat encoding: {state()}")
        print(f"compiled explorer: {state(explorer=True)}")
        return 0 if state() == state(explorer=True) == "compiled" else 1
    try:
        targets = build()
    except Exception as error:  # noqa: BLE001 - any failure leaves the pure modules in use
        print(f"compiled flat encoding not built ({type(error).__name__}: {error}); "
              "the explorer runs model_check/explore/flat.py and its own loop as Python",
              file=sys.stderr)
        return 0
    built = ", ".join(str(target.relative_to(SOURCE.parents[2])) for target in targets)
    print(f"compiled flat encoding and explorer: {built}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
