"""The `isrlab` entry point: user errors are one line and exit 2, a closed pipe ends quietly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from isrlab.cli import main
from isrlab.options import MAX_WORKERS

pytestmark = pytest.mark.xdist_group("test_cli")  # one worker builds its shared fixtures

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
    ["check", "--variant", "hw-truncation", "--records", "1", "--epochs", "1"],
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
    (["campaign", "--runs", "0"],
     "isrlab campaign: error: argument --runs: 0 is out of range (1..1000000)"),
    (["cluster", "sim", "--brokers", "10", "--trace-out", "x"],
     "isrlab cluster: error: --brokers: must be between 1 and 9"),
    (["check", "--variant", "nope"], "isrlab check: error: --variant: unknown variant 'nope' "
     "(known: hw-truncation, kip-101, kip-279, kip-320, current)"),
    (["fuzz", "--examples", "0"],
     "isrlab fuzz: error: argument --examples: 0 is out of range (1..10000000)"),
    (["prove", "--bmc", "1", "--brokers", "10"],
     "isrlab prove: error: --brokers: must be between 1 and 9"),
    # Each flag is range-checked, and a flag a model lacks refused, before any work.
    (["check", "--workers", "many"],
     "isrlab check: error: argument --workers: 'many' is neither an integer nor auto"),
    (["check", "--workers", "100000"],
     f"isrlab check: error: argument --workers: 100000 is out of range (1..{MAX_WORKERS})"),
    (["check", "--max-depth", "-1"],
     "isrlab check: error: argument --max-depth: -1 is out of range (>= 1)"),
    (["check", "--simulate", "--traces", "-1"],
     "isrlab check: error: argument --traces: -1 is out of range (>= 1)"),
    (["check", "--model", "tla-compat", "--records", "0"],
     "isrlab check: error: argument --records: 0 is out of range (1..1000)"),
    (["check", "--model", "tla-compat", "--epochs", "-2"],
     "isrlab check: error: argument --epochs: -2 is out of range (1..1000)"),
    (["check", "--model", "tla-compat", "--partitions", "2"],
     "isrlab check: error: --partitions: the tla-compat model has no such setting"),
    (["check", "--model", "tla-compat", "--crashes", "1"],
     "isrlab check: error: --crashes: the tla-compat model has no such setting"),
    (["check", "--model", "tla-compat", "--acks", "1"],
     "isrlab check: error: --acks: the tla-compat model has no such setting"),
    (["check", "--model", "tla-compat", "--min-isr", "2"],
     "isrlab check: error: --min-isr: the tla-compat model has no such setting"),
    (["check", "--log-size", "3"],
     "isrlab check: error: --log-size: only the tla-compat model has it (use --records)"),
    (["check", "--brokers", "\u0663"],
     "isrlab check: error: argument --brokers: '\u0663' is not an integer"),
    (["check", "--itf", "/nonexistent-dir/cex.json"],
     "isrlab check: error: --itf: '/nonexistent-dir' is not a directory"),
    (["check", "--junit", "/"], "isrlab check: error: --junit: '/' is a directory"),
    (["fuzz", "--out", "/nonexistent-dir/t.txt"],
     "isrlab fuzz: error: --out: '/nonexistent-dir' is not a directory"),
    (["cluster", "sim", "--faults", "0", "--nemesis", "crash", "--trace-out", "x"],
     "isrlab cluster sim: error: argument --faults: 0 is out of range (1..64)"),
    (["cluster", "sim", "--duration", "0", "--trace-out", "x"],
     "isrlab cluster: error: --duration 0 (run until stopped) is for isrlab cluster tcp"),
    (["cluster", "sim", "--duration", "1441m", "--trace-out", "x"],
     "isrlab cluster sim: error: argument --duration: duration '1441m' out of range (0..24h)"),
    (["campaign", "--duration", "0"],
     "isrlab campaign: error: --duration 0 (run until stopped) is for isrlab cluster tcp"),
    (["cluster", "tcp", "--fault", "1000:explode:b0:10", "--trace-out", "x"],
     "isrlab cluster tcp: error: argument --fault: '1000:explode:b0:10': expected "
     "AT_MS:KIND:bN:LENGTH_MS with KIND one of crash, partition, pause, slow, drop, "
     "duplicate, delay"),
    (["cluster", "tcp", "--fault", "1000:crash:b7:10", "--trace-out", "x"],
     "isrlab cluster: error: --fault: no broker b7 (3 brokers)"),
    (["cluster", "tcp", "--topic", "a b", "--trace-out", "x"],
     "isrlab cluster tcp: error: argument --topic: 'a b': a Kafka topic name "
     "([A-Za-z0-9._-], 1..249 characters)"),
    (["campaign", "--clients", "kafka-java"],
     "isrlab campaign: error: argument --clients: 'kafka-java': not a client (known: "
     "kafka-python, confluent-kafka, aiokafka)"),
    (["cluster", "sim", "--trace-out", "/dev/null"],
     "isrlab cluster: error: --trace-out: '/dev/null' exists and is not a directory"),
    (["campaign", "--runs", "1", "--out", "/dev/null"],
     "isrlab campaign: error: --out: '/dev/null' exists and is not a directory"),
])
def test_user_errors_are_one_line_and_exit_2(argv, message, capsys):
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's own refusals
        code = exit_.code
    assert code == 2
    assert capsys.readouterr().err.splitlines()[-1] == message


def test_an_unexpected_error_is_not_hidden_as_a_usage_error(monkeypatch):
    # Only the known user-error types become exit 2; a bug keeps its traceback.
    import isrlab.cmd_replay

    def broken(args):
        raise KeyError("bug")

    monkeypatch.setattr(isrlab.cmd_replay, "run", broken)
    with pytest.raises(KeyError):
        main(["replay", "x"])


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def test_check_workers_do_not_outlive_a_killed_parent():
    proc = subprocess.Popen([*ISRLAB, "check", "--workers", "2", "--brokers", "3", "--records",
                             "4", "--epochs", "4", "--crashes", "2", "--no-symmetry"],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while len(workers := _children(proc.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(workers) == 2
        proc.kill()
        proc.wait()
        deadline = time.monotonic() + 5
        while any(Path(f"/proc/{w}").exists() for w in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        alive = [w for w in workers if Path(f"/proc/{w}").exists()
                 and "Z" not in (Path(f"/proc/{w}/stat").read_text().rsplit(")", 1)[1].split()[0])]
        assert alive == []
    finally:
        proc.kill()
        for w in _children(proc.pid):
            os.kill(w, signal.SIGKILL)
