"""Replay's judgement is its user's: the spec rules a run is judged without come from the
command line (or the in-process caller that planted them), never from the run's headers; the
run's run.json is required; what replay reads and writes is checked before it reads or writes
(regular files, sizes, output paths). The corruptions each check catches are in
model_check/conformance/corrupt.py (tests/test_corruption.py)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import resource
import shutil
from pathlib import Path

import pytest

from impl.config import ClusterConfig
from impl.sim import SimOptions, simulate
from impl.trace import FINAL_LOG_LINE_RECORDS, FINAL_LOGS_FILE, dumps, write_final_logs
from isrlab.cli import main
from model_check.conformance import replay as replay_module
from model_check.conformance.corrupt import cut_short_without_run_json, read_run, write_run
from model_check.conformance.replay import load_texts, read_run_json, replay_run

pytestmark = pytest.mark.xdist_group("test_replay_judgement")


def cli(*args: str) -> tuple[int, str, str]:
    """`isrlab replay ARGS` in-process: exit code, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["replay", *map(str, args)])
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def bug_run(tmp_path_factory) -> Path:
    """A run of the broker that answers fetches without fencing their epochs, whose headers
    claim it is to be judged by the spec without the fencing rule; the full spec refuses one
    of its answers."""
    directory = tmp_path_factory.mktemp("bug") / "run"
    simulate(ClusterConfig(variant="kip-320", bugs=frozenset({"skip-fetch-fencing"})),
             SimOptions(seed=5, duration_ms=10_000, nemesis=("crash", "partition", "pause"),
                        spec_rules_off=("fencing",))).write(directory)
    return directory


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("clean") / "run"
    simulate(ClusterConfig(), SimOptions(seed=3, duration_ms=8_000,
                                         nemesis=("crash", "partition"))).write(directory)
    return directory


def copy(run: Path, tmp_path: Path) -> Path:
    target = tmp_path / "copy"
    shutil.copytree(run, target)
    return target


def test_a_headers_claim_of_rules_off_does_not_choose_the_spec(bug_run, tmp_path):
    header = json.loads((bug_run / "b0.ndjson").read_text().split("\n", 1)[0])
    assert header["config"]["spec_rules_off"] == ["fencing"]
    # Judged by the full variant, as the user asked nothing else: the unfenced answer
    # diverges, and the report says the claim differs from the rules judged by.
    code, out, _ = cli(bug_run)
    assert code == 1 and out.startswith("divergence at")
    assert "the spec answers 'FENCED_LEADER_EPOCH'" in out
    assert ("refused as well: the run's header says it was run without spec rules fencing, and "
            "it was judged without (none)") in out
    # The user chooses the same rules: judged without fencing, accepted.
    code, out, _ = cli(bug_run, "--without", "fencing")
    assert code == 0 and out.startswith("accepted"), out
    # The user's rules without the header's claim: the spec follows, the run is refused.
    run = copy(bug_run, tmp_path)
    for path in [run / "run.json", *run.glob("*.ndjson")]:
        if path.name == "run.json":
            body = json.loads(path.read_text())
            body["config"].pop("spec_rules_off")
            path.write_text(dumps(body) + "\n")
        else:
            header, rest = path.read_text().split("\n", 1)
            body = json.loads(header)
            body["config"].pop("spec_rules_off")
            path.write_text(dumps(body) + "\n" + rest)
    code, out, _ = cli(run, "--without", "fencing")
    assert code == 1 and out.startswith("refused: ")
    assert "says it was run without spec rules (none), and it was judged without fencing" in out
    # The in-process caller passes the rules it planted itself.
    texts = {p.stem: p.read_text() for p in bug_run.glob("*.ndjson")}
    run_json = read_run_json(bug_run / "run.json")
    assert replay_run(load_texts(texts, run_json)).verdict == "divergence"
    assert replay_run(load_texts(texts, run_json), rules_off=("fencing",)).verdict == "accepted"


def test_rules_the_header_does_not_claim_refuse_an_honest_run(clean_run):
    code, out, _ = cli(clean_run, "--without", "fencing")
    assert code == 1
    assert out.startswith("refused: ") and "judged without fencing" in out
    code, _, err = cli(clean_run, "--without", "speed")
    assert code == 2 and err.count("\n") == 1 and "unknown rule 'speed'" in err


