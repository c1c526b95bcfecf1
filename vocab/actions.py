"""Action names: one spelling for the spec, trace lines, scenario files, Spark columns and docs.

A spec action is a transition of the formal model (`spec.actions` defines one class per name
here, and a test checks the two lists agree). An implementation-only action is a transition the
reference broker logs that the spec has no counterpart for: trace replay treats it as a check or
as silent (docs/traces.md).
"""

from __future__ import annotations

import re
from enum import StrEnum


class ActionName(StrEnum):
    """Every action name, actor first, then verb."""

    CONTROLLER_ELECT_LEADER = "ControllerElectLeader"
    CONTROLLER_HANDLE_BROKER_FAILURE = "ControllerHandleBrokerFailure"
    CONTROLLER_ELECT_PREFERRED_LEADER = "ControllerElectPreferredLeader"
    NETWORK_DROP_LEADER_AND_ISR = "NetworkDropLeaderAndIsr"
    NETWORK_DROP_FETCH = "NetworkDropFetch"
    BECOME_LEADER = "BecomeLeader"
    BECOME_FOLLOWER = "BecomeFollower"
    PRODUCER_SEND = "ProducerSend"
    CONSUMER_READ = "ConsumerRead"
    LEADER_APPEND = "LeaderAppend"
    LEADER_ACK_PRODUCE = "LeaderAckProduce"
    LEADER_HANDLE_FETCH = "LeaderHandleFetch"
    LEADER_SHRINK_ISR = "LeaderShrinkIsr"
    LEADER_EXPAND_ISR = "LeaderExpandIsr"
    # KIP-497: the controller answers a leader's AlterPartition; the leader applies the answer.
    CONTROLLER_HANDLE_ALTER_PARTITION = "ControllerHandleAlterPartition"
    LEADER_HANDLE_ALTER_PARTITION_RESPONSE = "LeaderHandleAlterPartitionResponse"
    FOLLOWER_SEND_FETCH = "FollowerSendFetch"
    FOLLOWER_HANDLE_FETCH_RESPONSE = "FollowerHandleFetchResponse"
    BROKER_FLUSH = "BrokerFlush"
    BROKER_CRASH = "BrokerCrash"
    BROKER_RESTART = "BrokerRestart"
    BROKER_REGISTER = "BrokerRegister"
    TICK = "Tick"
    # Implementation-only: the leader learns its ISR change committed (replay compares its
    # state); the leader served a consumer read; a message was lost by the network or nemesis.
    LEADER_APPLY_ISR = "LeaderApplyIsr"
    CONSUMER_SERVE = "ConsumerServe"
    NETWORK_DROP = "NetworkDrop"


IMPLEMENTATION_ONLY: frozenset[ActionName] = frozenset(
    {ActionName.LEADER_APPLY_ISR, ActionName.CONSUMER_SERVE, ActionName.NETWORK_DROP}
)
SPEC_ACTIONS: tuple[ActionName, ...] = tuple(a for a in ActionName if a not in IMPLEMENTATION_ONLY)


def command(name: str) -> str:
    """The scenario-file spelling: `LeaderShrinkIsr` -> `leader-shrink-isr`."""
    return re.sub(r"(?<!^)(?=[A-Z])", "-", str(name)).lower()
