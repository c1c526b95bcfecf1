"""The reference consumer alone (sans I/O): an answer to a fetch that timed out, arriving while
a later fetch is out, is dropped as Kafka's fetcher drops it. Without that the consumer read
records twice (a nonmonotonic-poll the history checker found in a safe campaign)."""

from __future__ import annotations

from impl.protocol.clients import ConsumerCore
from impl.protocol.messages import ConsumerFetch, ConsumerFetchResponse, MetadataResponse


def _fetches(effects) -> list[ConsumerFetch]:
    return [e.message for e in effects if type(e.message) is ConsumerFetch]


def test_an_answer_to_a_timed_out_fetch_is_dropped():
    c = ConsumerCore(partitions=1, poll_interval_ms=100, request_timeout_ms=50)
    c.on_timer(0)
    c.on_message(1, "meta", "meta:m0", MetadataResponse(0, leader=0, leader_epoch=0))
    (first,) = _fetches(c.on_timer(1))
    assert first.offset == 0
    # The first fetch times out (the consumer forgets the leader and asks again) ...
    assert _fetches(c.on_timer(60)) == []
    c.on_timer(101)
    c.on_message(102, "meta", "meta:m1", MetadataResponse(0, leader=0, leader_epoch=0))
    (second,) = _fetches(c.on_timer(102))
    assert second.offset == 0
    answer = ConsumerFetchResponse(0, "NONE", ((0, 10), (1, 11)), 2, offset=0)
    read = c.on_message(103, "b0", "b0:m0", answer)
    assert [line.body["records"] for line in read] == [[[0, 10], [1, 11]]]
    (third,) = _fetches(c.on_timer(202))
    assert third.offset == 2
    # ... and the other answer from offset 0 arrives now: dropped, and the answer of the
    # third fetch is still taken.
    assert c.on_message(203, "b0", "b0:m1", answer) == []
    later = ConsumerFetchResponse(0, "NONE", ((2, 12),), 3, offset=2)
    assert [line.body["records"] for line in c.on_message(204, "b0", "b0:m2", later)] == [
        [[2, 12]]]
