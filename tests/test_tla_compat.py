"""The tla-compat model against TLC on hachikuji/kafka-specification.

The numbers pinned here come from TLC 2.18 (tla2tools.jar of 20 March 2023) run on the
upstream modules (commit d68782b) with

    java -XX:+UseParallelGC -cp tla2tools.jar tlc2.TLC -workers 1 -deadlock \
        -config <Module>_<set>.cfg <Module>.tla

and a config per variant and constant set, no SYMMETRY:

    CONSTANTS
        Replicas = {r1, r2, r3}      \\* A: 3 brokers; B and C: {r1, r2}
        LogSize = 2                  \\* A, B: 2; C: 1
        MaxRecords = 2               \\* A, B: 2; C: 1
        MaxLeaderEpoch = 2           \\* A: 2; B: 3; C: 2
    INIT Init
    NEXT Next
    INVARIANTS WeakIsr StrongIsr     \\* omitted for the full-graph counts

(TLC cannot evaluate the spec's TypeOk, so it is not in the configs.) TLC counts the initial
state as depth 1 and prints k+1 states for a k-step counterexample; here a depth or a
counterexample length is a number of steps. TLC's "states generated" counts a transition once
per true disjunct of a non-exclusive disjunction; the model's `reference_successors` does the
same, so the generated counts are compared through it.

The BFS helper below stands in for `model_check.explore.explorer.explore` until the tests switch to it.
"""

from __future__ import annotations

import json
from itertools import permutations

import pytest

from model_check.explore.explorer import explore
from model_check.explore.tla_compat import (
    ACTIONS,
    NONE,
    QuorumState,
    ReplicaState,
    TlaCompatModel,
    TlaState,
)

A = (3, 2, 2, 2)  # brokers, LogSize, MaxRecords, MaxLeaderEpoch
B = (2, 2, 2, 3)
C = (2, 1, 1, 2)
VARIANTS = ("hw-truncation", "kip-101", "kip-279", "kip-320")

# TLC, invariants off: (distinct states, states generated, depth in steps).
TLC_FULL = {
    ("hw-truncation", A): (1_988_158, 7_491_589, 27),
    ("kip-320", A): (737_794, 1_967_560, 25),
    ("hw-truncation", B): (62_855, 168_409, 22),
    ("kip-101", B): (53_413, 141_211, 20),
    ("kip-279", B): (53_099, 152_513, 20),
    ("kip-320", B): (28_939, 59_571, 21),
    ("hw-truncation", C): (2_149, 4_829, 14),
    ("kip-101", C): (1_995, 4_509, 13),
    ("kip-279", C): (1_995, 5_233, 13),
    ("kip-320", C): (1_365, 2_505, 13),
}

# TLC with INVARIANTS WeakIsr StrongIsr: (violated invariant, steps) or None.
TLC_VERDICT = {
    ("hw-truncation", A): ("WeakIsr", 8),
    ("kip-101", A): ("WeakIsr", 10),
    ("kip-279", A): ("WeakIsr", 10),
    ("kip-320", A): None,
    ("hw-truncation", B): ("WeakIsr", 8),
    ("kip-101", B): ("WeakIsr", 11),
    ("kip-279", B): None,
    ("kip-320", B): None,
    ("hw-truncation", C): ("WeakIsr", 8),
    ("kip-101", C): None,
    ("kip-279", C): None,
    ("kip-320", C): None,
}

# TLC with INVARIANT StrongIsr alone.
TLC_STRONG_ONLY = {
    ("hw-truncation", A): 8,
    ("kip-101", A): 10,
    ("kip-279", A): 10,
    ("hw-truncation", B): 9,
    ("kip-101", B): 11,
    ("kip-279", B): None,
}

# Ours, broker symmetry on, invariants off (B).
SYMMETRIC_B = {"hw-truncation": 31_428, "kip-101": 26_707, "kip-279": 26_550, "kip-320": 14_470}

# Runs small enough for the test suite (the rest are left to the benchmark).
FAST_FULL = [k for k in TLC_FULL if k[1] != A]
FAST_VERDICT = [k for k in TLC_VERDICT if not (k[1] == A and TLC_VERDICT[k] is None)]


