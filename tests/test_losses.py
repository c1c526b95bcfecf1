"""Acknowledged writes lost within the pre-KIP-966 guarantee are said out loud, never silent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from impl.config import ClusterConfig
from impl.sim import SimOptions, simulate
from isrlab.cmd_cluster import losses_note
from model_check.conformance.campaign import CampaignResult, format_summary, run_one
from model_check.conformance.losses import run_losses
from model_check.conformance.replay import read_run_json

pytestmark = pytest.mark.xdist_group("test_losses")  # one worker builds its shared fixtures

# Both followers cut off (the ISR shrinks to {0}), then the leader crashes with its log
# unflushed: the clean election can only wait for broker 0, which comes back empty, and the
# followers truncate to it. Kafka's guarantee before KIP-966 excuses exactly this.
LAST_REPLICA_STANDING = ((2000, "partition", "b1", 5000), (2000, "partition", "b2", 5000),
                         (4500, "crash", "b0", 1000))
OPTIONS = SimOptions(seed=1, duration_ms=12_000, faults=LAST_REPLICA_STANDING, max_faults=3)


@pytest.fixture(scope="module")
def lossy_run(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("lossy")
    simulate(ClusterConfig(), OPTIONS).write(run_dir)
    return run_dir


def _lost_independently(run_dir: Path) -> set[int]:
    acked = {json.loads(line)["value"] for line in (run_dir / "producer.ndjson").open()
             if '"type":"ok"' in line}
    final = read_run_json(run_dir / "run.json")["final_logs"]["0"]
    return acked - {v for _, v in final}


def test_a_run_that_loses_excused_writes_says_how_many_and_where(lossy_run):
    lost = _lost_independently(lossy_run)
    assert len(lost) > 10
    note = losses_note(lossy_run)
    assert note == (f"{len(lost)} acknowledged writes lost: allowed by the pre-KIP-966 "
                    "guarantee (every in-sync replica lost them unflushed), ISR of p0 shrank "
                    "to {0} at 3.5 s")


def test_a_run_without_the_crash_loses_nothing_and_says_nothing(tmp_path):
    options = SimOptions(seed=1, duration_ms=12_000, faults=LAST_REPLICA_STANDING[:2],
                         max_faults=3)
    simulate(ClusterConfig(), options).write(tmp_path)
    assert _lost_independently(tmp_path) == set()
    assert losses_note(tmp_path) is None


def test_a_loss_the_guarantee_does_not_excuse_is_named_as_such(lossy_run):
    history = [json.loads(line) for line in (lossy_run / "producer.ndjson").open()
               if '"kind":"history"' in line]
    final = read_run_json(lossy_run / "run.json")["final_logs"]
    kept = final["0"]
    # The first record of the final log vanishes too, and nothing excuses that one.
    losses = run_losses(history, {"0": kept[1:]}, _lost_independently(lossy_run), [])
    assert losses.unexcused == (kept[0][1],)
    assert losses.note().endswith("; 1 acknowledged writes lost that the guarantee does not "
                                  "excuse")


def test_the_campaign_summary_flags_the_run(lossy_run):
    outcome = run_one(ClusterConfig(), OPTIONS, None, "none")
    assert not outcome.failed  # within the guarantee
    assert outcome.lost_excused == len(_lost_independently(lossy_run))
    text = format_summary(CampaignResult([outcome], 1.0, ClusterConfig()))
    assert f"LOST ACKNOWLEDGED WRITES in 1 of 1 runs ({outcome.lost_excused} excused" in text
    assert f"seed 1: {outcome.lost_excused} acknowledged writes lost: allowed by" in text


def _history_lines(run_dir: Path) -> list[dict]:
    return [json.loads(line) for path in sorted(run_dir.glob("*.ndjson")) for line in path.open()
            if '"kind":"history"' in line]


def test_lost_writes_are_the_history_checker_s_lost_writes(lossy_run):
    """One definition: with the final log, without it (the reads say), and at a moved offset."""
    from model_check.conformance.history import check_history
    from model_check.conformance.losses import final_values
    from vocab.anomalies import LOST_WRITE

    lines = _history_lines(lossy_run)
    final = read_run_json(lossy_run / "run.json")["final_logs"]
    # The last record moved one offset up: its value is still in the log, not where it was
    # acknowledged.
    moved = {"0": [*final["0"][:-1], [final["0"][-1][0] + 1, final["0"][-1][1]]]}
    for logs in (final, {}, moved):
        checked = check_history(lines, final_values(logs))
        expected = sorted(a.values[0] for a in checked.anomalies if a.kind == LOST_WRITE)
        losses = run_losses(lines, logs, (), [])
        assert list(losses.lost) == expected
        assert losses.acked == checked.acked["1"] + checked.acked["all"] > 0
    assert run_losses(lines, {}, (), []).lost  # the reads saw writes lost
    assert len(run_losses(lines, moved, (), []).lost) == len(_lost_independently(lossy_run)) + 1
