"""Scenario transcripts: readable, datadriven-style walks through the spec.

A transcript is a sequence of blocks. Each block is one command line, a `----` line, and the
expected output, ending at a blank line or the end of the file. Lines starting with `#` between
blocks are comments.

    config variant=hw-truncation brokers=2
    ----
    <the cluster as a table>

    fetch follower=1
    ----
    FollowerSendFetch(partition=0, broker=1): fetch from 0
    ...

Commands:
- `config key=value ...` starts a new cluster (keys as in `.properties` files).
- Every action in kebab-case (`leader-shrink-isr broker=0 follower=2`). `partition` defaults to
  0; other missing arguments are filled from the first candidate action (in `enabled` order)
  that matches the ones given, so `become-follower broker=1` applies the oldest LeaderAndIsr.
- `produce [partition=P]`: producer-send then leader-append.
- `fetch follower=F [partition=P]`: follower-send-fetch, leader-handle-fetch,
  follower-handle-fetch-response.
- `state`: print the cluster; `check`: print the invariants.

After each command the output shows each applied action with its outcome, the cluster table,
and the invariants (`invariants: ok` or one `VIOLATED Name: detail` line each). A guard that
fails prints `not enabled: reason` and leaves the state as it was. An expected violation is
simply part of the expected output.
"""

from __future__ import annotations

import difflib
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path

from spec import (
    ACTIONS_BY_COMMAND,
    Config,
    ConfigError,
    NotEnabled,
    initial_state,
    step_with_outcome,
    violations,
)
from spec.actions import candidates
from spec.config import config_from_pairs
from spec.render import render
from spec.state import Cluster


class ScenarioError(ValueError):
    """A malformed transcript: `str()` is `FILE:LINE: what is wrong`."""


@dataclass(frozen=True)
class Block:
    line: int  # 1-based line of the command
    command: str
    expected: tuple[str, ...]


def parse(text: str, path: str) -> list[Block]:
    """Split a transcript into blocks; raise ScenarioError on malformed structure."""
    lines = text.splitlines()
    blocks = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip() or line.lstrip().startswith("#"):
            i += 1
            continue
        if line.strip() == "----":
            raise ScenarioError(f"{path}:{i + 1}: '----' without a command before it")
        start = i
        if i + 1 >= len(lines) or lines[i + 1].strip() != "----":
            raise ScenarioError(f"{path}:{start + 1}: expected '----' after the command {line.strip()!r}")
        i += 2
        expected = []
        while i < len(lines) and lines[i].strip():
            expected.append(lines[i].rstrip())
            i += 1
        blocks.append(Block(start + 1, line.strip(), tuple(expected)))
    if not blocks:
        raise ScenarioError(f"{path}:1: no commands in the file")
    if not blocks[0].command.startswith("config"):
        raise ScenarioError(f"{path}:{blocks[0].line}: the first command must be 'config ...'")
    return blocks


def _parse_args(words: list[str], where: str) -> dict[str, str]:
    args = {}
    for word in words:
        key, sep, value = word.partition("=")
        if not sep or not key or not value:
            raise ScenarioError(f"{where}: expected key=value, got {word!r}")
        args[key] = value
    return args


