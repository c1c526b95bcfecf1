"""Outcomes and refusals as data: a code and its fields, rendered to English in one place.

A transition's outcome (what happened: `APPENDED` at an offset, a Kafka error code such as
`NOT_LEADER_OR_FOLLOWER`, ...) and a refused action's reason (which guard failed:
`NOT_LAGGING` for a follower, ...) travel as a code plus named fields. The spec returns them,
the reference broker writes them to its traces (`outcome` and `outcome_args`), and trace replay,
the simulator's statistics and the Spark jobs compare codes and fields only. The English below
is for people: transcripts, reports, error messages. It may be reworded freely; nothing parses
it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Any


class KafkaError(StrEnum):
    """The Kafka protocol error codes isrlab uses, by name (Kafka's `Errors` enum)."""

    NOT_LEADER_OR_FOLLOWER = "NOT_LEADER_OR_FOLLOWER"
    FENCED_LEADER_EPOCH = "FENCED_LEADER_EPOCH"
    UNKNOWN_LEADER_EPOCH = "UNKNOWN_LEADER_EPOCH"
    NOT_ENOUGH_REPLICAS = "NOT_ENOUGH_REPLICAS"
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = "NOT_ENOUGH_REPLICAS_AFTER_APPEND"
    OFFSET_OUT_OF_RANGE = "OFFSET_OUT_OF_RANGE"
    REQUEST_TIMED_OUT = "REQUEST_TIMED_OUT"
    # Answered only at the Kafka front door (impl/kafka): requests the broker core never sees.
    CORRUPT_MESSAGE = "CORRUPT_MESSAGE"
    UNKNOWN_TOPIC_OR_PARTITION = "UNKNOWN_TOPIC_OR_PARTITION"
    LEADER_NOT_AVAILABLE = "LEADER_NOT_AVAILABLE"
    UNSUPPORTED_VERSION = "UNSUPPORTED_VERSION"
    INVALID_REQUEST = "INVALID_REQUEST"
    UNSUPPORTED_COMPRESSION_TYPE = "UNSUPPORTED_COMPRESSION_TYPE"
    INVALID_REQUIRED_ACKS = "INVALID_REQUIRED_ACKS"


# Kafka's numeric codes for the errors above (org.apache.kafka.common.protocol.Errors).
KAFKA_ERROR_NUMBERS: Mapping[KafkaError, int] = {
    KafkaError.OFFSET_OUT_OF_RANGE: 1,
    KafkaError.NOT_LEADER_OR_FOLLOWER: 6,
    KafkaError.REQUEST_TIMED_OUT: 7,
    KafkaError.NOT_ENOUGH_REPLICAS: 19,
    KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND: 20,
    KafkaError.FENCED_LEADER_EPOCH: 74,
    KafkaError.UNKNOWN_LEADER_EPOCH: 75,
    KafkaError.CORRUPT_MESSAGE: 2,
    KafkaError.UNKNOWN_TOPIC_OR_PARTITION: 3,
    KafkaError.LEADER_NOT_AVAILABLE: 5,
    KafkaError.UNSUPPORTED_VERSION: 35,
    KafkaError.INVALID_REQUEST: 42,
    KafkaError.UNSUPPORTED_COMPRESSION_TYPE: 76,
    KafkaError.INVALID_REQUIRED_ACKS: 21,
}


class Code(StrEnum):
    """What a transition did. Kafka error codes are outcomes too, spelled as in Kafka."""

    # Controller
    ELECTED_CLEAN = "ELECTED_CLEAN"  # leader, leader_epoch
    ELECTED_UNCLEAN = "ELECTED_UNCLEAN"  # leader, leader_epoch
    ELECTED_PREFERRED = "ELECTED_PREFERRED"  # leader, leader_epoch
    # KIP-966: a leader from the eligible leader replicas (the ISR was empty), or the last known
    # leader (ISR and ELR both empty; Kafka counts it as an unclean election).
    ELECTED_ELR = "ELECTED_ELR"  # leader, leader_epoch
    ELECTED_LAST_KNOWN_LEADER = "ELECTED_LAST_KNOWN_LEADER"  # leader, leader_epoch
    # changes: [[partition, leader, leader_epoch, [isr...]], ...] (the changed partitions),
    # elected: how many of them got a new leader (one left offline is not counted),
    # excused: [value, ...]
    BROKER_FAILURE_HANDLED = "BROKER_FAILURE_HANDLED"
    # A broker won the controller role in the metadata store: controller, controller_epoch
    # (with max.controller.failovers; a field of BROKER_FAILURE_HANDLED, BROKER_UP, REGISTERED)
    # LeaderAndIsr consumed without effect: from an older controller epoch than the broker has
    # seen (Kafka's STALE_CONTROLLER_EPOCH: controller_epoch, seen), or a view that is not newer
    # (leader_epoch, partition_epoch, view_leader_epoch, view_partition_epoch).
    STALE_CONTROLLER_EPOCH = "STALE_CONTROLLER_EPOCH"
    LEADER_AND_ISR_IGNORED = "LEADER_AND_ISR_IGNORED"
    # Network
    DROPPED = "DROPPED"
    # LeaderAndIsr applied
    ISR_UPDATED = "ISR_UPDATED"
    STILL_LEADER = "STILL_LEADER"  # leader_epoch
    LEADER = "LEADER"  # leader_epoch
    FOLLOWER = "FOLLOWER"  # leader, leader_epoch
    FOLLOWER_TRUNCATED_TO_HW = "FOLLOWER_TRUNCATED_TO_HW"  # leader, leader_epoch, high_watermark
    # Clients
    PRODUCE_SENT = "PRODUCE_SENT"  # value, broker
    READ = "READ"  # records, broker
    SERVED = "SERVED"  # records, limit (a consumer read served by a broker)
    # Produce
    APPENDED = "APPENDED"  # offset
    APPENDED_ACKNOWLEDGED = "APPENDED_ACKNOWLEDGED"  # offset (acks=1)
    ACKNOWLEDGED = "ACKNOWLEDGED"
    NOT_LEADER_OR_FOLLOWER = KafkaError.NOT_LEADER_OR_FOLLOWER.value
    FENCED_LEADER_EPOCH = KafkaError.FENCED_LEADER_EPOCH.value
    UNKNOWN_LEADER_EPOCH = KafkaError.UNKNOWN_LEADER_EPOCH.value
    NOT_ENOUGH_REPLICAS = KafkaError.NOT_ENOUGH_REPLICAS.value
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND.value
    OFFSET_OUT_OF_RANGE = KafkaError.OFFSET_OUT_OF_RANGE.value
    REQUEST_TIMED_OUT = KafkaError.REQUEST_TIMED_OUT.value
    # Answered at the Kafka front door (impl/kafka), never a spec outcome.
    CORRUPT_MESSAGE = KafkaError.CORRUPT_MESSAGE.value
    UNKNOWN_TOPIC_OR_PARTITION = KafkaError.UNKNOWN_TOPIC_OR_PARTITION.value
    LEADER_NOT_AVAILABLE = KafkaError.LEADER_NOT_AVAILABLE.value
    UNSUPPORTED_VERSION = KafkaError.UNSUPPORTED_VERSION.value
    INVALID_REQUEST = KafkaError.INVALID_REQUEST.value
    UNSUPPORTED_COMPRESSION_TYPE = KafkaError.UNSUPPORTED_COMPRESSION_TYPE.value
    INVALID_REQUIRED_ACKS = KafkaError.INVALID_REQUIRED_ACKS.value
    # Fetch, leader side
    EPOCH_END = "EPOCH_END"  # epoch, end_offset (an OffsetsForLeaderEpoch answer)
    DIVERGING_EPOCH = "DIVERGING_EPOCH"  # epoch, end_offset
    RECORDS_SENT = "RECORDS_SENT"  # records, fetch_offset, high_watermark, answer_high_watermark
    # Fetch, follower side
    EPOCH_REQUEST_SENT = "EPOCH_REQUEST_SENT"  # epoch
    FETCH_SENT = "FETCH_SENT"  # fetch_offset
    DROPPED_NOT_FROM_LEADER = "DROPPED_NOT_FROM_LEADER"  # leader (who answered)
    DROPPED_OTHER_EPOCH = "DROPPED_OTHER_EPOCH"  # leader_epoch (answer), current_leader_epoch
    DROPPED_NO_TRUNCATION_DUE = "DROPPED_NO_TRUNCATION_DUE"
    DROPPED_TRUNCATION_PENDING = "DROPPED_TRUNCATION_PENDING"
    DROPPED_STALE_OFFSET = "DROPPED_STALE_OFFSET"  # fetch_offset, log_end_offset
    OUT_OF_RANGE_TRUNCATED = "OUT_OF_RANGE_TRUNCATED"  # log_end_offset
    TRUNCATED = "TRUNCATED"  # before, after
    TRUNCATED_ROUND_DUE = "TRUNCATED_ROUND_DUE"  # before, after (another epoch round is due)
    DIVERGED = "DIVERGED"  # before, after
    RECORDS_APPENDED = "RECORDS_APPENDED"  # records, high_watermark
    # Broker life cycle and time
    FLUSHED = "FLUSHED"
    CRASHED = "CRASHED"  # excused: [value, ...]
    BROKER_UP = "BROKER_UP"  # broker_epoch
    REGISTERED = "REGISTERED"  # broker_epoch
    TICK = "TICK"  # ticks
    # ISR changes
    ISR_CHANGED = "ISR_CHANGED"  # isr
    ISR_APPLIED = "ISR_APPLIED"  # isr, partition_epoch (the leader learns its change committed)
    # Asynchronous ISR changes (KIP-497's AlterPartition, with isr.changes.async)
    ISR_CHANGE_REQUESTED = "ISR_CHANGE_REQUESTED"  # isr
    ISR_CHANGE_REJECTED = "ISR_CHANGE_REJECTED"  # error (INVALID_UPDATE_VERSION, ...)
    ISR_CHANGE_DROPPED = "ISR_CHANGE_DROPPED"  # (an answer for a leadership or request gone)


class Refusal(StrEnum):
    """Why an action is not enabled: the guard that failed."""

    NO_SUCH_PARTITION = "NO_SUCH_PARTITION"  # partition
    NO_SUCH_BROKER = "NO_SUCH_BROKER"  # broker
    HAS_LEADER = "HAS_LEADER"  # partition, leader
    NO_LEADER = "NO_LEADER"  # partition
    LEADER_EPOCH_BOUND = "LEADER_EPOCH_BOUND"
    PARTITION_EPOCH_BOUND = "PARTITION_EPOCH_BOUND"
    RECORDS_BOUND = "RECORDS_BOUND"
    CRASHES_BOUND = "CRASHES_BOUND"
    SESSION_EXPIRIES_BOUND = "SESSION_EXPIRIES_BOUND"
    MESSAGE_DROPS_BOUND = "MESSAGE_DROPS_BOUND"
    TICKS_BOUND = "TICKS_BOUND"
    NO_LIVE_ISR_REPLICA = "NO_LIVE_ISR_REPLICA"
    NO_LIVE_REPLICA = "NO_LIVE_REPLICA"
    NO_SESSION = "NO_SESSION"  # broker
    HAS_SESSION = "HAS_SESSION"  # broker
    SESSION_NOT_EXPIRED = "SESSION_NOT_EXPIRED"  # broker
    ALREADY_LEADS = "ALREADY_LEADS"  # broker
    PREFERRED_NOT_IN_ISR = "PREFERRED_NOT_IN_ISR"  # broker
    NO_SUCH_LEADER_AND_ISR = "NO_SUCH_LEADER_AND_ISR"
    OTHER_ROLE = "OTHER_ROLE"
    STALE_LEADER_AND_ISR = "STALE_LEADER_AND_ISR"  # leader_epoch, partition_epoch, view_*
    BROKER_DOWN = "BROKER_DOWN"  # broker
    ALREADY_UP = "ALREADY_UP"  # broker
    LEADER_DOWN = "LEADER_DOWN"  # leader
    NO_LIVE_LEADER = "NO_LIVE_LEADER"
    NOT_LEADER_IN_VIEW = "NOT_LEADER_IN_VIEW"  # broker (a produce target that does not lead)
    TARGET_IS_CURRENT_LEADER = "TARGET_IS_CURRENT_LEADER"  # broker (send it untargeted)
    DOES_NOT_LEAD_IN_VIEW = "DOES_NOT_LEAD_IN_VIEW"  # broker (a consumer's leader)
    DOES_NOT_LEAD = "DOES_NOT_LEAD"  # broker
    FOLLOWS_NOBODY = "FOLLOWS_NOBODY"  # broker
    NOTHING_NEW = "NOTHING_NEW"
    NOTHING_IN_FLIGHT = "NOTHING_IN_FLIGHT"
    NO_SUCH_PRODUCE = "NO_SUCH_PRODUCE"
    NO_PENDING_WRITE = "NO_PENDING_WRITE"  # offset
    HW_NOT_PAST = "HW_NOT_PAST"  # high_watermark, offset
    NO_REQUEST_IN_FLIGHT = "NO_REQUEST_IN_FLIGHT"
    REQUEST_FOR_OTHER_BROKER = "REQUEST_FOR_OTHER_BROKER"  # broker
    CONNECTION_BUSY = "CONNECTION_BUSY"
    NO_RESPONSE_IN_FLIGHT = "NO_RESPONSE_IN_FLIGHT"
    OWN_MEMBERSHIP = "OWN_MEMBERSHIP"
    COMPARE_AND_SET_FAILS = "COMPARE_AND_SET_FAILS"  # view_*, leader_epoch, partition_epoch
    NOT_IN_ISR = "NOT_IN_ISR"  # follower
    ALREADY_IN_ISR = "ALREADY_IN_ISR"  # follower
    CAUGHT_UP = "CAUGHT_UP"  # follower
    NOT_LAGGING = "NOT_LAGGING"  # follower
    BELOW_HIGH_WATERMARK = "BELOW_HIGH_WATERMARK"  # follower
    BELOW_EPOCH_START = "BELOW_EPOCH_START"  # follower, offset
    STALE_BROKER_EPOCH = "STALE_BROKER_EPOCH"  # follower, broker_epoch
    NOTHING_TO_FLUSH = "NOTHING_TO_FLUSH"
    FLUSH_MOOT = "FLUSH_MOOT"
    ISR_CHANGE_PENDING = "ISR_CHANGE_PENDING"  # (an AlterPartition is already in flight)
    NO_SUCH_ALTER_PARTITION = "NO_SUCH_ALTER_PARTITION"
    NO_CONTROLLER = "NO_CONTROLLER"  # broker (the controller, down with its session lingering)
    CONTROLLER_FAILOVERS_BOUND = "CONTROLLER_FAILOVERS_BOUND"


def _values(values) -> str:
    return " ".join(f"v{v}" for v in values)


def _new_controller(f: Mapping[str, Any]) -> str:
    if "controller" not in f:
        return ""
    return f"broker {f['controller']} is controller in controller epoch {f['controller_epoch']}"


def _broker_failure(f: Mapping[str, Any]) -> str:
    notes = [f"p{p}: leader={leader} epoch={epoch} isr={list(isr)}"
             for p, leader, epoch, isr in f.get("changes", ())]
    if f.get("excused"):
        notes.append(f"every ISR replica is down, excused {_values(f['excused'])}")
    if "controller" in f:
        notes.insert(0, _new_controller(f))
    return "; ".join(notes) or "no partition changed"


def _registered(word: str) -> Callable[[Mapping[str, Any]], str]:
    def english(f: Mapping[str, Any]) -> str:
        text = f"{word} with broker epoch {f['broker_epoch']}"
        return f"{text}; {_new_controller(f)}" if "controller" in f else text
    return english


def _records_sent(f: Mapping[str, Any]) -> str:
    text = f"{f['records']} records from {f['fetch_offset']}, HW {f['high_watermark']}"
    if f.get("answer_high_watermark", f["high_watermark"]) != f["high_watermark"]:
        text += f" (the answer carries {f['answer_high_watermark']})"
    return text


def _crashed(f: Mapping[str, Any]) -> str:
    if f.get("excused"):
        return f"crashed; every ISR replica is down, excused {_values(f['excused'])}"
    return "crashed"


Template = str | Callable[[Mapping[str, Any]], str]

_ENGLISH: dict[str, Template] = {
    Code.ELECTED_CLEAN: "elected {leader} (clean) epoch {leader_epoch}",
    Code.ELECTED_UNCLEAN: "elected {leader} (unclean) epoch {leader_epoch}",
    Code.ELECTED_PREFERRED: "elected {leader} (preferred) epoch {leader_epoch}",
    Code.ELECTED_ELR: "elected {leader} from the eligible leader replicas, epoch {leader_epoch}",
    Code.ELECTED_LAST_KNOWN_LEADER:
        "elected {leader} (last known leader, unclean) epoch {leader_epoch}",
    Code.BROKER_FAILURE_HANDLED: _broker_failure,
    Code.DROPPED: "dropped",
    Code.ISR_UPDATED: "ISR updated",
    Code.STILL_LEADER: "still leader, now in epoch {leader_epoch}",
    Code.LEADER: "leader in epoch {leader_epoch}",
    Code.FOLLOWER: "follower of {leader} in epoch {leader_epoch}",
    Code.FOLLOWER_TRUNCATED_TO_HW:
        "follower of {leader} in epoch {leader_epoch}, truncated to HW {high_watermark}",
    Code.PRODUCE_SENT: "v{value} to broker {broker}",
    Code.READ: "read {records} records from {broker}",
    Code.SERVED: "{records} records to {limit}",
    Code.APPENDED: "appended at {offset}",
    Code.APPENDED_ACKNOWLEDGED: "appended at {offset}, acknowledged (acks=1)",
    Code.ACKNOWLEDGED: "acknowledged",
    Code.EPOCH_END: "epoch {epoch} ends at {end_offset}",
    Code.DIVERGING_EPOCH: "diverging epoch {epoch} ends at {end_offset}",
    Code.RECORDS_SENT: _records_sent,
    Code.EPOCH_REQUEST_SENT: "OffsetsForLeaderEpoch({epoch})",
    Code.FETCH_SENT: "fetch from {fetch_offset}",
    Code.DROPPED_NOT_FROM_LEADER: "dropped: from {leader}, not the leader",
    Code.DROPPED_OTHER_EPOCH: "dropped: epoch {leader_epoch} is not {current_leader_epoch}",
    Code.DROPPED_NO_TRUNCATION_DUE: "dropped: no truncation due",
    Code.DROPPED_TRUNCATION_PENDING: "dropped: truncation pending",
    Code.DROPPED_STALE_OFFSET: "dropped: fetched from {fetch_offset}, LEO now {log_end_offset}",
    Code.OUT_OF_RANGE_TRUNCATED: "out of range, truncated to {log_end_offset}",
    Code.TRUNCATED: "truncation: LEO {before} -> {after}",
    Code.TRUNCATED_ROUND_DUE: "truncation: LEO {before} -> {after}, another round due",
    Code.DIVERGED: "diverged: LEO {before} -> {after}",
    Code.RECORDS_APPENDED: "appended {records}, HW {high_watermark}",
    Code.FLUSHED: "flushed",
    Code.CRASHED: _crashed,
    Code.BROKER_UP: _registered("up"),
    Code.REGISTERED: _registered("registered"),
    Code.STALE_CONTROLLER_EPOCH: "fenced: controller epoch {controller_epoch} < {seen} seen",
    Code.LEADER_AND_ISR_IGNORED: "ignored: epoch {leader_epoch}/{partition_epoch} <= view "
                                 "{view_leader_epoch}/{view_partition_epoch}",
    Code.TICK: "tick {ticks}",
    Code.ISR_CHANGED: "ISR {isr}",
    Code.ISR_APPLIED: "ISR {isr} at partition epoch {partition_epoch}",
    Code.ISR_CHANGE_REQUESTED: "asks the controller for ISR {isr}",
    Code.ISR_CHANGE_REJECTED: "ISR change rejected: {error}",
    Code.ISR_CHANGE_DROPPED: "answer dropped: the request or leadership is gone",
    Refusal.NO_SUCH_PARTITION: "no partition {partition}",
    Refusal.NO_SUCH_BROKER: "no broker {broker}",
    Refusal.HAS_LEADER: "partition {partition} has leader {leader}",
    Refusal.NO_LEADER: "partition {partition} has no leader",
    Refusal.LEADER_EPOCH_BOUND: "leader-epoch bound reached",
    Refusal.PARTITION_EPOCH_BOUND: "max.partition.epoch reached",
    Refusal.RECORDS_BOUND: "max.records writes sent",
    Refusal.CRASHES_BOUND: "max.crashes reached",
    Refusal.SESSION_EXPIRIES_BOUND: "max.session.expiries reached",
    Refusal.MESSAGE_DROPS_BOUND: "max.message.drops reached",
    Refusal.TICKS_BOUND: "max.ticks reached",
    Refusal.NO_LIVE_ISR_REPLICA: "no live replica in ISR and unclean election disabled",
    Refusal.NO_LIVE_REPLICA: "no live replica",
    Refusal.NO_SESSION: "broker {broker} has no session",
    Refusal.HAS_SESSION: "broker {broker} has a session",
    Refusal.SESSION_NOT_EXPIRED: "broker {broker}'s old session is not expired",
    Refusal.ALREADY_LEADS: "broker {broker} already leads",
    Refusal.PREFERRED_NOT_IN_ISR: "preferred replica {broker} not in ISR",
    Refusal.NO_SUCH_LEADER_AND_ISR: "no such LeaderAndIsr in flight",
    Refusal.OTHER_ROLE: "request names another role",
    Refusal.STALE_LEADER_AND_ISR: "stale: epoch {leader_epoch}/{partition_epoch} <= view "
                                  "{view_leader_epoch}/{view_partition_epoch}",
    Refusal.BROKER_DOWN: "broker {broker} is down",
    Refusal.ALREADY_UP: "broker {broker} is up",
    Refusal.LEADER_DOWN: "leader {leader} is down",
    Refusal.NO_LIVE_LEADER: "no live leader",
    Refusal.NOT_LEADER_IN_VIEW: "broker {broker} does not believe it leads",
    Refusal.TARGET_IS_CURRENT_LEADER: "broker {broker} is the controller's leader: a send with "
                                      "current metadata names no broker",
    Refusal.DOES_NOT_LEAD_IN_VIEW: "broker {broker} does not lead in its view",
    Refusal.DOES_NOT_LEAD: "broker {broker} does not lead",
    Refusal.FOLLOWS_NOBODY: "broker {broker} follows nobody",
    Refusal.NOTHING_NEW: "nothing new below HW",
    Refusal.NOTHING_IN_FLIGHT: "nothing in flight",
    Refusal.NO_SUCH_PRODUCE: "no such produce request in flight",
    Refusal.NO_PENDING_WRITE: "no write at offset {offset} in purgatory",
    Refusal.HW_NOT_PAST: "HW {high_watermark} has not passed {offset}",
    Refusal.NO_REQUEST_IN_FLIGHT: "no request in flight",
    Refusal.REQUEST_FOR_OTHER_BROKER: "request is for broker {broker}",
    Refusal.CONNECTION_BUSY: "a request or response is in flight",
    Refusal.NO_RESPONSE_IN_FLIGHT: "no response in flight",
    Refusal.OWN_MEMBERSHIP: "a leader does not change its own membership",
    Refusal.COMPARE_AND_SET_FAILS: "compare-and-set fails: view {view_leader_epoch}/"
                                   "{view_partition_epoch}, store {leader_epoch}/{partition_epoch}",
    Refusal.NOT_IN_ISR: "{follower} not in ISR",
    Refusal.ALREADY_IN_ISR: "{follower} already in ISR",
    Refusal.CAUGHT_UP: "{follower} has caught up",
    Refusal.NOT_LAGGING: "{follower} is not lagging",
    Refusal.BELOW_HIGH_WATERMARK: "{follower} is below HW",
    Refusal.BELOW_EPOCH_START: "{follower} is below the epoch start {offset}",
    Refusal.STALE_BROKER_EPOCH: "stale broker epoch {broker_epoch} for {follower}",
    Refusal.NOTHING_TO_FLUSH: "nothing to flush",
    Refusal.FLUSH_MOOT: "no crash left in the bounds: flushing is moot",
    Refusal.ISR_CHANGE_PENDING: "an ISR change is already in flight",
    Refusal.NO_SUCH_ALTER_PARTITION: "no such AlterPartition in flight",
    Refusal.NO_CONTROLLER: "no controller: broker {broker} is down and its session lingers",
    Refusal.CONTROLLER_FAILOVERS_BOUND: "max.controller.failovers reached",
}


def render(code: str, fields: Mapping[str, Any] | None = None) -> str:
    """The English for a code and its fields. Kafka error codes render as their name."""
    template = _ENGLISH.get(code)
    if template is None:
        return str(code)
    fields = fields or {}
    if callable(template):
        return template(fields)
    return template.format_map(fields)


class Outcome:
    """What a transition did: a `Code` and its fields (ints, bools, lists of ints).

    `str()` is the English (`render`); equality is by code and fields, so tests and replay
    compare data, never text.
    """

    __slots__ = ("code", "fields")

    def __init__(self, code: Code, **fields: Any):
        self.code = code
        self.fields = fields

    def __str__(self) -> str:
        return render(self.code, self.fields)

    def __repr__(self) -> str:
        inner = "".join(f", {k}={v!r}" for k, v in self.fields.items())
        return f"Outcome({self.code.name}{inner})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Outcome):
            return NotImplemented
        return self.code == other.code and self.fields == other.fields

    def __hash__(self) -> int:
        return hash(self.code)

    def to_json(self) -> tuple[str, dict[str, Any]]:
        """(code, fields) as a trace line holds them: `outcome` and `outcome_args`."""
        return str(self.code), dict(self.fields)