def bfs(model, check: bool = True, symmetry: bool = False, keep: bool = False):
    """Counts and verdict from the project's explorer (`model_check.explore.explorer.explore`); with
    `keep`, a plain level-by-level BFS that also lists every reachable state."""
    if not keep:
        result = explore(model, symmetry=symmetry, check_invariants=check)
        violation = None
        if result.violation is not None:
            violation = (result.violation.invariant, len(result.violation.trace) - 1)
        return {"distinct": result.distinct_states, "depth": result.depth,
                "violation": violation, "generated": result.generated_states,
                "fired": {k for k, v in result.coverage.items() if v}}
    canon = model.canonical if symmetry else (lambda s: s)
    level = list({canon(s) for s in model.init_states()})
    seen = set(level)
    order = list(level) if keep else None
    invariants = list(model.invariants.items()) if check else []
    depth, generated, fired = 0, len(level), set()
    while level:
        violated = None
        for state in level:
            for i, (name, inv) in enumerate(invariants):
                if inv(state) is not None and (violated is None or i < violated[0]):
                    violated = (i, name)
        if violated:
            return {"distinct": len(seen), "depth": depth, "violation": (violated[1], depth),
                    "states": order}
        nxt = []
        for state in level:
            for label, succ in model.successors(state):
                generated += 1
                fired.add(label[0])
                succ = canon(succ)
                if succ not in seen:
                    seen.add(succ)
                    nxt.append(succ)
        if nxt:
            depth += 1
            if keep:
                order.extend(nxt)
        level = nxt
    return {"distinct": len(seen), "depth": depth, "violation": None, "generated": generated,
            "fired": fired, "states": order}


def permute(model: TlaCompatModel, state, perm):
    """`state` with replica r renamed perm[r], through the TLA+-shaped decoding."""
    v = model.decode(state)

    def rn(r):
        return r if r == NONE else perm[r]

    def rs(x):
        return frozenset(perm[r] for r in x)

    logs = [None] * len(perm)
    rstates = [None] * len(perm)
    for r, (log, st) in enumerate(zip(v.replicaLog, v.replicaState, strict=True)):
        logs[perm[r]] = log
        rstates[perm[r]] = ReplicaState(st.hw, st.leaderEpoch, rn(st.leader), rs(st.isr))
    return model.layout.encode(TlaState(
        tuple(logs), tuple(rstates), v.nextRecordId, v.nextLeaderEpoch,
        frozenset(QuorumState(rn(q.leader), q.leaderEpoch, rs(q.isr))
                  for q in v.leaderAndIsrRequests),
        QuorumState(rn(v.quorumState.leader), v.quorumState.leaderEpoch,
                    rs(v.quorumState.isr))))


@pytest.mark.parametrize("variant,consts", FAST_FULL, ids=lambda x: str(x))
def test_full_state_graph_matches_tlc(variant, consts):
    distinct, _generated, depth = TLC_FULL[(variant, consts)]
    result = bfs(TlaCompatModel(variant, *consts), check=False)
    assert (result["distinct"], result["depth"]) == (distinct, depth)
    assert result["fired"] == set(ACTIONS[variant])


@pytest.mark.parametrize("variant,consts", FAST_VERDICT, ids=lambda x: str(x))
def test_shortest_counterexample_matches_tlc(variant, consts):
    result = bfs(TlaCompatModel(variant, *consts))
    assert result["violation"] == TLC_VERDICT[(variant, consts)]
    if TLC_VERDICT[(variant, consts)] is None:
        assert result["distinct"] == TLC_FULL[(variant, consts)][0]


@pytest.mark.parametrize("variant,consts", [k for k in TLC_STRONG_ONLY if TLC_STRONG_ONLY[k]],
                         ids=lambda x: str(x))
def test_strong_isr_alone_matches_tlc(variant, consts):
    result = bfs(TlaCompatModel(variant, *consts, invariants=["StrongIsr"]))
    assert result["violation"] == ("StrongIsr", TLC_STRONG_ONLY[(variant, consts)])


@pytest.mark.parametrize("variant", VARIANTS)
def test_reference_agrees_with_fast_code_and_tlc_generated_count(variant):
    """On every state of C: the generated successor function equals the literal
    re-expression, the invariants agree with it, and its transitions number TLC's."""
    model = TlaCompatModel(variant, *C)
    ref = model.reference
    states = bfs(model, check=False, keep=True)["states"]
    generated = len(model.init_states())
    for state in states:
        fast = list(model.successors(state))
        slow = list(model.reference_successors(state))
        assert len(set(fast)) == len(fast)
        assert set(fast) == set(slow), model.render(state)
        generated += len(slow)
        v = model.decode(state)
        assert (model.invariants["WeakIsr"](state) is None) == ref.WeakIsr(v)
        assert (model.invariants["StrongIsr"](state) is None) == ref.StrongIsr(v)
    assert (len(states), generated) == TLC_FULL[(variant, C)][:2]


@pytest.mark.parametrize("variant", VARIANTS)
def test_reference_agrees_with_fast_code_on_a_sample_of_b(variant):
    model = TlaCompatModel(variant, *B)
    states = bfs(model, check=False, keep=True)["states"]
    for state in states[::40]:
        assert set(model.successors(state)) == set(model.reference_successors(state))
        assert model.invariants["WeakIsr"](state) is None or not model.reference.WeakIsr(
            model.decode(state))


