"""The two facts BMC's speed rests on, checked against the spec on random walks.

- `int_range`: every integer of every state within d steps lies in `int_range(config, d)`.
  The bit-vector translation is exact only then (a value outside would be cut off).
- `kind_ranges`: every state reached has a symbolic representative whose fields lie in the
  ranges of their kinds (a broker id in [-1, n-1], an offset in [-1, max.records], ...). BMC
  asserts them of every state, so a reachable state outside them would be missed.
- `independent_pairs`: two action instances called independent commute in the spec: from any
  state where both are enabled, either order is enabled and ends in the same state. The
  normal-form constraints drop every run that is not the smallest of its class, which keeps
  the shortest violations only if this holds.
- `_BitVectors`: BMC asks an incremental bit-vector solver; the translation from integers is
  exact because every term's interval fits the chosen width, and a term that may not fit is
  refused rather than wrapped around.
Each check is also shown to fail: on a range that is too small, on a dependent pair, and on a
width too narrow for a sum.
"""

from __future__ import annotations

import itertools
import random

import pytest
import z3

from model_check.explore.model import state_to_json
from model_check.prove import symbolic as sym
from model_check.prove.engine import (
    _BitVectors,
    _int_bounds,
    _IntModel,
    choice,
    independent_pairs,
    int_range,
    kind_ranges,
)
from model_check.prove.houdini import breadth_first
from spec import VARIANTS, Config, initial_state, step
from spec.actions import NotEnabled, successors

CONFIGS = {
    # `isrlab prove --bmc` defaults (docs/usage.md's depth-12 query, which finds B7)
    "bmc-defaults": Config(brokers=2, max_records=1, max_leader_epochs=2, max_crashes=1,
                           variant=VARIANTS["hw-truncation"]),
    # the differential test's bounds, at 3 brokers, with drops, ticks and an expiry
    "wide": Config(brokers=3, acks="1", max_records=3, max_leader_epochs=4, max_crashes=2,
                   max_session_expiries=1, max_ticks=3, max_message_drops=2,
                   log_flush_interval_messages=1, variant=VARIANTS["current"]),
    "kip-320-unclean": Config(brokers=3, max_records=2, max_leader_epochs=3, max_crashes=2,
                              unclean_leader_election_enable=True, variant=VARIANTS["kip-320"]),
}


def _walks(config: Config, seed: int, walks: int = 40, steps: int = 40):
    """(depth, state, successors) along random walks."""
    rnd = random.Random(seed)
    for _ in range(walks):
        state = initial_state(config)
        for depth in range(steps):
            succ = list(successors(config, state))
            yield depth, state, succ
            if not succ:
                break
            state = rnd.choice(succ)[1]


def _ints(value) -> list[int]:
    if isinstance(value, bool):
        return []
    if isinstance(value, int):
        return [value]
    if isinstance(value, dict):
        return [x for v in value.values() for x in _ints(v)]
    if isinstance(value, list):
        return [x for v in value for x in _ints(v)]
    return []


def _out_of_range(config: Config, ranges) -> list[tuple[int, int]]:
    """(depth, value) for every integer outside `ranges(config, depth)` on the walks."""
    bad = []
    for depth, state, _ in _walks(config, seed=7):
        low, high = ranges(config, depth)
        bad += [(depth, v) for v in _ints(state_to_json(state)) if not low <= v <= high]
    return bad


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_every_integer_stays_in_the_bmc_range(name):
    assert _out_of_range(CONFIGS[name], int_range) == []


def test_the_range_check_can_fail():
    # -1 (no leader, unknown) occurs in every run, and counters pass 3 on long walks.
    bad = _out_of_range(CONFIGS["wide"], lambda config, depth: (0, 3))
    assert any(v == -1 for _, v in bad) and any(v > 3 for _, v in bad)


def _reachable(config: Config, max_depth: int) -> list:
    """(depth, state) for every state within `max_depth` steps."""
    return list(itertools.takewhile(lambda found: found[0] <= max_depth, breadth_first(config)))


def _outside_kinds(config: Config, states, adjust=lambda kinds: kinds) -> list:
    """The states (depth, state) with no symbolic representative inside `kind_ranges` at
    their depth (BMC to depth d asserts the ranges for d of every state)."""
    solvers, bad = {}, []
    for depth, state in states:
        if depth not in solvers:
            shape = sym.make_shape(config, bounded=True, pe_limit=max(depth, 1))
            low, high = int_range(config, depth)
            s = sym.fresh_state(shape, f"s{depth}.")
            solver = z3.Solver()
            solver.add(*_int_bounds(s, adjust(kind_ranges(shape, low, high)), low, high))
            solvers[depth] = (shape, s, solver)
        shape, s, solver = solvers[depth]
        try:
            stands_for = sym.represent(shape, state, s)
        except sym.NotRepresentable:
            continue
        solver.push()
        solver.add(stands_for)
        if solver.check() != z3.sat:
            bad.append((depth, state))
        solver.pop()
    return bad


B1 = Config(brokers=2, max_records=1, max_leader_epochs=2, max_crashes=1,
            log_flush_interval_messages=1, variant=VARIANTS["hw-truncation"])


def test_every_reachable_state_lies_in_the_field_ranges():
    # Every state B1's query reaches (the bench's BMC to depth 13: 6,175 states), and random
    # walks of wider bounds.
    states = list(_reachable(B1, 13))
    assert len(states) == 6_175
    assert _outside_kinds(B1, states) == []
    for config in CONFIGS.values():
        assert _outside_kinds(config, ((d, s) for d, s, _ in _walks(config, seed=7, walks=10,
                                                                     steps=30))) == []


