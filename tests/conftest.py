"""Small helpers shared by the spec tests: build configs, drive states by actions, read guards.

Tests drive the spec the way the model checker does: from `initial_state(config)` through a
sequence of actions, each of which must be enabled. `produce` and `fetch` expand to the action
triples the scenario runner uses, so a test reads like a transcript.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Iterable

import pytest

from spec import VARIANTS, Config, NotEnabled, initial_state, step, step_with_outcome
from spec.actions import (
    Action,
    FollowerHandleFetchResponse,
    FollowerSendFetch,
    LeaderAppend,
    LeaderHandleFetch,
    ProducerSend,
)
from spec.state import Cluster, Record
from vocab.outcomes import Outcome, Refusal


def pytest_collection_modifyitems(items):
    """Files with slow tests first, each file kept together (its module fixtures are built
    once): with two workers (make test) the quick files then fill the tail, so neither worker
    is left alone with a long file at the end."""
    slow = {item.module for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.module not in slow)


@pytest.fixture(autouse=True, scope="session")
def _temp_dirs_under_pytest(tmp_path_factory):
    """Commands that leave their output in a new temp dir for the user (isrlab check --drive)
    leave it under pytest's own, which pytest prunes, not in /tmp."""
    saved, tempfile.tempdir = tempfile.tempdir, str(tmp_path_factory.mktemp("tempfile"))
    yield
    tempfile.tempdir = saved


# Exploration bounds the tests rely on. Config's own defaults are tuned for the explorer and
# change with it; tests set what they need here (only fields the Config has).
TEST_BOUNDS = {"max_ticks": 2, "max_session_expiries": 1, "max_message_drops": 1}


def cfg(variant: str = "current", **changes: object) -> Config:
    """A config for the named variant with some fields changed (Python field names)."""
    names = {f.name for f in dataclasses.fields(Config)}
    bounds = {k: v for k, v in TEST_BOUNDS.items() if k in names}
    return Config(variant=VARIANTS[variant], **{**bounds, **changes})


def v(value: int, epoch: int = 0) -> Record:
    """The record of `value` written in leader epoch `epoch` (v1@e0 in a transcript)."""
    return Record(epoch, value)


def _flatten(actions: Iterable) -> list[Action]:
    out = []
    for a in actions:
        if isinstance(a, Action):
            out.append(a)
        else:
            out.extend(_flatten(a))
    return out


def run_from(config: Config, state: Cluster, *actions) -> Cluster:
    """Apply the actions in order (tuples are flattened); each one must be enabled."""
    for action in _flatten(actions):
        state = step(config, state, action)
    return state


def run(config: Config, *actions) -> Cluster:
    """The state reached from `initial_state(config)` by the given actions."""
    return run_from(config, initial_state(config), *actions)


def outcomes(config: Config, state: Cluster, *actions) -> tuple[Cluster, list[Outcome]]:
    """Apply the actions; return the final state and the outcome (code and fields) of each."""
    said = []
    for action in _flatten(actions):
        state, outcome = step_with_outcome(config, state, action)
        said.append(outcome)
    return state, said


def outcome(config: Config, state: Cluster, action: Action) -> tuple[Cluster, Outcome]:
    """Apply one action; return the next state and its outcome (code and fields)."""
    return step_with_outcome(config, state, action)


def not_enabled(config: Config, state: Cluster, action: Action) -> tuple[Refusal, dict]:
    """Assert that `action` is not enabled in `state`; return the refusal code and fields
    (compare with `refused(...)`; the English wording is free to change)."""
    with pytest.raises(NotEnabled) as info:
        step(config, state, action)
    return info.value.code, dict(info.value.fields)


def refused(code: Refusal, **fields: object) -> tuple[Refusal, dict]:
    """The expected value of `not_enabled`: a refusal code and its fields."""
    return code, fields


def produce(value: int, leader: int = 0, partition: int = 0) -> tuple[Action, ...]:
    """ProducerSend then LeaderAppend of write `value` (values are 1, 2, ... in send order)."""
    return ProducerSend(partition), LeaderAppend(partition, leader, value)


def fetch(follower: int, leader: int = 0, partition: int = 0) -> tuple[Action, ...]:
    """One fetch round trip: the follower sends, the leader answers, the follower applies."""
    return (
        FollowerSendFetch(partition, follower),
        LeaderHandleFetch(partition, leader, follower),
        FollowerHandleFetchResponse(partition, follower),
    )


def last_record_epoch_fetch(handlers: dict):
    """A FollowerSendFetch mutant for `handlers` (spec.actions._HANDLERS): the fetch carries
    the follower's last record's epoch, not its cache's latest (Kafka's `latestEpoch`)."""
    from spec.actions import FollowerSendFetch
    from spec.state import FetchRequest

    real = handlers[FollowerSendFetch]

    def send(config, s, a):
        s2, out = real(config, s, a)
        m = s2.fetches[a.partition][a.broker]
        if isinstance(m, FetchRequest):
            log = s.replica(a.partition, a.broker).log
            s2 = s2.with_fetch(a.partition, a.broker, dataclasses.replace(
                m, last_fetched_epoch=log[-1].epoch if log else -1))
        return s2, out
    return send