@pytest.mark.parametrize("variant", VARIANTS)
def test_symmetry_reduces_and_keeps_verdicts(variant):
    model = TlaCompatModel(variant, *B)
    assert model.symmetric()
    full = bfs(model, check=False)
    reduced = bfs(model, check=False, symmetry=True)
    assert reduced["distinct"] == SYMMETRIC_B[variant] < full["distinct"]
    assert reduced["depth"] == full["depth"]
    assert bfs(model, symmetry=True)["violation"] == TLC_VERDICT[(variant, B)]


def test_symmetry_verdicts_at_three_brokers():
    for variant in ("hw-truncation", "kip-279"):
        result = bfs(TlaCompatModel(variant, *A), symmetry=True)
        assert result["violation"] == TLC_VERDICT[(variant, A)]


@pytest.mark.parametrize("variant", ["hw-truncation", "kip-320"])
def test_canonical_is_a_class_representative(variant):
    model = TlaCompatModel(variant, 3, 1, 1, 1)
    states = bfs(model, check=False, keep=True)["states"]
    for state in states[::41]:
        canon = model.canonical(state)
        assert canon <= state
        images = {permute(model, state, p) for p in permutations(range(3))}
        assert canon == min(images)
        assert all(model.canonical(x) == canon for x in images)


def test_model_protocol():
    model = TlaCompatModel("kip-320", *B)
    assert model.name == "tla-compat"
    assert list(model.invariants) == ["WeakIsr", "StrongIsr"]
    assert model.action_names() == ACTIONS["kip-320"]
    (init,) = model.init_states()
    assert model.invariants["WeakIsr"](init) is None
    assert json.loads(json.dumps(model.config_json())) == {
        "model": "tla-compat", "variant": "kip-320", "module": "Kip320", "Replicas": 2,
        "LogSize": 2, "MaxRecords": 2, "MaxLeaderEpoch": 3, "invariants": ["WeakIsr", "StrongIsr"]}
    data = model.to_json(init)
    assert set(data) == {"replicaLog", "replicaState", "nextRecordId", "nextLeaderEpoch",
                         "leaderAndIsrRequests", "quorumState"}
    assert data["quorumState"] == {"leader": "NONE", "leaderEpoch": -1, "isr": [0, 1]}
    assert data["replicaState"][0] == {"hw": 0, "leaderEpoch": -1, "leader": "NONE", "isr": []}
    # every action fires somewhere in the graph; labels decode; renders have no blank lines
    states = bfs(model, check=False, keep=True)["states"]
    fired = {model.action_name(label) for state in states for label, _ in model.successors(state)}
    assert fired == set(ACTIONS["kip-320"])
    for state in states[::97]:
        text = model.render(state)
        assert "\n\n" not in text and not text.endswith("\n")
        assert len(text.splitlines()) == 4 + 2
        json.dumps(model.to_json(state))
        for label, _ in model.successors(state):
            assert len(model.action_args(label)) == len(label) - 1


def test_a_short_run_reads_like_the_spec():
    model = TlaCompatModel("hw-truncation", *B)
    state = model.init_states()[0]
    for want in [("ControllerElectLeader", 0), ("BecomeLeader", 0, 0), ("LeaderWrite", 0),
                 ("BecomeFollowerTruncateToHighWatermark", 0, 1, 0), ("FollowerReplicate", 1, 0),
                 ("LeaderIncHighWatermark", 0)]:
        state = dict(model.successors(state))[want]
    data = model.to_json(state)
    assert data["replicaLog"][1] == {"endOffset": 1, "records": [{"id": 0, "epoch": 0}, -1]}
    assert data["replicaState"][0] == {"hw": 1, "leaderEpoch": 0, "leader": 0, "isr": [0, 1]}
    assert data["replicaState"][1] == {"hw": 0, "leaderEpoch": 0, "leader": 0, "isr": [0, 1]}
    assert model.action_args(("BecomeFollowerTruncateToHighWatermark", 0, 1, 0)) == {
        "leader": 0, "replica": 1, "leaderEpoch": 0}


def test_type_ok_holds_and_leader_in_isr_fails_initially():
    model = TlaCompatModel("kip-101", *C, invariants=["TypeOk", "LeaderInIsr"])
    states = bfs(model, check=False, keep=True)["states"]
    assert all(model.invariants["TypeOk"](s) is None for s in states[::5])
    assert model.invariants["LeaderInIsr"](states[0]) is not None
    assert bfs(model)["violation"] == ("LeaderInIsr", 0)


def test_rejects_unknown_names():
    with pytest.raises(ValueError):
        TlaCompatModel("kip-999", *B)
    with pytest.raises(ValueError):
        TlaCompatModel("kip-320", *B, invariants=["Nope"])


def test_pickles_by_its_constructor_arguments():
    import pickle

    model = TlaCompatModel("kip-101", *B, invariants=["StrongIsr"])
    copy = pickle.loads(pickle.dumps(model))
    state = model.init_states()[0]
    assert copy.config_json() == model.config_json()
    assert copy.successors(state) == model.successors(state)
