"""The `isrlab` entry point: user errors are one line and exit 2, a closed pipe ends quietly."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from isrlab.cli import main

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("run")
    assert main(["cluster", "sim", "--seed", "3", "--duration", "1s", "--trace-out", str(out)]) == 0
    return out


def into_closed_pipe(argv: list[str]) -> subprocess.CompletedProcess:
    """Run a program whose stdout is a pipe nobody reads any more (as `| head -1` leaves it
    once head has exited)."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(argv, stdout=write, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                              timeout=300)
    finally:
        os.close(write)


ISRLAB = [sys.executable, "-m", "isrlab.cli"]


@pytest.mark.parametrize("argv", [
    ["replay", "{run}"],
    ["replay", "{run}", "--json"],
    ["scenario", "tests/testdata/b1_hw_truncation.txt", "-v"],
    ["--help"],
])
def test_a_closed_pipe_ends_quietly(argv, run_dir):
    proc = into_closed_pipe([*ISRLAB, *(a.format(run=run_dir) for a in argv)])
    assert proc.stderr == ""
    assert proc.returncode in (0, 141)


def test_the_closed_pipe_check_can_fail(run_dir):
    # Python's own behaviour, and the replay command run without `main`'s handling: both
    # leave a BrokenPipeError on stderr and a non-zero status.
    bare = into_closed_pipe([sys.executable, "-c", "print('x')"])
    assert "BrokenPipeError" in bare.stderr and bare.returncode not in (0, 141)
    unguarded = into_closed_pipe([
        sys.executable, "-c",
        "import sys; from isrlab.cli import build_parser; a = build_parser().parse_args("
        "sys.argv[1:]); a.func(a)", "replay", str(run_dir)])
    assert "BrokenPipeError" in unguarded.stderr and unguarded.returncode not in (0, 141)


def test_replay_piped_into_head_ends_quietly(run_dir):
    shell = f"{' '.join(ISRLAB)} replay {run_dir} | head -1; echo \"status ${{PIPESTATUS[0]}}\""
    proc = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("accepted:") and lines[-1] in ("status 0", "status 141")
    assert proc.stderr == ""


@pytest.mark.parametrize(("argv", "message"), [
    (["campaign", "--runs", "0"], "isrlab campaign: error: --runs must be >= 1"),
    (["cluster", "sim", "--brokers", "10", "--trace-out", "x"],
     "isrlab cluster: error: brokers: must be between 1 and 9"),
    (["check", "--variant", "nope"], "isrlab: error: --variant: unknown variant 'nope' "
     "(known: hw-truncation, kip-101, kip-279, kip-320, current)"),
    (["fuzz", "--examples", "0"], "isrlab: error: --examples and --steps must be >= 1"),
    (["prove", "--bmc", "1", "--brokers", "10"], "isrlab: error: brokers: must be between 1 and 9"),
])
def test_user_errors_are_one_line_and_exit_2(argv, message, capsys):
    assert main(argv) == 2
    assert capsys.readouterr().err == message + "\n"


def test_an_unexpected_error_is_not_hidden_as_a_usage_error(monkeypatch):
    # Only the known user-error types become exit 2; a bug keeps its traceback.
    import isrlab.cmd_replay

    def broken(args):
        raise KeyError("bug")

    monkeypatch.setattr(isrlab.cmd_replay, "run", broken)
    with pytest.raises(KeyError):
        main(["replay", "x"])
