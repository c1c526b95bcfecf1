"""Relative paths on the command line name places under the directory the user is in, not
under the repository root where node processes start; every path flag is made absolute where
the options are parsed (isrlab.options.absolute_path)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from isrlab.cli import build_parser

ISRLAB = Path(sys.executable).with_name("isrlab")


def isrlab(cwd: Path, *argv: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([str(ISRLAB), *argv], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


def test_cluster_sim_writes_its_traces_under_the_users_directory(tmp_path):
    done = isrlab(tmp_path, "cluster", "sim", "--duration", "2s", "--trace-out", "rel/sim")
    assert done.returncode == 0, done.stderr
    traces = sorted(p.name for p in (tmp_path / "rel" / "sim").glob("*.ndjson"))
    assert "b0.ndjson" in traces and "producer.ndjson" in traces
    assert f"traces: {tmp_path / 'rel' / 'sim'}/" in done.stdout


@pytest.mark.serial
def test_cluster_tcp_writes_its_traces_under_the_users_directory(tmp_path):
    done = isrlab(tmp_path, "cluster", "tcp", "--brokers", "3", "--duration", "2s",
                  "--trace-out", "k/")
    assert done.returncode == 0, done.stderr
    run_dir = tmp_path / "k"
    for node in ("b0", "b1", "b2", "meta"):
        assert (run_dir / f"{node}.ndjson").is_file(), sorted(p.name for p in run_dir.iterdir())
    assert json.loads((run_dir / "run.json").read_text())["mode"] == "tcp"


def test_campaign_writes_its_runs_under_the_users_directory(tmp_path):
    done = isrlab(tmp_path, "campaign", "--runs", "2", "--duration", "2s", "--keep", "all",
                  "--workers", "1", "--out", "rel/")
    assert done.returncode == 0, done.stdout + done.stderr
    out = tmp_path / "rel"
    assert json.loads((out / "campaign.json").read_text())["runs"] == 2
    assert sorted(p.name for p in out.glob("run-*")) == ["run-1", "run-2"]


@pytest.mark.serial
def test_a_campaign_of_kafka_clients_writes_its_runs_under_the_users_directory(tmp_path):
    done = isrlab(tmp_path, "campaign", "--clients", "kafka-python", "--runs", "1",
                  "--count", "20", "--out", "kc/")
    # A run that could not start (a path the cluster cannot write) has no result.json; a
    # run's own finding (exit 1) is the campaign tests' subject, not this one's.
    assert done.returncode in (0, 1), done.stdout + done.stderr
    run_dir = tmp_path / "kc" / "run-1"
    assert (run_dir / "result.json").is_file(), done.stdout + done.stderr
    assert json.loads((run_dir / "result.json").read_text())["clients"] == ["kafka-python"]
    assert (run_dir / "kafka-python.ndjson").is_file() and (run_dir / "b0.ndjson").is_file()
    assert (tmp_path / "kc" / "campaign.json").is_file()


def _path_actions(parser: argparse.ArgumentParser, where: str = "isrlab"):
    """(command, flag, type) of every option and positional of every (sub)command."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _path_actions(sub, f"{where} {name}")
        else:
            yield where, action.option_strings[0] if action.option_strings else action.dest, \
                action


# Flags that name a file or directory a child process or a later step may open.
PATH_FLAGS = {"--trace-out", "--out", "--config", "--itf", "--junit", "--html", "--mermaid",
              "--lemmas-file", "--save-lemmas"}


def test_every_path_flag_is_made_absolute_where_it_is_parsed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x").mkdir()
    seen = []
    for where, flag, action in _path_actions(build_parser()):
        if flag not in PATH_FLAGS or where == "isrlab analyze":
            continue  # analyze's flags are pyspark_harness's, which resolves --out itself
        seen.append(f"{where} {flag}")
        assert action.type is not None, f"{where} {flag} keeps a relative path"
        # A file flag's type checks the file (an input must exist); a directory's, that no
        # file is in its way.
        if getattr(action.type, "__name__", "") == "file":
            (tmp_path / "x" / "y").write_text("")
        else:
            (tmp_path / "x" / "y").unlink(missing_ok=True)
        assert action.type("x/y") == str(tmp_path / "x" / "y"), f"{where} {flag}"
    assert "isrlab cluster tcp --trace-out" in seen and "isrlab campaign --out" in seen


def test_an_empty_path_is_one_error_line(tmp_path):
    done = isrlab(tmp_path, "cluster", "sim", "--trace-out", "")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "isrlab cluster sim: error: argument --trace-out: an empty path"]
