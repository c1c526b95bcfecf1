"""Every long command reports progress on stderr (a plain line at most every PLAIN_INTERVAL
seconds off a terminal) and `--quiet` turns it off, stdout unchanged either way; and
`prove --expiries`, shared with `check`."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

import model_check.explore.progress as progress_module
from isrlab.cli import main
from model_check.explore.progress import Progress

B1 = Path(__file__).resolve().parent / "testdata" / "b1_hw_truncation.txt"

# (command line, the progress lines' label): small enough for seconds each.
COMMANDS = {
    "coverage": (["coverage", "--depth", "2", "--paths", "2", "--runs", "2",
                  "--duration", "1s"], ("spec graph: states", "directed: paths driven",
                                        "campaign: runs")),
    "drive": (["drive", str(B1)], ("spec actions followed",)),
    "prove": (["prove", "--variant", "current", "--acks", "1", "--bmc", "3"],
              ("BMC depths",)),
    "prove-induction": (["prove", "--induction", "--brokers", "2", "--invariant", "LeaderInIsr"],
                        ("induction: action instances asked",)),
    "campaign": (["campaign", "--runs", "2", "--duration", "1s", "--workers", "1"],
                 ("runs",)),
    "check": (["check", "--variant", "current", "--brokers", "2", "--records", "1",
               "--epochs", "2"], ("states",)),
}

# What differs from one run to the next: seconds taken, and lines about timing alone (rates,
# wall time, queries ranked by time).
SECONDS = re.compile(r"[0-9][0-9.,]* s\b")
TIMING = re.compile(r"/s\b|\(s\)|^slowest ")


def untimed(out: str) -> list[str]:
    return [SECONDS.sub("T s", line) for line in out.splitlines() if not TIMING.search(line)]


@pytest.fixture
def every_update_shown(monkeypatch):
    monkeypatch.setattr(progress_module, "PLAIN_INTERVAL", 0.0)
    monkeypatch.delenv("ISRLAB_NO_PROGRESS", raising=False)


def _run(capsys, argv: list[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_progress_on_stderr_and_none_with_quiet(name, capsys, tmp_path, every_update_shown):
    argv, labels = COMMANDS[name]
    if name in ("drive", "campaign"):
        argv = [*argv, "--out", str(tmp_path / "out")]
    code, out, err = _run(capsys, argv)
    quiet_code, quiet_out, quiet_err = _run(capsys, [*argv, "--quiet"])
    shown = [line for line in err.splitlines() if line.startswith(labels)]
    for label in labels:
        assert any(re.match(rf"{re.escape(label)}: [0-9]", line) for line in shown), \
            (label, err)
    assert not [line for line in quiet_err.splitlines() if line.startswith(labels)], quiet_err
    assert [line for line in err.splitlines() if line not in shown] == quiet_err.splitlines()
    assert quiet_code == code
    assert untimed(quiet_out) == untimed(out) != []


def test_analyze_hands_its_stages_a_display_quiet_can_silence(capsys, monkeypatch,
                                                              every_update_shown, tmp_path):
    import pyspark_harness.main as harness

    def stages(args, progress) -> int:  # Spark's stages, without starting Spark
        with progress("ingest: tasks") as shown:
            shown.update(3)
        print("report written")
        return 0

    monkeypatch.setattr(harness, "run", stages)
    argv = ["analyze", str(tmp_path), "--out", str(tmp_path / "report")]
    code, out, err = _run(capsys, argv)
    assert (code, out) == (0, "report written\n") and err.startswith("ingest: tasks: 3")
    assert _run(capsys, [*argv, "--quiet"]) == (0, "report written\n", "")


def test_a_slow_rate_is_not_shown_as_zero():
    out = io.StringIO()
    with Progress("runs", total=4, stream=out, tty=False, interval=0) as progress:
        progress.started -= 40  # one run in 40 s
        progress.update(1)
    assert " 0.025/s " in out.getvalue(), out.getvalue()


def _prove(capsys, *argv: str) -> tuple[int, dict]:
    code = main(["prove", "--variant", "current", "--acks", "1", *argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_prove_expiries_reaches_the_config_and_decides_the_depth(capsys):
    # With one session expiry the acks=1 loss takes 4 steps (a zombie leader expires); without
    # one it needs a crash instead and 5 steps (B10), so BMC to depth 4 finds nothing.
    code, data = _prove(capsys, "--bmc", "4", "--expiries", "0")
    assert data["config"]["max.session.expiries"] == "0"
    assert (code, data["result"], data["depth"]) == (0, "ok", 4)
    code, data = _prove(capsys, "--bmc", "4", "--expiries", "1")
    assert data["config"]["max.session.expiries"] == "1"
    assert (code, data["result"], data["depth"]) == (1, "violation", 4)
    assert data["violation"]["invariant"] == "AckedWritesDurable"


def test_a_bad_expiries_is_one_error_line(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["prove", "--bmc", "1", "--expiries", "x"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        "isrlab prove: error: argument --expiries: 'x' is not an integer"]
