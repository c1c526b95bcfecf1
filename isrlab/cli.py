"""The `isrlab` console script: one subcommand per job.

Exit codes are part of the contract: 0 success, 1 a finding (mismatch, violation), 2 bad usage
or bad input (one line naming where and what, never a traceback).

Each subcommand is a module `isrlab/cmd_<name>.py` with `register(subparsers)`, which adds its
parser and sets `func` (its `run(args) -> int`). This module only builds the top parser,
registers them and dispatches; a known kind of user error raised by a command becomes one line
(`<prefix>: error: <message>`, the prefix set by the command as `error_prefix`) and exit 2.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys

from isrlab import __version__
from isrlab.options import UsageError
from vocab.properties import PropertiesError

# In `isrlab --help` order.
COMMANDS = ("scenario", "check", "fuzz", "analyze", "campaign", "cluster", "prove", "replay",
            "drive", "coverage", "demo")


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and exit code 2, naming each option by one
    spelling."""

    def __init__(self, *args, **kwargs):
        # An abbreviation of one flag can mean another tomorrow (`--port` took `--port-base`
        # and started a cluster), so every flag is spelt out.
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        self._typed = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {self._one_name(message)}\n")

    def _one_name(self, message: str) -> str:
        """argparse names an option with several spellings by all of them
        (`--out/--trace-out`); name the one the user typed (or abbreviated), else the first."""
        typed = [word.split("=", 1)[0] for word in getattr(self, "_typed", ())
                 if word.startswith("-")]
        for action in self._actions:
            names = action.option_strings
            if len(names) < 2 or "/".join(names) not in message:
                continue
            used = next((name for word in typed for name in names if word == name), None) or \
                next((name for word in typed for name in names
                      if word.startswith("--") and name.startswith(word)), names[0])
            message = message.replace("/".join(names), used)
        return message


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="isrlab", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"isrlab {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS:
        importlib.import_module(f"isrlab.cmd_{name}").register(sub)
    return parser


def user_errors() -> tuple[type[Exception], ...]:
    """Errors that mean bad input or usage, not a bug: one line and exit 2."""
    from vocab.config import ConfigError

    return (UsageError, PropertiesError, ConfigError)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        code = args.func(args)
        sys.stdout.flush()
        return code
    except KeyboardInterrupt:
        print("isrlab: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`isrlab replay DIR | head -1`): stop quietly, as a process
        # killed by SIGPIPE would, and keep the interpreter's final flush off the closed pipe.
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):  # stdout is not a file (captured)
            pass
        return 128 + signal.SIGPIPE
    except Exception as error:
        if not isinstance(error, user_errors()):
            raise
        print(f"{getattr(args, 'error_prefix', 'isrlab')}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