def test_the_field_range_check_can_fail():
    # Without -1 among broker ids no state has a representative (a value with no produce
    # request in flight maps to -1); with offsets one short, a full log has none.
    states = list(_reachable(B1, 5))
    no_broker = _outside_kinds(B1, states, lambda k: {**k, "broker": (0, k["broker"][1])})
    assert len(no_broker) == len(states)
    full = _outside_kinds(B1, states, lambda k: {**k, "offset": (-1, k["offset"][1] - 1)})
    assert any(len(s.replicas[0][0].log) == B1.max_records for _, s in full)


def _commutes(config: Config, state, a, b) -> bool:
    try:
        return step(config, step(config, state, a), b) == step(config, step(config, state, b), a)
    except NotEnabled:
        return False


def _pairs_seen(config: Config):
    """(instance pair, state, action, action) for every two enabled actions on the walks."""
    table = sym.action_table(sym.make_shape(config))
    index = {(inst.name, inst.brokers): k for k, inst in enumerate(table)}
    for _, state, succ in _walks(config, seed=11, walks=15, steps=30):
        actions = [a for a, _ in succ if sym.encoded(a)]
        keys = [index[(i.name, i.brokers)] for i in
                (sym.instance_for(table, a, state) for a in actions)]
        for x in range(len(actions)):
            for y in range(x + 1, len(actions)):
                if keys[x] != keys[y]:
                    yield (min(keys[x], keys[y]), max(keys[x], keys[y])), state, actions[x], \
                        actions[y]


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_independent_instances_commute_in_the_spec(name):
    config = CONFIGS[name]
    shape = sym.make_shape(config)
    pairs = independent_pairs(shape, sym.action_table(shape))
    checked = set()
    for pair, state, a, b in _pairs_seen(config):
        if pair in pairs:
            assert _commutes(config, state, a, b), f"{a} and {b} do not commute"
            checked.add(pair)
    assert len(checked) >= 10  # the walks meet many different independent pairs


def test_the_commutation_check_can_fail():
    # A crash disables the crashed follower's fetch: a dependent pair, and seen as one.
    config = CONFIGS["bmc-defaults"]
    shape = sym.make_shape(config)
    table = sym.action_table(shape)
    index = {(inst.name, inst.brokers): k for k, inst in enumerate(table)}
    crash, fetch = index[("BrokerCrash", (1,))], index[("FollowerSendFetch", (1,))]
    assert (min(crash, fetch), max(crash, fetch)) not in independent_pairs(shape, table)
    assert any(not _commutes(config, state, a, b)
               for pair, state, a, b in _pairs_seen(config)
               if pair == (min(crash, fetch), max(crash, fetch)))


def _one_range(name: str) -> tuple[int, int]:
    return -1, 31


def test_the_bit_vector_width_holds_every_term():
    # x, y in [-1, 31]: x + y reaches 62 and x - y -32, so 7 signed bits, and the sums and
    # differences a wrapped-around 6-bit translation would get wrong are found as integers.
    x, y = z3.Int("x"), z3.Int("y")
    ranges = [z3.And(-1 <= v, v <= 31) for v in (x, y)]
    for goal in (x + y == 62, x - y == -32, z3.And(x + y > 40, x < 20)):
        to_bv = _BitVectors.fitting([*ranges, goal], _one_range)
        assert to_bv.width == 7
        solver = z3.SolverFor("QF_BV")
        solver.add(*(to_bv(c) for c in [*ranges, goal]))
        assert solver.check() == z3.sat
        model = _IntModel(solver.model(), to_bv)
        values = {v: model.eval(v).as_long() for v in (x, y)}
        assert z3.is_true(z3.simplify(z3.substitute(goal, *(
            (v, z3.IntVal(n)) for v, n in values.items()))))
    # -1 < 0 must stay true: a translation with unsigned comparisons would call it false.
    solver = z3.SolverFor("QF_BV")
    to_bv = _BitVectors.fitting([x < 0], _one_range)
    solver.add(to_bv(z3.And(x == -1, x < 0)))
    assert solver.check() == z3.sat


def test_a_term_that_may_not_fit_the_width_is_refused():
    x, y = z3.Int("x"), z3.Int("y")
    with pytest.raises(ValueError, match="6-bit range"):
        _BitVectors(6, _one_range)(x + y == 62)


def test_a_selector_is_one_boolean_per_choice():
    # `sel == k` and `sel != k` become the k-th Boolean (a k outside the choices is false), and
    # a model reads the selector back as the choice whose Boolean holds.
    sel, x = z3.Int("act0"), z3.Int("x")
    to_bv = _BitVectors.fitting([sel == 2], _one_range, lambda name: 4 if name == "act0" else None)
    assert to_bv(sel == 2).eq(choice("act0", 2))
    assert to_bv(sel != 1).eq(z3.Not(choice("act0", 1)))
    assert z3.is_false(to_bv(sel == 7))
    assert not z3.is_bool(to_bv(x == 2).children()[0])  # other variables stay bit-vectors
    solver = z3.SolverFor("QF_BV")
    solver.add(z3.PbEq([(choice("act0", k), 1) for k in range(4)], 1), to_bv(sel != 0),
               to_bv(sel != 1), to_bv(sel != 3))
    assert solver.check() == z3.sat
    assert _IntModel(solver.model(), to_bv).eval(sel).as_long() == 2
    # Anywhere else the selector would be a bit-vector its Booleans do not bind: refused.
    for misuse in (sel < 2, sel >= 1, sel == z3.Int("act1")):
        with pytest.raises(ValueError, match="selector outside"):
            to_bv(misuse)
