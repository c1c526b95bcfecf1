"""The broker's Kafka front door, sans I/O: Kafka requests in, core inputs and Kafka responses out.

A Kafka client's Produce becomes, per record, what isrlab's own producer would send: a
`ProducerSend` transition (traced, so replay and the history checker see the write) and a
one-record `Produce` to the broker core. A consumer's Fetch becomes a `ConsumerFetch`. The core
answers these to the source `kafka/<request>`; `on_core_message` collects the answers and,
once a request has all of them, returns its response bytes. Metadata, ListOffsets and
OffsetForLeaderEpoch are answered from the core's own view of each partition, as a Kafka
broker answers from its replica state.

Record values: a record whose value is a decimal number below 10**15 is the write of that
number (the value the history and the trace name), so a client that writes numbers can be
checked write by write; any other record gets a fresh number above that range, made of the
broker's id, the process's incarnation and a counter. The record's value bytes are the payload
the broker stores; keys, headers and timestamps are not stored (consumers see null keys, no
headers and timestamp 0).

A produce request must use the cluster's `acks` (`isrlab cluster tcp --acks`): the spec that
replay checks against has one acks level per run, so any other level is answered with
INVALID_REQUIRED_ACKS and nothing is written. An acks=0 request gets no answer, so one the door
refuses closes its connection instead, as Kafka's broker does.

Bounds. What one request may cost is capped, so that no client holds the core's thread (the
one that answers replication and heartbeats) for long: the codec caps a request's bytes and
entries; here a produce request carries at most `MAX_PRODUCE_RECORDS` records (the rest of it is
answered MESSAGE_TOO_LARGE), a batch at most `MESSAGE_MAX_BYTES`, and a fetch answer at most
`FETCH_MAX_BYTES` (`MAX_PARTITION_FETCH_BYTES` per partition), which the core is asked to
honour so it never serves (and traces) more. A partition named twice in one Produce or Fetch
is answered INVALID_REQUEST for the repeats.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from impl.config import ClusterConfig
from impl.kafka import batches
from impl.kafka.codec import (
    API_VERSIONS,
    FETCH,
    INIT_PRODUCER_ID,
    LIST_OFFSETS,
    METADATA,
    OFFSET_FOR_LEADER_EPOCH,
    PRODUCE,
    SUPPORTED,
    Request,
    encode_response,
)
from impl.protocol.messages import (
    RECORD_OVERHEAD,
    ConsumerFetch,
    ConsumerFetchResponse,
    Produce,
    ProduceResponse,
    Transition,
)
from vocab.actions import ActionName as A
from vocab.outcomes import KAFKA_ERROR_NUMBERS, Code

HOST = "127.0.0.1"
NUMBERED = 10**15
ERRORS = {"NONE": 0, "MESSAGE_TOO_LARGE": 10,
          **{e.value: n for e, n in KAFKA_ERROR_NUMBERS.items()}}
ACKS = {-1: "all", 1: "1", 0: "0"}
EARLIEST, LATEST = -2, -1
MESSAGE_MAX_BYTES = 1048588  # Kafka's message.max.bytes (its default): one batch at most
MAX_PRODUCE_RECORDS = 10_000  # records of one produce request (Kafka caps bytes only)
FETCH_MAX_BYTES = 1 << 20  # one fetch answer's records (Kafka's fetch.max.bytes: 50 MiB)
# One partition's records in an answer: the request's partition_max_bytes (the consumer's
# max.partition.fetch.bytes, 1 MiB by default) at most this, so that the core's ConsumerServe
# trace line, about 22 bytes a record, stays near 200 KB even for one-byte records.
MAX_PARTITION_FETCH_BYTES = 256 << 10


@dataclass
class Pending:
    """A request waiting for the core: its answers so far and how to build the response."""

    request: Request
    expected: int
    finish: object  # (answers) -> dict
    answers: list = field(default_factory=list)


@dataclass
class Step:
    """What the node does for one request: `inputs` are (transition or None, message) pairs
    for the core, in order (a transition is traced, with a fresh message id, before its
    message is handed to the core); `reply` is the response when it is known at once (None
    for acks=0 produce, and while `pending`). `close` says why the connection must be closed
    once the request is handed on (empty: it stays open)."""

    reply: bytes | None = None
    inputs: list = field(default_factory=list)
    pending: Pending | None = None
    src: str = ""
    close: str = ""


class KafkaDoor:
    def __init__(self, broker: int, config: ClusterConfig, kafka_ports: dict[int, int],
                 topic: str, core):
        self.broker = broker
        self.config = config
        self.kafka_ports = kafka_ports
        self.topic = topic
        self.topic_id = uuid.uuid5(uuid.NAMESPACE_URL, f"isrlab:{topic}")
        self.core = core
        self.pending: dict[str, Pending] = {}
        self.requests = 0
        self.fresh = 0
        self.producer_ids = 0
        self.empty_fetches: set[str] = set()  # Fetch requests answered with nothing to serve

    # Requests -------------------------------------------------------------------------------

    def on_request(self, request: Request) -> Step:
        self.requests += 1
        src = f"kafka/{self.broker}/{self.requests}"
        handler = {
            API_VERSIONS: self._api_versions, METADATA: self._metadata, PRODUCE: self._produce,
            FETCH: self._fetch, LIST_OFFSETS: self._list_offsets,
            OFFSET_FOR_LEADER_EPOCH: self._offset_for_leader_epoch,
            INIT_PRODUCER_ID: self._init_producer_id,
        }[request.api_key]
        step = handler(request, src)
        step.src = src
        if step.pending is not None:
            if step.pending.expected == 0:
                step.reply = encode_response(request, step.pending.finish([]))
                step.pending = None
            else:
                self.pending[src] = step.pending
        return step

    def on_core_message(self, dst: str, message) -> bytes | None:
        """An answer the core sent to `dst`: the response, once its request is complete."""
        pending = self.pending.get(dst)
        if pending is None:
            return None
        pending.answers.append(message)
        if len(pending.answers) < pending.expected:
            return None
        del self.pending[dst]
        return encode_response(pending.request, pending.finish(pending.answers))

    def fetch_was_empty(self, src: str | None) -> bool:
        """Whether the Fetch answered as `src` had nothing to serve (once per request)."""
        if src is None:
            return False
        if src in self.empty_fetches:
            self.empty_fetches.discard(src)
            return True
        return False

    def expire(self, src: str) -> bytes | None:
        """The request's time is up: answer what is known, the rest REQUEST_TIMED_OUT."""
        pending = self.pending.pop(src, None)
        if pending is None:
            return None
        return encode_response(pending.request, pending.finish(pending.answers, timed_out=True))

    def _reply(self, request: Request, data: dict) -> Step:
        return Step(reply=encode_response(request, data))

    def _view(self, p: int):
        """This broker's replica of partition p, or None when it hosts none."""
        if not 0 <= p < self.config.partitions or self.broker not in self.config.assignment(p):
            return None
        return self.core.replicas[p]

    # ApiVersions, Metadata, InitProducerId ----------------------------------------------------

    def _api_versions(self, request: Request, src: str) -> Step:
        keys = [{"api_key": k, "min_version": low, "max_version": high}
                for k, (low, high) in sorted(SUPPORTED.items())]
        error = ERRORS["UNSUPPORTED_VERSION"] if request.body is None else 0
        return self._reply(request, {"error_code": error, "api_keys": keys, "throttle_time": 0})

    def _metadata(self, request: Request, src: str) -> Step:
        brokers = [{"node_id": b, "host": HOST, "port": port, "rack": None}
                   for b, port in sorted(self.kafka_ports.items())]
        asked = request.body.topics
        # Each name once, as Kafka answers a set of topics.
        names = [self.topic] if asked is None else list(dict.fromkeys(t.name for t in asked))
        topics = []
        for name in names:
            if name != self.topic:
                topics.append({"error_code": ERRORS["UNKNOWN_TOPIC_OR_PARTITION"], "name": name,
                               "topic_id": uuid.UUID(int=0), "is_internal": False,
                               "partitions": [], "topic_authorized_operations": -2147483648})
                continue
            parts = []
            for p in range(self.config.partitions):
                r = self._view(p)
                replicas = list(self.config.assignment(p))
                if r is None or r.leader < 0:
                    parts.append({"error_code": ERRORS["LEADER_NOT_AVAILABLE"],
                                  "partition_index": p, "leader_id": -1, "leader_epoch": -1,
                                  "replica_nodes": replicas, "isr_nodes": [],
                                  "offline_replicas": []})
                    continue
                parts.append({"error_code": 0, "partition_index": p, "leader_id": r.leader,
                              "leader_epoch": r.leader_epoch, "replica_nodes": replicas,
                              "isr_nodes": list(r.isr), "offline_replicas": []})
            topics.append({"error_code": 0, "name": name, "topic_id": self.topic_id,
                           "is_internal": False, "partitions": parts,
                           "topic_authorized_operations": -2147483648})
        return self._reply(request, {
            "throttle_time": 0, "brokers": brokers, "cluster_id": "isrlab",
            "controller_id": -1, "topics": topics,
            "cluster_authorized_operations": -2147483648})

    def _init_producer_id(self, request: Request, src: str) -> Step:
        # An id is granted so idempotent producers (kafka-python's and librdkafka's defaults in
        # recent versions) can start; sequence numbers are not checked, so a retried batch
        # may be stored twice, which the history checker reports as a duplicate.
        self.producer_ids += 1
        pid = (self.broker << 40) | (self.core.incarnation % (1 << 20)) << 20 | self.producer_ids
        return self._reply(request, {"throttle_time": 0, "error_code": 0, "producer_id": pid,
                                     "producer_epoch": 0})

    # Produce ----------------------------------------------------------------------------------

    def _value(self, payload: bytes) -> int:
        if 0 < len(payload) <= 15 and payload.isdigit():
            return int(payload)
        # Above NUMBERED: 24 bits of (broker, incarnation), then a 24-bit counter (< 2**53).
        self.fresh += 1
        source = (self.broker + 1) << 20 | self.core.incarnation % (1 << 20)
        return NUMBERED + (source << 24) + self.fresh % (1 << 24)

    def _produce(self, request: Request, src: str) -> Step:
        body = request.body
        acks = ACKS.get(body.acks)
        results: list[tuple[str, int, int, str | None]] = []  # topic, partition, records, error
        inputs = []
        awaited = 0  # ProduceResponses the core will send
        seen: set[tuple[str, int]] = set()
        records_left = MAX_PRODUCE_RECORDS
        for topic in body.topic_data:
            for part in topic.partition_data:
                p = part.index
                error = self._produce_error(topic.name, p, acks)
                if (topic.name, p) in seen:
                    error = "INVALID_REQUEST"
                seen.add((topic.name, p))
                values: list[int] = []
                payloads: list[bytes] = []
                if error is None:
                    try:
                        read = batches.read(part.records or b"", records_left,
                                            MESSAGE_MAX_BYTES)
                    except batches.TooLarge:
                        error = "MESSAGE_TOO_LARGE"
                    except batches.BadBatch:
                        error = "CORRUPT_MESSAGE"
                    else:
                        if any(b.records is None for b in read):
                            error = "UNSUPPORTED_COMPRESSION_TYPE"
                        elif any(b.attributes & (batches.TRANSACTIONAL | batches.CONTROL)
                                 for b in read):
                            error = "INVALID_REQUEST"
                        else:
                            payloads = [v or b"" for b in read for _, _, v in b.records]
                            values = [self._value(v) for v in payloads]
                            records_left -= len(values)
                if values and not self.core.tracing:
                    # Throughput runs (no traces): the whole batch in one append.
                    inputs.append((None, Produce(p, tuple(values), tuple(payloads), acks)))
                    values_sent = 1
                else:
                    values_sent = len(values)
                for value, payload in zip(values, payloads, strict=True):
                    if not self.core.tracing:
                        break
                    t = Transition(A.PRODUCER_SEND, {"partition": p}, Code.PRODUCE_SENT,
                                   {"value": value, "broker": self.broker},
                                   detail={"value": value, "broker": self.broker, "attempt": 0,
                                           "client": request.client_id})
                    inputs.append((t, Produce(p, (value,), (payload,), acks)))
                results.append((topic.name, p, len(values), error))
                awaited += values_sent if error is None else 0
        expected = 0 if acks == "0" else awaited

        def finish(answers, timed_out=False):
            by_partition: dict[int, list] = {}
            for a in answers:
                if type(a) is ProduceResponse:
                    by_partition.setdefault(a.partition, []).extend(a.results)
            topics: dict[str, list] = {}
            for name, p, n, error in results:
                got = by_partition.get(p, []) if error is None else []
                errors = [e for _, _, e in got if e != "NONE"]
                if error is None and errors:
                    error = errors[0]
                if error is None and len(got) < n:
                    error = "REQUEST_TIMED_OUT" if timed_out else "NONE"
                offsets = [o for _, o, e in got if e == "NONE"]
                topics.setdefault(name, []).append({
                    "index": p, "error_code": ERRORS.get(error or "NONE", -1),
                    "base_offset": min(offsets) if offsets and not errors else -1,
                    "log_append_time": None, "log_start_offset": 0, "record_errors": [],
                    "error_message": None})
            return {"responses": [{"name": n, "partition_responses": ps}
                                  for n, ps in topics.items()], "throttle_time": 0}

        if acks == "0":
            # No response tells an acks=0 producer of a refusal, so Kafka closes the connection
            # (the producer then refreshes its metadata); so does the door, for the refusals it
            # makes itself.
            refused = sorted({error for *_, error in results if error is not None})
            return Step(reply=None, inputs=inputs, close=(
                f"an acks=0 produce was refused ({', '.join(refused)})" if refused else ""))
        return Step(inputs=inputs, pending=Pending(request, expected, finish))

    def _produce_error(self, topic: str, p: int, acks: str | None) -> str | None:
        if topic != self.topic or not 0 <= p < self.config.partitions:
            return "UNKNOWN_TOPIC_OR_PARTITION"
        if acks != self.config.acks:
            # The spec (and so replay) has one acks level per run: the cluster's `acks`.
            return "INVALID_REQUIRED_ACKS"
        r = self._view(p)
        if r is None or r.leader != self.broker:
            return "NOT_LEADER_OR_FOLLOWER"
        return None

    # Fetch, ListOffsets, OffsetForLeaderEpoch ----------------------------------------------------

    def _leading(self, topic: str, p: int, part) -> tuple[str | None, object]:
        """(error or None, this broker's replica) for a request a leader must answer, checking
        the topic, the partition, leadership and the request's `current_leader_epoch`."""
        if topic != self.topic or not 0 <= p < self.config.partitions:
            return "UNKNOWN_TOPIC_OR_PARTITION", None
        r = self._view(p)
        return self._epoch_error(r, getattr(part, "current_leader_epoch", -1)), r

    def _epoch_error(self, r, current_leader_epoch: int) -> str | None:
        if r is None or r.leader != self.broker:
            return "NOT_LEADER_OR_FOLLOWER"
        if current_leader_epoch >= 0:
            if current_leader_epoch < r.leader_epoch:
                return "FENCED_LEADER_EPOCH"
            if current_leader_epoch > r.leader_epoch:
                return "UNKNOWN_LEADER_EPOCH"
        return None

    def _fetch(self, request: Request, src: str) -> Step:
        body = request.body
        asked = []  # (topic, partition, offset, max_bytes, error)
        inputs = []
        seen: set[tuple[str, int]] = set()
        # The answer's bytes: the request's max_bytes (v3+) within the broker's cap.
        answer_max = max(0, min(getattr(body, "max_bytes", FETCH_MAX_BYTES), FETCH_MAX_BYTES))
        for topic in body.topics:
            for part in topic.partitions:
                p = part.partition
                error, _ = self._leading(topic.topic, p, part)
                if (topic.topic, p) in seen:
                    error = "INVALID_REQUEST"
                seen.add((topic.topic, p))
                if error is None and part.fetch_offset < 0:
                    error = "OFFSET_OUT_OF_RANGE"
                max_bytes = max(0, min(part.partition_max_bytes, MAX_PARTITION_FETCH_BYTES,
                                       answer_max))
                asked.append((topic.topic, p, part.fetch_offset, max_bytes, error))
                if error is None:
                    inputs.append((None, ConsumerFetch(p, part.fetch_offset, max_bytes)))

        def finish(answers, timed_out=False):
            got = {a.partition: a for a in answers if type(a) is ConsumerFetchResponse}
            topics: dict[str, list] = {}
            room = answer_max  # what is left of the answer's bytes
            for name, p, _offset, max_bytes, error in asked:
                a = got.get(p) if error is None else None
                records = b""
                hw = -1
                if a is not None:
                    error = a.error
                    hw = a.high_watermark
                    if error == "NONE" and a.records and (room > 0 or room == answer_max):
                        # As KIP-74: the first partition with records gets one record even
                        # when that record alone is over the caps.
                        records = self._records(p, a.records, min(max_bytes, room),
                                                room == answer_max)
                        room -= len(records)
                topics.setdefault(name, []).append({
                    "partition_index": p, "error_code": ERRORS.get(error or "NONE", -1),
                    "high_watermark": hw, "last_stable_offset": hw, "log_start_offset": 0,
                    "aborted_transactions": [], "preferred_read_replica": -1,
                    "records": records})
            if not any(q["records"] or q["error_code"] for ps in topics.values() for q in ps):
                self.empty_fetches.add(src)
            return {"throttle_time": 0, "error_code": 0, "session_id": 0,
                    "responses": [{"topic": n, "partitions": ps} for n, ps in topics.items()]}

        return Step(inputs=inputs, pending=Pending(request, len(inputs), finish))

    def _records(self, p: int, served: tuple, max_bytes: int, first: bool) -> bytes:
        """The served records as batches, up to `max_bytes` (one at least when `first`)."""
        log = self.core.replicas[p].log
        out = []
        size = 0
        for offset, value in served:
            epoch, stored, payload = log[offset]
            if stored != value:
                break  # the log moved under the answer (not within one synchronous step)
            size += len(payload) + RECORD_OVERHEAD
            if (out or not first) and size > max_bytes:
                break
            out.append((offset, epoch, None, payload))
        return batches.write(out)

    def _list_offsets(self, request: Request, src: str) -> Step:
        def answer(part, r) -> dict:
            offset, epoch = -1, -1
            if r is not None:
                # As Kafka: latest is the HW in the leader's epoch; earliest and a time carry
                # the epoch of the record found, so that after a leader change the log's
                # first record is of an older epoch than the leader.
                if part.timestamp == EARLIEST:
                    offset, epoch = 0, earliest_epoch(r.epoch_cache)
                elif part.timestamp == LATEST:
                    offset, epoch = r.high_watermark, r.leader_epoch
                elif r.high_watermark:  # no timestamps are stored: every record is at 0
                    offset, epoch = 0, r.log[0][0]
            return {"timestamp": -1, "offset": offset, "leader_epoch": epoch,
                    "old_style_offsets": [offset] if offset >= 0 else []}

        return self._per_partition(request, "name", "partition_index", answer)

    def _offset_for_leader_epoch(self, request: Request, src: str) -> Step:
        def answer(part, r) -> dict:
            epoch, end = -1, -1
            if r is not None:
                epoch, end = end_offset_for_epoch(r.epoch_cache, r.leo, part.leader_epoch)
            return {"leader_epoch": epoch, "end_offset": end}

        return self._per_partition(request, "topic", "partition", answer)

    def _per_partition(self, request: Request, topic_field: str, partition_field: str,
                       answer) -> Step:
        """The reply to a request a leader answers partition by partition: each entry is its
        error and `answer(part, replica)` (replica None on an error). ListOffsets and
        OffsetForLeaderEpoch name their topic and partition fields differently."""
        topics = []
        for topic in request.body.topics:
            name = getattr(topic, topic_field)
            parts = []
            for part in topic.partitions:
                p = getattr(part, partition_field)
                error, r = self._leading(name, p, part)
                parts.append({partition_field: p, "error_code": ERRORS[error or "NONE"],
                              **answer(part, None if error else r)})
            topics.append({topic_field: name, "partitions": parts})
        return self._reply(request, {"throttle_time": 0, "topics": topics})


def earliest_epoch(cache) -> int:
    """The epoch Kafka's ListOffsets gives the log start offset (0 here): the first cached
    epoch when it starts there, else -1 (UnifiedLog.fetchOffsetByTimestamp, EARLIEST)."""
    return cache[0][0] if cache and cache[0][1] <= 0 else -1


def end_offset_for_epoch(cache, leo: int, epoch: int) -> tuple[int, int]:
    """Kafka's LeaderEpochFileCache.endOffsetFor: the largest epoch <= `epoch` and the start of
    the next epoch after it (the LEO for the latest), or (-1, -1) when none is that old."""
    found = -1
    for i, (e, _start) in enumerate(cache):
        if e > epoch:
            return (found, cache[i][1]) if found >= 0 else (-1, -1)
        found = e
    return (found, leo) if found >= 0 else (-1, -1)
