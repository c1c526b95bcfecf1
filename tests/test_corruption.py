"""Replay against corrupted real runs: every corruption that changes a run's meaning is
rejected with one message, controls are accepted, and nothing ends in a traceback."""

from __future__ import annotations

import contextlib
import io
import json
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from impl.config import ClusterConfig
from impl.sim import SimOptions, simulate
from isrlab.cli import main
from model_check.conformance.corrupt import KINDS, Files, leaf_paths, read_run, write_run

pytestmark = pytest.mark.xdist_group("test_corruption")  # one worker builds its shared fixtures

SEED = 11


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory) -> Files:
    run_dir = tmp_path_factory.mktemp("clean")
    result = simulate(ClusterConfig(), SimOptions(seed=SEED, duration_ms=6_000,
                                                  nemesis=("crash", "partition"), max_faults=2))
    result.write(run_dir)
    return read_run(run_dir)


def replay(files: Files, run_dir: Path) -> tuple[int, str]:
    """`isrlab replay` in-process: its exit code and what it printed on stderr."""
    write_run(files, run_dir)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["replay", str(run_dir)])
    return code, err.getvalue() + out.getvalue()


def test_the_clean_run_is_accepted_and_exercises_what_the_corruptions_touch(clean_run,
                                                                            tmp_path):
    code, text = replay(clean_run, tmp_path)
    assert code == 0, text
    producer = [json.loads(line) for line in clean_run["producer.ndjson"].splitlines()]
    consumer = [json.loads(line) for line in clean_run["consumer.ndjson"].splitlines()]
    assert sum(b.get("type") == "ok" for b in producer) > 50
    assert sum(bool(b.get("records")) for b in consumer) > 10
    summary = json.loads(clean_run["run.json"])["summary"]
    assert summary["crashes"] + summary["partitions"] >= 1


@pytest.mark.parametrize("kind", KINDS, ids=[k.name for k in KINDS])
def test_each_kind_of_corruption(kind, clean_run, tmp_path):
    corrupted = kind.apply(clean_run, random.Random(SEED))
    assert corrupted is not None, f"the clean run has nothing for {kind.name!r} to corrupt"
    assert corrupted != clean_run
    code, text = replay(corrupted, tmp_path)
    assert "Traceback" not in text
    if kind.changes_meaning:
        assert code in (1, 2), f"{kind.name}: accepted\n{text[:400]}"
        if code == 2:
            assert len(text.strip().splitlines()) == 1, text[:400]
    else:
        assert code == 0, f"{kind.name}: rejected\n{text[:400]}"


_replacement = st.one_of(st.none(), st.booleans(), st.integers(-3, 10**6),
                         st.text(max_size=6), st.just([]), st.just({}))


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_field_changes_never_end_in_a_traceback(data, clean_run, tmp_path):
    files = dict(clean_run)
    for _ in range(data.draw(st.integers(1, 3), label="changes")):
        name = data.draw(st.sampled_from(sorted(files)), label="file")
        lines = files[name].splitlines()
        if name == "run.json":
            i = 0
        else:
            i = data.draw(st.integers(0, len(lines) - 1), label="line")
        body = json.loads(lines[i])
        path = data.draw(st.sampled_from(list(leaf_paths(body))), label="field")
        target = body
        for key in path[:-1]:
            target = target[key]
        if path:
            target[path[-1]] = data.draw(_replacement, label="value")
        lines[i] = json.dumps(body).encode()
        files[name] = b"\n".join(lines) + b"\n"
    run_dir = tmp_path / f"r{data.draw(st.integers(0, 10**9), label='dir')}"
    code, text = replay(files, run_dir)
    assert code in (0, 1, 2)
    assert "Traceback" not in text


def test_a_second_fetch_in_flight_to_the_same_leader_diverges(clean_run, tmp_path):
    """Replay lets a follower fetch again while its last fetch is in flight only when that
    fetch went to another leader or the run logs its loss; a copy of a fetch to the same
    leader with no drop logged is still a divergence the spec names."""
    lines = clean_run["b1.ndjson"].decode().splitlines()
    i = next(k for k, line in enumerate(lines) if '"FollowerSendFetch"' in line)
    first = json.loads(lines[i])
    again = dict(first, send=["b1:m999999"], seq=first["seq"] + 1)
    rest = [json.dumps(dict(b, seq=b["seq"] + 1) if "seq" in b else b)
            for b in map(json.loads, lines[i + 1:])]
    files = dict(clean_run)
    files["b1.ndjson"] = ("\n".join(lines[:i + 1] + [json.dumps(again)] + rest) + "\n").encode()
    run = json.loads(files["run.json"])
    run["summary"]["events"] += 1
    files["run.json"] = json.dumps(run).encode()
    code, text = replay(files, tmp_path)
    assert code == 1, text
    assert "spec refuses FollowerSendFetch(partition=0, broker=1)" in text
    assert "in flight" in text
