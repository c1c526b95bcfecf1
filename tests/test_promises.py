"""What a configuration promises (spec.promises), and every verdict saying it: a promised
invariant broken fails `isrlab check` / `replay` / `campaign`; one not promised is reported as
the configuration's trade-off and does not."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from impl.config import ClusterConfig
from impl.sim import SimOptions, simulate
from isrlab.cli import main
from model_check.conformance.campaign import CampaignResult, format_summary, run_one
from model_check.explore.explorer import explore
from model_check.explore.model import KafkaModel
from spec import INVARIANTS, VARIANTS, Config
from spec.config import config_from_pairs
from spec.promises import TRADE_OFFS, promise, promised

TESTDATA = Path(__file__).parent / "testdata"
KIP966 = {"AckedWritesDurableKip966", "LeaderCandidatesComplete"}


def transcript_violations(name: str) -> set[tuple[str, bool, str]]:
    """(invariant, promised, why) of every violation a catalogue transcript shows, each judged
    by the config of the section it is in."""
    config, found = None, set()
    path = TESTDATA / f"{name}.txt"
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("config "):
            config = config_from_pairs([(f"{path}:{number}", *word.split("=", 1))
                                        for word in line.split()[1:]])
        for invariant in re.findall(r"VIOLATED (\w+)", line):
            p = promise(config, invariant)
            found.add((invariant, p.promised, p.why))
    assert found, f"{name} shows no violation"
    return found


@pytest.mark.parametrize("name, entry", [
    ("b8_last_replica_standing", "B8"),
    ("b9_unclean_election", "B9"),
])
def test_the_catalogue_trade_offs_are_not_promised(name, entry):
    found = transcript_violations(name)
    assert all(not promised_ and why.endswith(f"({entry})") for _, promised_, why in found)


@pytest.mark.parametrize("name, invariants", [
    ("b1_hw_truncation", {"NoCommittedDataLoss", "AckedWritesDurable"}),
    ("b7_stale_broker_epoch", {"NoCommittedDataLoss", "AckedWritesDurable"}),
    ("b11_leader_missed_epoch", {"NoCommittedDataLoss", "AckedWritesDurable"}),
])
def test_the_catalogue_bugs_are_promised(name, invariants):
    found = transcript_violations(name)
    assert {i for i, _, _ in found} == invariants
    assert all(promised_ for _, promised_, _ in found)


def test_b10_acks_1_is_a_trade_off_found_by_the_explorer():
    config = Config(variant=VARIANTS["current"], brokers=2, acks="1", max_records=1,
                    max_crashes=1)
    result = explore(KafkaModel(config, ["AckedWritesDurable"]))
    assert result.violation.invariant == "AckedWritesDurable"
    assert not promise(config, "AckedWritesDurable").promised
    assert promise(config, "AckedWritesDurable").why.endswith("(B10)")
    assert promise(config.replace(acks="all"), "AckedWritesDurable").promised


def test_each_setting_gives_up_only_its_invariants():
    safe = Config(min_insync_replicas=2, eligible_leader_replicas_enable=True)
    assert promised(safe) == list(INVARIANTS)
    for changes, entry in (({"acks": "1"}, "B10"), ({"acks": "0"}, "B10"),
                           ({"unclean_leader_election_enable": True}, "B9"),
                           ({"eligible_leader_replicas_enable": False}, "B8")):
        given_up = set(INVARIANTS) - set(promised(safe.replace(**changes)))
        trade = next(t for t in TRADE_OFFS if t.entry == entry)
        assert given_up == set(trade.invariants), changes
    # A historical variant promises what Kafka promised: its violations are bugs.
    for variant in VARIANTS.values():
        assert promised(safe.replace(variant=variant)) == list(INVARIANTS)
    with pytest.raises(KeyError, match="unknown invariant"):
        promise(safe, "NoSuchInvariant")


# isrlab check ------------------------------------------------------------------------------

BOUNDS = ["--min-isr", "2", "--brokers", "2", "--records", "1", "--epochs", "2",
          "--crashes", "1"]


def check(capsys, *argv: str) -> tuple[int, dict]:
    code = main(["check", *BOUNDS, *argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_check_of_the_safe_config_checks_what_it_promises_and_names_the_rest(capsys):
    code, body = check(capsys, "--variant", "current", "--acks", "all", "--no-unclean")
    assert (code, body["result"]) == (0, "ok")
    assert {n["invariant"] for n in body["not_checked"]} == KIP966
    assert all(n["why"].endswith("(B8)") for n in body["not_checked"])
    assert main(["check", *BOUNDS, "--variant", "current", "--no-unclean"]) == 0
    out = capsys.readouterr().out
    assert ("not checked, not promised by this configuration: AckedWritesDurableKip966, "
            "LeaderCandidatesComplete: eligible leader replicas off") in out


def test_check_of_an_unpromised_invariant_shows_the_trade_off_and_exits_0(capsys):
    code, body = check(capsys, "--variant", "current", "--invariant", "LeaderCandidatesComplete")
    assert (code, body["result"]) == (0, "violation")
    v = body["violation"]
    assert (v["invariant"], v["promised"], len(v["trace"]) - 1) == (
        "LeaderCandidatesComplete", False, 12)
    assert v["why_not_promised"].endswith("(B8)") and body["not_checked"] == []
    assert main(["check", *BOUNDS, "--variant", "current", "--invariant",
                 "LeaderCandidatesComplete"]) == 0
    out = capsys.readouterr().out
    assert "VIOLATED LeaderCandidatesComplete" in out
    assert ("TRADE-OFF: LeaderCandidatesComplete is violated, and is not promised by this "
            "configuration: eligible leader replicas off") in out


def test_with_elr_the_same_invariant_is_promised_and_its_violation_fails(capsys):
    # kip-320 keeps B7 (a replica with a stale broker epoch rejoins the ISR): with ELR on,
    # the candidate it makes incomplete is a bug.
    code, body = check(capsys, "--variant", "kip-320", "--elr", "--invariant",
                       "LeaderCandidatesComplete")
    assert (code, body["violation"]["invariant"], body["violation"]["promised"]) == (
        1, "LeaderCandidatesComplete", True)
    code, body = check(capsys, "--variant", "kip-320", "--elr")
    assert (code, body["violation"]["invariant"], body["not_checked"]) == (
        1, "NoCommittedDataLoss", [])
    assert main(["check", *BOUNDS, "--variant", "kip-320", "--elr"]) == 1
    assert ("VIOLATION of NoCommittedDataLoss, which this configuration promises: a bug"
            in capsys.readouterr().out)


def test_junit_skips_a_trade_off_and_fails_a_bug(capsys, tmp_path):
    report = tmp_path / "junit.xml"
    assert main(["check", *BOUNDS, "--variant", "current", "--invariant",
                 "LeaderCandidatesComplete", "--junit", str(report)]) == 0
    text = report.read_text(encoding="utf-8")
    assert 'failures="0"' in text and "<skipped message=\"TRADE-OFF" in text
    assert main(["check", *BOUNDS, "--variant", "kip-320", "--elr", "--invariant",
                 "LeaderCandidatesComplete", "--junit", str(report)]) == 1
    text = report.read_text(encoding="utf-8")
    assert 'failures="1"' in text and "<skipped" not in text


# isrlab replay -----------------------------------------------------------------------------


def test_replay_of_a_run_breaking_a_promised_invariant_exits_1(capsys, tmp_path):
    # B1 driven through the hw-truncation broker: the acknowledged v2 is lost, a bug of that
    # variant (Kafka promised it).
    run = tmp_path / "b1"
    assert main(["drive", str(TESTDATA / "b1_hw_truncation.txt"), "--variant", "hw-truncation",
                 "--out", str(run)]) == 1
    capsys.readouterr()
    assert main(["replay", str(run)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("accepted: ")
    assert ("spec invariant AckedWritesDurable violated in the replayed state, which this "
            "configuration promises (a bug)") in out
    assert main(["replay", str(run), "--json"]) == 1
    body = json.loads(capsys.readouterr().out)
    assert [(v["invariant"], v["promised"]) for v in body["invariant_violations"]] == [
        ("AckedWritesDurable", True)]


ISR_KILL = SimOptions(seed=5, duration_ms=30_000, nemesis=("isr-kill",))


def test_replay_of_a_run_breaking_an_unpromised_invariant_exits_0_with_the_trade_off(
        capsys, tmp_path):
    # B8 on the broker: the lone ISR member loses power and comes back empty; ELR is off.
    simulate(ClusterConfig(), ISR_KILL).write(tmp_path)
    assert main(["replay", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    trade_offs = [line for line in out.splitlines() if line.startswith("TRADE-OFF: ")]
    assert {line.split()[3] for line in trade_offs} == KIP966
    assert all("not promised by this configuration: eligible leader replicas off" in line
               and "(B8)" in line for line in trade_offs)
    assert "promises (a bug)" not in out


# isrlab campaign ---------------------------------------------------------------------------


def test_campaign_counts_trade_offs_apart_from_broken_promises():
    outcome = run_one(ClusterConfig(), ISR_KILL, None, "none")
    assert not outcome.failed and outcome.kip966_violations == 2
    result = CampaignResult([outcome], 1.0, ClusterConfig())
    summary = result.summary()
    assert summary["broken_promises"] == {}
    assert set(summary["trade_offs"]) == KIP966
    assert all(t["runs"] == 1 and t["why"].endswith("(B8)")
               for t in summary["trade_offs"].values())
    text = format_summary(result)
    assert ("TRADE-OFF: AckedWritesDurableKip966 violated in 1 of 1 runs, not promised by this "
            "configuration: eligible leader replicas off") in text