def test_run_json_is_required_unless_the_user_opts_out(clean_run, tmp_path):
    run = copy(clean_run, tmp_path)
    (run / "run.json").unlink()
    code, out, err = cli(run)
    assert code == 2 and not out and err.count("\n") == 1 and "--no-run-json" in err
    code, out, err = cli(run, "--no-run-json")
    assert code == 0 and out.startswith("accepted")
    assert "without run.json, not checked: run.json's summary counts" in err


def test_a_run_cut_short_is_refused_even_without_run_json(clean_run, tmp_path):
    cut = write_run(cut_short_without_run_json(read_run(clean_run), None), tmp_path / "cut")
    assert not (cut / "run.json").exists()
    code, out, _ = cli(cut, "--no-run-json")
    assert code == 1 and out.startswith("refused: ") and "cut short" in out


def test_final_logs_beside_run_json_in_bounded_lines(clean_run, tmp_path):
    run = copy(clean_run, tmp_path)
    body = json.loads((run / "run.json").read_text())
    logs = read_run_json(run / "run.json")["final_logs"]
    del body["final_logs_file"]
    body.update(write_final_logs(run, logs))
    (run / "run.json").write_text(dumps(body) + "\n")
    assert body["final_logs_file"] == {"file": FINAL_LOGS_FILE,
                                       "records": {p: len(log) for p, log in logs.items()}}
    lines = [json.loads(x) for x in (run / FINAL_LOGS_FILE).read_text().splitlines()]
    assert lines and all(len(x["records"]) <= FINAL_LOG_LINE_RECORDS for x in lines)
    assert [r for x in lines for r in x["records"]] == [r for log in logs.values() for r in log]
    code, out, _ = cli(run)
    assert code == 0 and out.startswith("accepted")


def test_a_fifo_a_device_and_a_sparse_file_are_refused_without_reading_them(clean_run,
                                                                            tmp_path):
    run = copy(clean_run, tmp_path)
    fifo = run / "b9.ndjson"
    os.mkfifo(fifo)
    code, _, err = cli(run)  # would block forever on open without the check
    assert code == 2 and err.count("\n") == 1 and f"{fifo}: a FIFO, not a regular file" in err
    fifo.unlink()
    (run / "b9.ndjson").symlink_to("/dev/zero")
    code, _, err = cli(run)
    assert code == 2 and "a character device, not a regular file" in err
    (run / "b9.ndjson").unlink()
    with open(run / "b9.ndjson", "wb") as f:
        f.truncate(2 << 30)  # 2 GiB of zeros on no disk
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB
    code, _, err = cli(run)
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak) / 1024
    assert code == 2 and "b9.ndjson:1: a line over the 1048576-byte limit" in err
    assert grown_mib < 256, f"read {grown_mib:.0f} MiB of a file it should have refused"


@pytest.mark.parametrize("target, message", [
    ("/proc/version", "is under /proc"),
    ("/dev/full", "'/dev/full' is a character device, not a regular file"),
    ("/nonexistent-dir/view.html", "is not a directory"),
])
def test_output_paths_are_checked_before_the_work(clean_run, target, message):
    code, out, err = cli(clean_run, "--html", target)
    assert code == 2 and not out, out  # no verdict: the replay never ran
    assert err.count("\n") == 1 and message in err


def test_honest_lines_rarely_take_the_slow_duplicate_key_check(clean_run, monkeypatch):
    """The duplicate-key check parses a line the slow way only when its cheap tests disagree:
    for what the writers write, only on a line that writes out a value its struct omits when
    encoded (`"last":null`, a replica with an empty log)."""
    calls = []
    loads = json.loads

    def counted(*args, **kwargs):
        if "object_pairs_hook" in kwargs:
            calls.append(1)
        return loads(*args, **kwargs)
    monkeypatch.setattr(replay_module.json, "loads", counted)
    code, out, _ = cli(clean_run)
    lines = [line for path in clean_run.glob("*.ndjson") for line in path.read_text().splitlines()]
    with_null = sum('"last":null' in line for line in lines)
    assert code == 0 and 0 < len(calls) <= with_null < len(lines) / 100
