"""Controller failover in the spec: the role moves through the metadata store with a controller
epoch, a request from a stale controller is fenced and changes nothing but the requests in
flight, and nothing moves while no broker holds the role.

The explorer's pinned runs (clean on `current`, the epoch-keeping mutant caught by
SingleControllerPerEpoch) are in tests/test_rediscovery.py; the transcript is
tests/testdata/controller_failover.txt.
"""

from __future__ import annotations

import json
from collections import Counter, deque
from dataclasses import replace

import pytest
from conftest import cfg

from spec import initial_state
from spec.actions import (
    BecomeFollower,
    BecomeLeader,
    ControllerElectLeader,
    ControllerHandleBrokerFailure,
    NotEnabled,
    candidates,
    step_with_outcome,
)
from vocab.outcomes import Code, Refusal

pytestmark = pytest.mark.xdist_group("test_controller_failover")  # one worker builds its shared fixtures

# Two brokers, no writes, two session expiries, one failover: small enough to walk whole.
CONFIG = cfg(brokers=2, max_records=0, max_crashes=0, max_session_expiries=2,
             max_controller_failovers=1, max_leader_epochs=3, max_ticks=0, max_message_drops=0)


def walk(config):
    """Every reachable state and every enabled step (state, action, next, outcome)."""
    start = initial_state(config)
    seen = {start}
    queue = deque([start])
    steps = []
    while queue:
        s = queue.popleft()
        for a in candidates(config, s):
            try:
                t, o = step_with_outcome(config, s, a)
            except NotEnabled:
                continue
            steps.append((s, a, t, o))
            if t not in seen:
                seen.add(t)
                queue.append(t)
    return seen, steps


@pytest.fixture(scope="module")
def walked():
    return walk(CONFIG)


def test_the_role_moves_and_stale_requests_are_fenced(walked):
    states, steps = walked
    roles = {(s.controller.active, s.controller.epoch) for s in states}
    # Broker 1 wins when broker 0's session expires, or whichever broker registers first when
    # both sessions expired.
    assert roles == {(0, 0), (1, 1), (0, 1)}
    codes = Counter(o.code for _, _, _, o in steps)
    assert codes[Code.STALE_CONTROLLER_EPOCH] > 0
    assert codes[Code.LEADER_AND_ISR_IGNORED] > 0
    takeovers = [o for _, _, _, o in steps if "controller" in o.fields]
    assert {(o.code, o.fields["controller"], o.fields["controller_epoch"]) for o in takeovers} == {
        (Code.BROKER_FAILURE_HANDLED, 1, 1), (Code.REGISTERED, 1, 1), (Code.REGISTERED, 0, 1)}


def test_a_fenced_request_changes_nothing_but_the_requests_in_flight(walked):
    _, steps = walked
    fenced = [(s, a, t, o) for s, a, t, o in steps if o.code == Code.STALE_CONTROLLER_EPOCH]
    assert fenced
    for s, a, t, o in fenced:
        assert isinstance(a, BecomeLeader | BecomeFollower)
        assert a.controller_epoch < s.controller_epoch_seen(a.broker)
        (m,) = s.leader_and_isr - t.leader_and_isr
        assert m.controller_epoch == a.controller_epoch
        assert t == replace(s, leader_and_isr=t.leader_and_isr)
        assert o.fields == {"controller_epoch": a.controller_epoch,
                            "seen": s.controller_epoch_seen(a.broker)}


def test_an_applied_request_raises_the_epoch_the_broker_has_seen(walked):
    _, steps = walked
    applied = [(s, a, t) for s, a, t, o in steps
               if isinstance(a, BecomeLeader | BecomeFollower) and a.controller_epoch
               and o.code not in (Code.STALE_CONTROLLER_EPOCH, Code.LEADER_AND_ISR_IGNORED)]
    assert applied
    for _, a, t in applied:
        assert t.controller_epoch_seen(a.broker) == a.controller_epoch


def test_nothing_is_elected_while_the_controller_is_down(walked, monkeypatch):
    states, _ = walked
    # Both sessions expired before any broker took the role: no broker can win it until one
    # registers, so the controller's actions wait, refused for that reason and no other.
    headless = [s for s in states
                if s.controller.registered == (-1, -1) and s.controller.epoch == 0]
    assert headless and all(s.controller.partitions[0].leader == -1 for s in headless)

    def refusals():
        found = set()
        for s in headless:
            try:
                step_with_outcome(CONFIG, s, ControllerElectLeader(0))
            except NotEnabled as e:
                found.add(e.code)
            else:
                found.add("enabled")
        return found

    assert refusals() == {Refusal.NO_CONTROLLER}
    # Without the gate the same states are refused for another reason: the check above sees it.
    import spec.actions
    monkeypatch.setattr(spec.actions, "_require_controller", lambda config, s: None)
    assert Refusal.NO_CONTROLLER not in refusals()


def test_the_bound_stops_a_second_failover(walked):
    states, _ = walked
    at_bound = [s for s in states if s.controller.epoch == 1 and s.controller.active == 1
                and s.controller.registered[1] != -1 and s.expiries < 2]
    assert at_bound
    with pytest.raises(NotEnabled) as e:
        step_with_outcome(CONFIG, at_bound[0], ControllerHandleBrokerFailure(1))
    assert e.value.code == Refusal.CONTROLLER_FAILOVERS_BOUND


def test_without_failovers_the_requests_carry_no_controller():
    config = cfg(brokers=2, max_records=0, max_session_expiries=2, max_leader_epochs=3, max_ticks=0,
                 max_message_drops=0)
    states, steps = walk(config)
    assert all(s.controller.active == 0 and s.controller.epoch == 0 for s in states)
    assert all(m.controller_epoch == 0 for s in states for m in s.leader_and_isr)
    assert not any(o.code in (Code.STALE_CONTROLLER_EPOCH, Code.LEADER_AND_ISR_IGNORED)
                   for *_, o in steps)


def test_the_documented_command_is_clean_and_fails_over(capsys):
    # docs/protocol.md, "Controller failover": the command and its count.
    from isrlab.cli import main

    code = main(["check", "--variant", "current", "--brokers", "2", "--records", "1",
                 "--epochs", "2", "--crashes", "1", "--controller-failovers", "1", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert (out["result"], out["distinct_states"], out["depth"]) == ("ok", 44966, 33)
