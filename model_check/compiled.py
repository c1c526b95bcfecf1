"""The flat encoding compiled to C by Cython: `model_check/flat.py` itself, not a second copy.

The explorer spends most of its time in the flat encoding's successor function and
invariants, Python code on tuples. Cython compiles that same source, unchanged, to a C
extension (`model_check._flat_c`), which runs it with the interpreter's dispatch taken out:
the same states, fingerprints, labels and verdicts in a fifth to a third less time
(`bench/check_bench.py --side-by-side` prints both). `make install` builds it
(`python -m model_check.compiled`); `flat.search` uses it when it was built from the
flat.py on disk, and the pure module otherwise (no compiler, or flat.py edited since).
`tests/test_flat.py` runs its comparisons with the spec on both.
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
MODULE = "model_check._flat_c"
# -O1: a quarter of the compile time of Python's default -O3 -g (about 20 s against 86 s on
# this project's machine), and 2% more instructions than -O2 on the explorer's first 50,000
# states (callgrind), within the timing noise.
FLAGS = ["-O1", "-g0"]


def digest() -> str:
    """The SHA-256 of flat.py and flat.pxd as they are now."""
    return hashlib.sha256(SOURCE.read_bytes() + DECLARATIONS.read_bytes()).hexdigest()


def _imported() -> ModuleType | None:
    try:
        return importlib.import_module(MODULE)
    except ImportError:
        return None


def _current(module: ModuleType) -> bool:
    return getattr(module, "BUILT_FROM", None) == digest()


def state() -> str:
    """'compiled' when the module is built from flat.py and flat.pxd as they are now,
    'stale' when it is built from others, 'absent' when there is none."""
    module = _imported()
    if module is None:
        return "absent"
    return "compiled" if _current(module) else "stale"


def load() -> ModuleType | None:
    """The compiled flat encoding when its state is 'compiled'; else None."""
    module = _imported()
    return module if module is not None and _current(module) else None


def build(quiet: bool = True) -> Path:
    """Compile flat.py into model_check/_flat_c.<abi>.so; return its path. The module records
    the digest of the source it was built from (`BUILT_FROM`), so an edited flat.py is never
    run from an old build."""
    from Cython.Build import cythonize
    from setuptools import Distribution, Extension

    with tempfile.TemporaryDirectory(prefix="isrlab-cython-") as tmp:
        # In a package of its own name, where Cython finds the declarations beside it.
        package = Path(tmp) / "model_check"
        package.mkdir()
        (package / "__init__.py").write_text("")
        source = package / "_flat_c.py"
        source.write_text(f"{SOURCE.read_text()}\n\nBUILT_FROM = {digest()!r}\n")
        shutil.copyfile(DECLARATIONS, source.with_suffix(".pxd"))
        extension = Extension(MODULE, [str(source.relative_to(tmp))],
                              extra_compile_args=FLAGS)
        with chdir(tmp):
            modules = cythonize([extension], language_level=3, quiet=quiet, build_dir="c")
            dist = Distribution({"ext_modules": modules, "script_name": "isrlab-build"})
            command = dist.get_command_obj("build_ext")
            command.build_lib, command.build_temp = "lib", "obj"
            command.ensure_finalized()
            command.run()
            built = Path(tmp) / command.get_ext_fullpath(MODULE)
        target = SOURCE.with_name(built.name)
        shutil.copyfile(built, target.with_suffix(".tmp"))
        target.with_suffix(".tmp").replace(target)
    return target


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv != ["--check"]:
        print(f"usage: python -m model_check.compiled [--check]; not {' '.join(argv)!r}",
              file=sys.stderr)
        return 2
    if argv == ["--check"]:
        print(f"compiled flat encoding: {state()}")
        return 0 if state() == "compiled" else 1
    try:
        target = build()
    except Exception as error:  # noqa: BLE001 - any failure leaves the pure module in use
        print(f"compiled flat encoding not built ({type(error).__name__}: {error}); "
              "the explorer runs model_check/flat.py as Python", file=sys.stderr)
        return 0
    print(f"compiled flat encoding: {target.relative_to(SOURCE.parent.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