class Runner:
    """Executes scenario commands against the spec, producing the output text of each."""

    def __init__(self, path: str):
        self.path = path
        self.config: Config | None = None
        self.state: Cluster | None = None

    def run(self, block: Block) -> str:
        where = f"{self.path}:{block.line}"
        words = block.command.split()
        name, args = words[0], _parse_args(words[1:], where)
        if name == "config":
            try:
                self.config = config_from_pairs([(where, k, v) for k, v in args.items()])
            except ConfigError as error:
                raise ScenarioError(str(error)) from None
            self.state = initial_state(self.config)
            return self._report([])
        if name == "state":
            return render(self.config, self.state)
        if name == "check":
            return self._invariants()
        if name == "produce":
            return self._sequence(where, [("producer-send", {}), ("leader-append", {})], args)
        if name == "fetch":
            if "follower" not in args:
                raise ScenarioError(f"{where}: fetch needs follower=F")
            follower = args.pop("follower")
            steps = [
                ("follower-send-fetch", {"broker": follower}),
                ("leader-handle-fetch", {"follower": follower}),
                ("follower-handle-fetch-response", {"broker": follower}),
            ]
            return self._sequence(where, steps, args)
        if name in ACTIONS_BY_COMMAND:
            return self._sequence(where, [(name, {})], args)
        known = ", ".join(["config", "state", "check", "produce", "fetch", *ACTIONS_BY_COMMAND])
        raise ScenarioError(f"{where}: unknown command {name!r} (known: {known})")

    def _sequence(self, where: str, steps, shared: dict[str, str]) -> str:
        lines = []
        for index, (command, own) in enumerate(steps):
            try:
                action = self._resolve(where, command, {**shared, **own})
                self.state, outcome = step_with_outcome(self.config, self.state, action)
            except _Unresolved as unresolved:
                lines.append(str(unresolved))
            except NotEnabled as reason:
                lines.append(f"{action}: not enabled: {reason}")
            else:
                lines.append(f"{action}: {outcome}")
                continue
            # A guard failed: show the state only if earlier steps of the command changed it.
            return self._report(lines) if index else "\n".join(lines)
        return self._report(lines)

    def _resolve(self, where: str, command: str, given: dict[str, str]):
        kind = ACTIONS_BY_COMMAND[command]
        names = [f.name for f in fields(kind)]
        required = [f.name for f in fields(kind) if f.default is MISSING]
        for key in given:
            if key not in names:
                raise ScenarioError(f"{where}: {command} takes no argument {key!r} (takes: {', '.join(names) or 'none'})")
        try:
            values = {k: int(v) for k, v in given.items()}
        except ValueError:
            raise ScenarioError(f"{where}: {command}: arguments must be integers") from None
        if "partition" in names:
            values.setdefault("partition", 0)
        if all(n in values for n in required):
            return kind(**values)
        matching = [
            a for a in candidates(self.config, self.state, prune=False)
            if isinstance(a, kind) and all(getattr(a, k) == v for k, v in values.items())
        ]
        for action in matching:
            try:
                step_with_outcome(self.config, self.state, action)
                return action
            except NotEnabled:
                continue
        if matching:
            return matching[0]
        missing = ", ".join(n for n in required if n not in values)
        raise _Unresolved(f"{kind.__name__}: not enabled: nothing in flight or pending to fill {missing}")

    def _invariants(self) -> str:
        found = violations(self.config, self.state)
        if not found:
            return "invariants: ok"
        return "\n".join(f"VIOLATED {name}: {detail}" for name, detail in found)

    def _report(self, lines: list[str]) -> str:
        return "\n".join([*lines, render(self.config, self.state), self._invariants()])


class _Unresolved(Exception):
    """No action matches the command's arguments: printed as the block's output."""


@dataclass
class Result:
    blocks: int
    mismatches: list[tuple[Block, str]]
    rewritten: str
    blocks_run: list[Block] = field(default_factory=list)


def run_text(text: str, path: str) -> Result:
    """Run every block; collect mismatches and the text with regenerated expectations."""
    blocks = parse(text, path)
    runner = Runner(path)
    mismatches = []
    actual_by_line: dict[int, str] = {}
    for block in blocks:
        actual = runner.run(block)
        actual_by_line[block.line] = actual
        if tuple(actual.splitlines()) != block.expected:
            mismatches.append((block, actual))
    return Result(len(blocks), mismatches, _rewrite(text, blocks, actual_by_line), blocks)


def _rewrite(text: str, blocks: list[Block], actual_by_line: dict[int, str]) -> str:
    lines = text.splitlines()
    out = []
    i = 0
    starts = {b.line - 1: b for b in blocks}
    while i < len(lines):
        if i in starts:
            block = starts[i]
            out += [lines[i], "----", *actual_by_line[block.line].splitlines()]
            i += 2 + len(block.expected)
            continue
        out.append(lines[i])
        i += 1
    return "\n".join(out) + "\n"


def diff(block: Block, actual: str, path: str) -> str:
    return "\n".join(difflib.unified_diff(
        list(block.expected), actual.splitlines(),
        f"{path}:{block.line} expected", f"{path}:{block.line} actual", lineterm="",
    ))


def run_file(path: str | Path, rewrite: bool = False) -> Result:
    """Run a transcript file (and rewrite its expectations if asked)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise ScenarioError(f"{path}:0: cannot read: {error.strerror}") from None
    except UnicodeDecodeError:
        raise ScenarioError(f"{path}:0: not UTF-8 text") from None
    result = run_text(text, str(path))
    if rewrite and result.rewritten != text:
        Path(path).write_text(result.rewritten, encoding="utf-8")
    return result
