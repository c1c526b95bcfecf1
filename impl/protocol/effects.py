"""Carrying out a core's effects: the one loop both drivers (the simulator and the TCP node) run.

The loop owns what every driver must do the same way for a trace to replay: message ids are
drawn from the node's trace in effect order, a transition's messages are sent before its event
line is written (the line lists their ids), and history lines go to the trace as they come.
What differs between drivers (how a message travels, how the disk is written, what a recall
does) is the driver's `Handlers`. A message the network loses is traced by `trace_drop`, in one
shape for both drivers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from impl.protocol.messages import (
    DiskAppend,
    DiskCheckpoint,
    DiskFlush,
    DiskTruncate,
    History,
    LeaderAndIsr,
    Message,
    Recall,
    Send,
    Transition,
)
from vocab.actions import ActionName
from vocab.outcomes import Code

if TYPE_CHECKING:
    from impl.trace import NodeTrace

DISK_EFFECTS = (DiskAppend, DiskFlush, DiskTruncate, DiskCheckpoint)


class Handlers(Protocol):
    """What one node's driver does with each kind of effect."""

    def send(self, dst: str, mid: str, message: Message, now: int) -> None:
        """Send `message`, which the trace names `mid`."""

    def traced(self, transition: Transition) -> None:
        """After a transition's event line is written, its messages sent."""

    def sent(self) -> None:
        """After the message of a `Send` is sent."""

    def store(self, effect: DiskAppend | DiskFlush | DiskTruncate | DiskCheckpoint) -> None:
        """Carry out a disk operation (in effect order)."""

    def recall(self, recall: Recall) -> None:
        """Take back an unread request (see `Recall`)."""


def apply_effects(effects: list, now: int, trace: NodeTrace, handlers: Handlers) -> None:
    """Carry out `effects` in order at time `now` (ms), writing the node's trace."""
    for effect in effects:
        kind = type(effect)
        if kind is Transition:
            sends = []
            for dst, message in effect.sends:
                mid = trace.message_id()
                sends.append(mid)
                handlers.send(dst, mid, message, now)
            trace.event(now, effect.action, effect.args, effect.outcome, effect.outcome_args,
                        effect.state, sends, effect.recv, effect.detail)
            handlers.traced(effect)
        elif kind is Send:
            handlers.send(effect.dst, trace.message_id(), effect.message, now)
            handlers.sent()
        elif kind is History:
            trace.other(effect.body)
        elif kind in DISK_EFFECTS:
            handlers.store(effect)
        elif kind is Recall:
            handlers.recall(effect)


def trace_drop(trace: NodeTrace, now: int, src: str, dst: str, mid: str, message: Message,
               why: str) -> None:
    """Write the NetworkDrop event of a message the network lost (`why`: unreachable,
    partition, recalled, ...), with the partition and, for a LeaderAndIsr, its epochs."""
    detail = {"src": src, "dst": dst, "type": type(message).__name__, "why": why}
    if type(message) is LeaderAndIsr:
        detail.update(partition=message.partition, leader_epoch=message.leader_epoch,
                      partition_epoch=message.partition_epoch)
    elif hasattr(message, "partition"):
        detail["partition"] = message.partition
    trace.event(now, ActionName.NETWORK_DROP, {}, Code.DROPPED, {}, None, [], mid, detail)
