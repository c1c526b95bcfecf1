"""Progress displays: live on a terminal, a plain line now and then otherwise, none when quiet."""

from __future__ import annotations

import io
import json

from isrlab.cli import main
from model_check.explore.progress import Progress, campaign_progress, search_progress


class _Outcome:
    def __init__(self, failed: bool, events: int):
        self.failed, self.events = failed, events


def test_plain_lines_say_counts_figures_and_eta():
    out = io.StringIO()
    with Progress("runs", total=4, stream=out, tty=False, interval=0) as progress:
        show = campaign_progress(progress)
        show(_Outcome(False, 100), 1, 4)
        show(_Outcome(True, 50), 2, 4)
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[1].startswith("runs: 2/4  failures 1  events 150") and "eta" in lines[1]


def test_a_quick_run_writes_no_plain_line():
    out = io.StringIO()
    with Progress("states", stream=out, tty=False) as progress:  # 10 s between lines
        search_progress(progress)(dict(distinct=5, depth=1, queue=3, generated=9))
    assert out.getvalue() == ""


def test_quiet_and_the_environment_switch_write_nothing(monkeypatch):
    for quiet, env in ((True, None), (False, "1")):
        if env:
            monkeypatch.setenv("ISRLAB_NO_PROGRESS", env)
        out = io.StringIO()
        with Progress("runs", total=2, stream=out, tty=True, quiet=quiet, interval=0) as p:
            p.update(1, failures=0)
        assert out.getvalue() == ""


def test_a_terminal_gets_the_live_display():
    out = io.StringIO()
    with Progress("states", stream=out, tty=True) as progress:
        search_progress(progress)(dict(distinct=1234, depth=7, queue=56, generated=4000))
    text = out.getvalue()
    assert "states" in text and "depth 7" in text and "queue 56" in text


def test_check_json_keeps_stderr_free_of_progress(capsys):
    code = main(["check", "--variant", "current", "--brokers", "2", "--records", "1",
                 "--epochs", "2", "--json"])
    captured = capsys.readouterr()
    assert code == 0 and json.loads(captured.out)["result"] == "ok"
    assert captured.err == ""
