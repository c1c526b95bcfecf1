"""The client-level conformance suite (model_check/conformance/wire_suite.py): what the reference broker
answers each step, that a broker answering otherwise is reported, and the two door changes
the suite found against Apache Kafka (an acks=0 refusal closes the connection; ListOffsets
earliest carries the first record's epoch). bench/conformance_bench.py sets the same steps
against Apache Kafka."""

from __future__ import annotations

import pytest

from impl.config import ClusterConfig
from impl.kafka.codec import parse_request
from impl.kafka.door import KafkaDoor, earliest_epoch
from impl.protocol.broker import BrokerCore
from impl.protocol.meta import MetaCore
from model_check.conformance.wire_suite import (
    FETCH,
    GROUPS,
    PRODUCE,
    Answer,
    ConformanceError,
    _batch,
    _request_bytes,
    cluster,
    common_versions,
    differences,
    run_suite,
    table,
)

# What the reference broker answers (`isrlab cluster tcp --brokers 3 --partitions 1
# --min-isr 3`). Apache Kafka 4.4 answers the same but for acks=1 (NONE), acks=0 (connection
# kept, appended) and a fetch from a follower (NONE, records from offset 0): docs/kafka.md.
REFERENCE = {
    "produce acks=all": "NONE",
    "produce acks=1": "INVALID_REQUIRED_ACKS",
    "produce acks=0": "no response, connection closed, not appended",
    "fetch inside the log": "NONE, records from offset 0",
    "fetch at the log end": "NONE, no records",
    "fetch beyond the log end": "OFFSET_OUT_OF_RANGE",
    "fetch from a follower": "NOT_LEADER_OR_FOLLOWER",
    "list offsets earliest": "NONE, offset 0, epoch the leader epoch",
    "list offsets latest": "NONE, offset the high watermark, epoch the leader epoch",
    "produce to a follower": "NOT_LEADER_OR_FOLLOWER",
    "metadata from that follower": "NONE, names the leader",
    "produce acks=all, ISR below min.insync.replicas": "NOT_ENOUGH_REPLICAS",
    "metadata after the leader is killed": "NONE, a new leader, a higher epoch",
    "offset for the old leader epoch": "NONE, epoch the old, end offset the old log end",
    "offset for the current leader epoch": "NONE, epoch the current, end offset the log end",
    "fetch with the fenced leader epoch": "FENCED_LEADER_EPOCH",
    "fetch with the current leader epoch": "NONE",
    "fetch with the future leader epoch": "UNKNOWN_LEADER_EPOCH",
    "list offsets with the fenced leader epoch": "FENCED_LEADER_EPOCH",
    "list offsets with the future leader epoch": "UNKNOWN_LEADER_EPOCH",
    "list offsets earliest after the leader change": "NONE, epoch the old epoch",
    "list offsets latest after the leader change": "NONE, epoch the leader epoch",
}
MIN_ISR_STEP = "produce acks=all, ISR below min.insync.replicas"


@pytest.mark.serial
def test_the_reference_broker_answers_every_step(tmp_path):
    with cluster("reference", tmp_path / "run") as target:
        assert sorted(target.control.pids) == [0, 1, 2]  # kafka.json names each broker's pid
        answers = run_suite(target.bootstrap, target.topic, target.control)
    assert [a.step for a in answers] == list(REFERENCE)
    assert differences(answers, REFERENCE) == []
    assert len(target.control.killed) == 1 and not target.control.paused


@pytest.mark.serial
def test_a_broker_that_ignores_min_isr_is_reported_as_differing(tmp_path):
    with cluster("reference", tmp_path / "run", ("--bug", "ignore-min-isr")) as target:
        answers = run_suite(target.bootstrap, target.topic, target.control,
                            groups=("min-isr",))
    # The write is taken, but the HW does not pass it while the ISR is below min.insync.replicas
    # (KAFKA-15583's rule, which the bug leaves alone), so the producer hears a time-out.
    assert differences(answers, {MIN_ISR_STEP: REFERENCE[MIN_ISR_STEP]}) == [
        (MIN_ISR_STEP, "REQUEST_TIMED_OUT", "NOT_ENOUGH_REPLICAS")]


def test_differences_name_every_step_answered_otherwise_or_not_run():
    ran = [Answer("a", "NONE"), Answer("b", "FENCED_LEADER_EPOCH"), Answer("c", "NONE")]
    assert differences(ran, [Answer("a", "NONE"), Answer("b", "UNKNOWN_LEADER_EPOCH"),
                             Answer("d", "NONE")]) == [
        ("b", "FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH"), ("c", "NONE", "(not run)"),
        ("d", "(not run)", "NONE")]
    assert differences(ran, {a.step: a.answer for a in ran}) == []
    lines = table({"reference": ran, "kafka": ran[:1] + [Answer("b", "NONE")]}).splitlines()
    assert lines[0].split() == ["step", "reference", "kafka"]
    assert lines[1].split()[-1] == "same" and lines[2].split()[-1] == "DIFFERS"
    assert lines[3].endswith("(not run)  DIFFERS")


def test_versions_are_the_highest_every_target_and_the_suite_serve():
    reference = {PRODUCE: (3, 9), FETCH: (4, 12), 2: (1, 7), 3: (1, 12), 23: (2, 4)}
    kafka = {PRODUCE: (3, 13), FETCH: (4, 18), 2: (1, 10), 3: (0, 13), 23: (2, 4)}
    assert common_versions(reference, kafka) == {PRODUCE: 9, FETCH: 12, 2: 7, 3: 12, 23: 4}
    assert common_versions(kafka)[FETCH] == 12  # v13 names topics by id: not filled here
    with pytest.raises(ConformanceError, match="Produce: no version every target serves"):
        common_versions(reference, {**kafka, PRODUCE: (10, 13)})
    with pytest.raises(ConformanceError, match="^no group 'nope' "):
        run_suite("127.0.0.1:1", "t", None, groups=("nope",))
    assert GROUPS[-2:] == ("leader-change", "epochs")  # a stale epoch needs a leader change


def _door(acks: str) -> KafkaDoor:
    config = ClusterConfig(brokers=1, partitions=1, min_insync_replicas=1, acks=acks)
    core = BrokerCore(0, config)
    core.bootstrap([MetaCore(config).initial_view(0)])
    return KafkaDoor(0, config, {0: 19092}, "isrlab", core)


def _produce(door: KafkaDoor, acks: int, topic: str = "isrlab"):
    body = {"transactional_id": None, "acks": acks, "timeout": 1000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": _batch([b"7"])}]}]}
    return door.on_request(parse_request(_request_bytes(PRODUCE, 9, 1, body)[4:]))


def test_an_acks_0_produce_the_door_refuses_closes_its_connection():
    refused = _produce(_door("all"), 0)
    assert refused.reply is None and refused.inputs == []
    assert refused.close == "an acks=0 produce was refused (INVALID_REQUIRED_ACKS)"
    assert "UNKNOWN_TOPIC_OR_PARTITION" in _produce(_door("0"), 0, topic="other").close
    accepted = _produce(_door("0"), 0)
    assert accepted.reply is None and len(accepted.inputs) == 1 and accepted.close == ""
    assert _produce(_door("all"), 1).close == ""  # answered with the error instead


def test_list_offsets_earliest_carries_the_first_cached_epoch():
    assert earliest_epoch([(0, 0), (3, 5)]) == 0  # the first record's epoch, not the leader's
    assert earliest_epoch([(3, 0)]) == 3
    assert earliest_epoch([(2, 4)]) == -1  # no epoch is known to start at the log start
    assert earliest_epoch([]) == -1
