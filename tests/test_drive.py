"""`isrlab drive`: spec schedules imposed on the reference broker (model_check/conformance/drive.py).

Each catalogue bug the broker can follow is driven through the broker of the buggy setting,
where the client history shows the loss, and through the fixed one, where the same schedule is
refused or harmless. Every driven run is replayed against the spec, so a driven run that is
not a spec behaviour fails here too.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from isrlab.cli import main

TRANSCRIPT_B1 = Path(__file__).parent / "testdata" / "b1_hw_truncation.txt"


def _cex(capsys, tmp_path: Path, options: str) -> Path:
    """A counterexample of `isrlab check` with these options (split at spaces), written as
    `--json` prints it (exit 1 for a bug of the configuration, 0 for its trade-off)."""
    code = main(["check", *options.split(), "--json"])
    text = capsys.readouterr().out
    assert code == (1 if json.loads(text)["violation"]["promised"] else 0)
    path = tmp_path / "cex.json"
    path.write_text(text, encoding="utf-8")
    return path


def _drive(capsys, tmp_path: Path, schedule: Path, *argv: str) -> tuple[int, dict]:
    code = main(["drive", str(schedule), "--json", "--out", str(tmp_path / "run"), *argv])
    return code, json.loads(capsys.readouterr().out)


def _cex_that_loses_v1(capsys, tmp_path: Path, options: str, steps: int) -> tuple[Path, dict]:
    """The counterexample of `isrlab check` with these options (_cex), driven on the broker of
    the same setting: it follows all `steps` steps, the run replays, v1 is lost and drive
    exits 1. Returns the counterexample and the report."""
    cex = _cex(capsys, tmp_path, options)
    code, report = _drive(capsys, tmp_path, cex)
    assert (report["followed"], report["total"]) == (steps, steps)
    assert report["replay"] == "accepted"
    assert _lost(report) == [1] and code == 1
    return cex, report


def _lost(report: dict) -> list[int]:
    """The values of lost acknowledged writes (a detail's values: the lost one, then what the
    final log holds at its offset, if anything)."""
    return sorted(d["values"][0] for d in report["history"]["details"]
                  if d["kind"] == "lost-write")


@pytest.mark.parametrize("variant, lost", [
    ("hw-truncation", [2]),
    ("kip-101", []),
])
def test_b1_transcript_on_each_broker(variant, lost, capsys, tmp_path):
    code, report = _drive(capsys, tmp_path, TRANSCRIPT_B1, "--variant", variant)
    assert (report["followed"], report["total"], report["stuck"]) == (46, 46, None)
    assert report["replay"] == "accepted"
    assert report["history"]["acked"]["all"] == 2
    assert _lost(report) == lost
    assert code == (1 if lost else 0)


def test_b10_acks_1_loses_the_write_and_acks_all_never_acknowledges_it(capsys, tmp_path):
    cex, report = _cex_that_loses_v1(capsys, tmp_path, "--variant current --acks 1 --brokers 2 "
                                     "--records 1 --epochs 2 --crashes 1 "
                                     "--invariant AckedWritesDurable", steps=4)
    # The leader's session expired while it ran: the driver cut it off from the store.
    assert "cut b0-meta (quiet)" in report["inputs"]

    code, report = _drive(capsys, tmp_path, cex, "--acks", "all")
    assert (report["followed"], report["total"]) == (4, 4)
    assert report["history"]["acked"]["all"] == 0 and _lost(report) == [] and code == 0


def test_b9_unclean_election_loses_the_write_and_clean_election_refuses(capsys, tmp_path):
    cex, _ = _cex_that_loses_v1(capsys, tmp_path, "--variant current --unclean --brokers 2 "
                                "--records 1 --epochs 3 --crashes 2 "
                                "--invariant AckedWritesDurable", steps=9)

    code, report = _drive(capsys, tmp_path, cex, "--clean")
    assert report["followed"] == 8
    assert report["stuck"]["action"] == "BecomeLeader"
    assert report["stuck"]["args"]["broker"] == 0
    # The partition stays offline: the store elects nobody, so nothing the broker could do
    # next is the election.
    assert not any("BecomeLeader" in " ".join(o["spec_steps"])
                   for o in report["stuck"]["instead"])
    assert report["replay"] == "accepted" and _lost(report) == [] and code == 0


def test_a_step_the_broker_never_takes_is_reported_side_by_side(capsys, tmp_path):
    # B7 as the spec has it: the leader re-admits a follower from a fetch it remembers from
    # before the follower's crash. The reference broker decides expansion only when a fetch
    # arrives, and a crash loses the fetches in flight, so it cannot take that step.
    cex = _cex(capsys, tmp_path, "--variant kip-320 --brokers 2 --records 1 --epochs 2 "
               "--crashes 1")
    code, report = _drive(capsys, tmp_path, cex)
    stuck = report["stuck"]
    assert (report["followed"], report["total"]) == (10, 12)
    assert (stuck["action"], stuck["args"]) == (
        "LeaderExpandIsr", {"broker": 0, "follower": 1, "partition": 0})
    assert stuck["implementation"]["b0"][0]["isr"] == [0]
    assert "isr=(0,)" in stuck["spec_state"]
    assert stuck["instead"] and not any(
        "LeaderExpandIsr" in " ".join(o["spec_steps"]) for o in stuck["instead"])
    assert report["replay"] == "accepted" and code == 0


def test_the_driver_follows_only_the_schedule_it_is_given(capsys, tmp_path):
    # The B10 schedule with its last step's broker changed: broker 0 cannot be elected while
    # cut off, so the driver stops there instead of taking the step that is possible.
    cex = _cex(capsys, tmp_path, "--variant current --acks 1 --brokers 2 --records 1 --epochs 2 "
               "--crashes 1 --invariant AckedWritesDurable")
    body = json.loads(cex.read_text(encoding="utf-8"))
    last = body["violation"]["trace"][-1]
    assert (last["action"], last["args"]["broker"]) == ("BecomeLeader", 1)
    last["args"]["broker"] = 0
    cex.write_text(json.dumps(body), encoding="utf-8")
    code, report = _drive(capsys, tmp_path, cex)
    assert report["followed"] == 3 and report["stuck"]["action"] == "BecomeLeader"
    assert ["BecomeLeader(partition=0, broker=1, leader_epoch=1, partition_epoch=1)"] in [
        o["spec_steps"] for o in report["stuck"]["instead"]]


@pytest.mark.parametrize("text, needle", [
    (None, "No such file"),
    ('{"config": {"brokers": "2"}, "violation": null}', "no counterexample trace"),
    ("{not json", "Expecting property name"),
])
def test_bad_schedules_are_one_line_and_exit_2(text, needle, capsys, tmp_path):
    path = tmp_path / "cex.json"
    if text is not None:
        path.write_text(text, encoding="utf-8")
    assert main(["drive", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("isrlab drive: ") and needle in err and "\n" not in err


def test_a_setting_the_broker_lacks_is_refused(capsys, tmp_path):
    path = tmp_path / "cex.json"
    path.write_text(json.dumps({
        "config": {"variant": "current", "brokers": "2", "isr.changes.async": "true"},
        "violation": {"trace": [{"action": None, "args": {}}]}}), encoding="utf-8")
    assert main(["drive", str(path)]) == 2
    assert "isr.changes.async=true" in capsys.readouterr().err


def test_b5_found_with_a_rule_switched_off_and_driven_through_the_planted_bug(capsys, tmp_path):
    # `check --without` makes the mutant; the broker's planted bug of the same meaning follows
    # its counterexample, and the driven run is judged by the spec without that rule.
    cex = _cex(capsys, tmp_path, "--variant current --without expand_requires_epoch_start "
               "--brokers 2 --min-isr 2 --records 1 --epochs 3 --crashes 1 "
               "--invariant AckedWritesDurable")
    body = json.loads(cex.read_text(encoding="utf-8"))
    assert body["variant"] == "current+expand_requires_epoch_start=False"
    assert len(body["violation"]["trace"]) - 1 == 18
    code, report = _drive(capsys, tmp_path, cex)
    assert report["bugs"] == ["expand-without-epoch-start"]
    assert (report["followed"], report["total"]) == (18, 18)
    assert report["replay"] == "accepted"
    assert _lost(report) == [1] and code == 1

    # The same run judged by `current` itself: the stale expansion is refused.
    run = tmp_path / "run"
    for path in run.iterdir():
        text = path.read_text(encoding="utf-8")
        path.write_text(text.replace('"spec_rules_off":["expand_requires_epoch_start"],', ""),
                        encoding="utf-8")
    assert main(["replay", str(run)]) == 1
    assert "0 is below the epoch start 1" in capsys.readouterr().out
    # A header naming a rule the spec does not have is refused, not ignored.
    for path in run.iterdir():
        text = path.read_text(encoding="utf-8")
        path.write_text(text.replace('"bugs":["expand-without-epoch-start"]',
                                     '"bugs":["expand-without-epoch-start"],'
                                     '"spec_rules_off":["speed"]'), encoding="utf-8")
    assert main(["replay", str(run)]) == 2
    err = capsys.readouterr().err
    assert "spec_rules_off" in err and "speed" in err

    # The fixed broker refuses the step.
    code, report = _drive(capsys, tmp_path, cex, "--variant", "current")
    assert report["bugs"] == [] and report["followed"] == 15
    assert report["stuck"]["action"] == "LeaderExpandIsr"
    assert _lost(report) == [] and code == 0


def test_b7_the_stale_expansion_in_flight_loses_writes_on_kip_320_and_current_refuses_it(
        capsys, tmp_path):
    # The order the broker can take: the expansion is decided from the follower's fetch, and
    # its AlterIsr is accepted by the store after the follower crashed and restarted empty.
    transcript = TRANSCRIPT_B1.parent / "b7_stale_broker_epoch.txt"
    code, report = _drive(capsys, tmp_path, transcript)
    assert (report["followed"], report["total"]) == (29, 29)
    assert report["replay"] == "accepted" and code == 1
    assert report["violation"]["invariant"] == "NoCommittedDataLoss"
    assert report["violation"]["followed"] == 26  # the accepted expansion
    assert _lost(report) == [1, 2]

    code, report = _drive(capsys, tmp_path, transcript, "--variant", "current")
    # The store answers STALE_BROKER_EPOCH: broker 1 stays out of the ISR.
    assert report["followed"] == 25 and report["stuck"]["action"] == "LeaderExpandIsr"
    assert report["stuck"]["implementation"]["b0"][0]["isr"] == [0]
    assert report["violation"] is None and _lost(report) == [] and code == 0


@pytest.mark.slow
def test_b3_found_from_the_initial_state_is_served_stale_on_kip_279_and_fenced_on_kip_320(
        capsys, tmp_path):
    # Two brokers with the rules that fix B5 and B7 switched on (`--with`): the shortest
    # violation of kip-279 is B3, and the check drives it through the broker at once.
    cex = _cex(capsys, tmp_path, "--variant kip-279 --with broker_epochs "
               "--with expand_requires_epoch_start --brokers 2 --records 2 --crashes 2 "
               "--epochs 4 --expiries 0 --drive")
    body = json.loads(cex.read_text(encoding="utf-8"))
    assert (body["violation"]["invariant"], body["depth"]) == ("NoCommittedDataLoss", 19)
    # Broker 1 fetches in epoch 1 from broker 0, leader again in epoch 3 with v2 where broker 1
    # holds v1, and is served as caught up.
    stale = [s for s in body["violation"]["trace"] if s.get("action") == "LeaderHandleFetch"]
    assert stale[-1]["args"] == {"broker": 0, "follower": 1, "partition": 0}
    driven = body["drive"]
    assert driven["variant"] == "kip-279" and driven["replay"] == "accepted"
    assert (driven["followed"], driven["total"]) == (19, 19)
    assert driven["violation"]["invariant"] == "NoCommittedDataLoss"

    # The kip-320 broker fences the stale fetch (FENCED_LEADER_EPOCH): no expansion follows.
    code, report = _drive(capsys, tmp_path, cex, "--variant", "kip-320")
    assert report["followed"] == 18 and report["stuck"]["action"] == "LeaderExpandIsr"
    assert report["violation"] is None and code == 0


@pytest.mark.parametrize("argv, needle", [
    (["--without", "speed"], "unknown rule 'speed'"),
    (["--variant", "hw-truncation", "--without", "fencing"],
     "the variant hw-truncation does not have that rule"),
    (["--with", "speed"], "unknown rule 'speed'"),
    (["--variant", "current", "--with", "fencing"], "the variant current already has that rule"),
    (["--variant", "kip-101", "--with", "fencing", "--without", "fencing"],
     "--with and --without name the same rule: fencing"),
])
def test_with_and_without_name_a_rule_the_variant_has_or_lacks(argv, needle, capsys):
    assert main(["check", *argv, "--records", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("isrlab check: ") and needle in err and "\n" not in err


def test_b2_logs_diverge_on_hw_truncation_and_converge_on_kip_279(capsys, tmp_path):
    transcript = TRANSCRIPT_B1.parent / "b2_divergence_after_hard_failures.txt"
    code, report = _drive(capsys, tmp_path, transcript)
    assert (report["followed"], report["total"]) == (25, 25)
    assert report["replay"] == "accepted" and code == 1
    kinds = {d["kind"]: d["values"] for d in report["history"]["details"]}
    # v1 and v3 both acknowledged at offset 0; the returning broker kept v1 there and rejoined
    # the ISR: the new leader's acknowledged v3 is gone.
    assert kinds["inconsistent-offsets"] == [1, 3] and kinds["lost-write"] == [3, 1]

    code, report = _drive(capsys, tmp_path, transcript, "--variant", "kip-279")
    assert report["followed"] == 24 and report["stuck"]["action"] == "LeaderExpandIsr"
    # The returning broker truncated v1 (KIP-279) and is not caught up yet. What is lost is
    # v1, which both replicas lost unflushed in the double crash (the spec excuses it); v3,
    # the new leader's write, is kept.
    assert _lost(report) == [1]
    assert [d["values"] for d in report["history"]["details"] if d["kind"] == "lost-write"] == [
        [1, 3]]


def test_b8_last_replica_standing_and_elr(capsys, tmp_path):
    cex, _ = _cex_that_loses_v1(capsys, tmp_path, "--variant current --brokers 2 --min-isr 2 "
                                "--records 1 --epochs 3 --crashes 1 "
                                "--invariant AckedWritesDurableKip966", steps=14)

    code, report = _drive(capsys, tmp_path, cex, "--elr")
    assert report["followed"] == 12 and report["stuck"]["action"] == "ControllerElectLeader"
    assert _lost(report) == [] and code == 0


def test_check_drive_runs_the_counterexample_it_found(capsys):
    # B10 is acks=1's trade-off: shown (and driven), exit 0.
    assert main(["check", "--variant", "current", "--acks", "1", "--brokers", "2", "--records",
                 "1", "--epochs", "2", "--crashes", "1", "--invariant", "AckedWritesDurable",
                 "--drive", "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["violation"]["invariant"] == "AckedWritesDurable"
    assert (body["drive"]["followed"], body["drive"]["total"]) == (4, 4)
    assert body["drive"]["history"]["anomalies"]["lost-write"] == 1


def test_check_drive_needs_the_kafka_model(capsys):
    assert main(["check", "--model", "tla-compat", "--drive"]) == 2
    assert "--drive: only the kafka model" in capsys.readouterr().err
