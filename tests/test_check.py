"""The explorer and the `isrlab check` contract: exit codes, JSON, ITF, JUnit, workers, symmetry,
simulation. Counts are pinned so a change in the model or the explorer shows as a diff."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import fields

import numpy as np
import pytest

from isrlab.cli import main
from model_check.conformance.replay import spec_config
from model_check.explore.explorer import collision_probability, explore, simulate
from model_check.explore.model import KafkaModel
from model_check.explore.tla_compat import TlaCompatModel
from spec import VARIANTS, Config, initial_state, step
from spec.config import Variant
from spec.invariants import violations
from vocab.config import MODEL_KEYS

SMALL = ["--brokers", "2", "--records", "1", "--epochs", "2", "--crashes", "1"]


def run_json(capsys, *argv):
    code = main(["check", *argv, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out)


def test_violation_exits_1_with_the_shortest_trace_that_replays(capsys):
    code, data = run_json(capsys, "--variant", "hw-truncation", *SMALL)
    assert code == 1
    assert data["result"] == "violation"
    assert data["model"] == "kafka" and data["variant"] == "hw-truncation"
    assert data["violation"]["invariant"] == "NoCommittedDataLoss"
    trace = data["violation"]["trace"]
    assert trace[0]["action"] is None and len(trace) - 1 == data["depth"] == 12
    assert [t["action"] for t in trace[1:]] == [
        "ProducerSend", "LeaderAppend", "FollowerSendFetch", "LeaderHandleFetch",
        "FollowerHandleFetchResponse", "FollowerSendFetch", "LeaderHandleFetch", "BrokerCrash",
        "ControllerHandleBrokerFailure", "BecomeLeader", "LeaderExpandIsr", "BrokerRestart",
    ]
    assert set(data) >= {"config", "distinct_states", "generated_states", "depth", "seconds"}
    assert data["config"]["variant"] == "hw-truncation" and data["config"]["max.crashes"] == "1"
    # The trace is a real run of the spec: replay its actions and meet the same violation.
    import spec.actions as actions

    config = Config(variant=VARIANTS["hw-truncation"], brokers=2, max_records=1,
                    max_leader_epochs=2, max_crashes=1)
    state = initial_state(config)
    for item in trace[1:]:
        state = step(config, state, actions.ACTIONS_BY_NAME[item["action"]](**item["args"]))
    assert [name for name, _ in violations(config, state)] == ["NoCommittedDataLoss"]


def test_clean_variant_exits_0_with_pinned_counts(capsys):
    code, data = run_json(capsys, "--variant", "current", *SMALL)
    assert code == 0
    assert (data["result"], data["distinct_states"], data["depth"]) == ("ok", 42476, 33)
    assert data["never_fired"] == ["ControllerElectLeader", "ControllerElectPreferredLeader",
                                   "NetworkDropLeaderAndIsr", "NetworkDropFetch",
                                   "LeaderShrinkIsr", "Tick"]



def unshown_settings(shown: dict) -> list[str]:
    """Config fields and variant rules a `--json` config object leaves out."""
    field_of = {key.name: key.model.field for key in MODEL_KEYS}
    names = {field_of.get(k, k) for k in shown}
    wanted = [f.name for f in fields(Config)]
    wanted += [f"variant.{f.name}" for f in fields(Variant) if f.name != "name"]
    return [name for name in wanted if name not in names]


def test_json_config_shows_every_setting_and_it_is_the_replayed_model(capsys, tmp_path):
    code, data = run_json(capsys, "--variant", "current", *SMALL, "--max-states", "10")
    shown = data["config"]
    assert unshown_settings(shown) == []
    # The check fails on the file keys alone (unset limits and the variant's rules missing).
    assert unshown_settings(Config().to_properties()) == [
        "replication_factor", "replica_lag_max_messages", "log_flush_interval_messages", "variant.truncation",
        "variant.fencing", "variant.expand_requires_epoch_start", "variant.broker_epochs",
        "variant.hw_requires_min_isr", "variant.isr_shrink_bumps_leader_epoch",
        "variant.missed_epoch_resets_followers"]
    assert (shown["variant.truncation"], shown["variant.fencing"]) == ("diverging-epoch", "true")
    # The protocol settings and model switches are the ones replay holds a run of this
    # cluster to (replay lifts only the exploration bounds).
    header = {"brokers": 2, "partitions": 1, "variant": "current", "acks": "all",
              "min_insync_replicas": 1, "unclean_leader_election_enable": False}
    replayed = spec_config(header).settings()
    semantic = [k for k in shown if not k.startswith("max.")]
    assert {k: shown[k] for k in semantic} == {k: replayed[k] for k in semantic}
    assert shown["leader.keeps.last.fetch"] == shown["recovery.truncates.epoch.cache"] == "true"
    # A file that switches to the smaller abstraction is shown, and differs from replay's.
    path = tmp_path / "abstract.properties"
    path.write_text("leader.keeps.last.fetch=false\nrecovery.truncates.epoch.cache=false\n")
    code, data = run_json(capsys, "--config", str(path), "--variant", "current", *SMALL,
                          "--max-states", "10")
    assert data["config"]["leader.keeps.last.fetch"] == "false"
    assert {k: data["config"][k] for k in semantic} != {k: replayed[k] for k in semantic}

def test_max_states_exits_3(capsys):
    code, data = run_json(capsys, "--variant", "current", *SMALL, "--max-states", "500")
    assert code == 3
    assert data["result"] == "incomplete" and data["distinct_states"] == 500


@pytest.mark.parametrize("argv,message", [
    (["--variant", "nope"], "--variant: unknown variant 'nope'"),
    (["--invariant", "Nope"], "--invariant: unknown invariant 'Nope'"),
    (["--min-isr", "4"], "min.insync.replicas: must be between 1 and the number of brokers (3)"),
    (["--model", "tla-compat", "--variant", "current"], "tla-compat model has"),
])
def test_bad_usage_exits_2_with_one_line(capsys, argv, message):
    assert main(["check", *argv]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and message in err


def test_bad_config_file_exits_2_naming_file_and_line(capsys, tmp_path):
    path = tmp_path / "bad.properties"
    path.write_text("acks=all\nmin.insync.replicas=two\n")
    assert main(["check", "--config", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"isrlab check: error: {path}:2: min.insync.replicas: expected an integer, "
                   "got 'two'")


def test_config_file_then_flags(capsys, tmp_path):
    path = tmp_path / "c.properties"
    path.write_text("variant=hw-truncation\nbrokers=2\nmax.records=1\nmax.leader.epochs=2\n"
                    "max.crashes=1\n")
    code, data = run_json(capsys, "--config", str(path))
    assert (code, data["variant"]) == (1, "hw-truncation")
    code, data = run_json(capsys, "--config", str(path), "--variant", "current")
    assert (code, data["variant"], data["distinct_states"]) == (0, "current", 42476)


def test_invariant_selection_and_no_invariants(capsys):
    code, data = run_json(capsys, "--variant", "hw-truncation", *SMALL,
                          "--invariant", "LeaderInIsr")
    assert (code, data["result"]) == (0, "ok")
    code, data = run_json(capsys, "--variant", "hw-truncation", *SMALL, "--no-invariants")
    assert (code, data["result"]) == (0, "ok")
    assert data["distinct_states"] > 7450  # the whole space, not just up to the violation


def test_itf_and_junit_outputs(capsys, tmp_path):
    itf, junit = tmp_path / "cex.itf.json", tmp_path / "report.xml"
    code = main(["check", "--variant", "hw-truncation", *SMALL, "--itf", str(itf),
                 "--junit", str(junit)])
    assert code == 1
    out = capsys.readouterr().out
    assert "Invariant NoCommittedDataLoss is violated after 12 steps:" in out
    assert "step 12: BrokerRestart(broker=1)" in out
    trace = json.loads(itf.read_text())
    assert trace["#meta"]["format"] == "ITF"
    assert len(trace["states"]) == 13
    assert trace["states"][0]["#meta"] == {"index": 0}
    assert trace["states"][1]["action_taken"] == "ProducerSend"
    assert trace["states"][0]["next_value"] == {"#bigint": "1"}
    assert "replicas" in trace["vars"] and "_hash" not in trace["vars"]
    suite = ET.parse(junit).getroot()
    assert (suite.get("tests"), suite.get("failures")) == ("12", "1")
    failed = [c.get("name") for c in suite.iter("testcase") if c.find("failure") is not None]
    assert failed == ["NoCommittedDataLoss"]


def test_human_summary_flags_actions_that_never_fired(capsys):
    assert main(["check", "--variant", "current", *SMALL]) == 0
    out = capsys.readouterr().out
    assert out.startswith("OK: every checked invariant holds in every reachable state")
    assert "42,476 distinct states" in out
    assert "Tick                                        0   <- never fired" in out


@pytest.mark.parametrize("variant", ["hw-truncation", "current"])
def test_two_workers_give_identical_results(variant):
    config = Config(variant=VARIANTS[variant], brokers=2, max_records=1, max_leader_epochs=2,
                    max_crashes=1)
    one = explore(KafkaModel(config), workers=1)
    two = explore(KafkaModel(config), workers=2)
    assert (one.result, one.distinct_states, one.generated_states, one.depth) == (
        two.result, two.distinct_states, two.generated_states, two.depth)
    assert one.coverage == two.coverage
    if one.violation:
        assert [a for a, _ in one.violation.trace] == [a for a, _ in two.violation.trace]


def test_claims_tell_a_new_state_from_one_claimed_already():
    from model_check.explore.explorer import _Claims

    claims = _Claims(bits=4)
    mine = np.array([3, 19, 35, -7], dtype=np.int64)  # 3, 19 and 35 start at the same slot
    assert claims.claim(mine, 1).tolist() == [_Claims.NEW] * 4
    assert claims.claim(np.array([19, 4, -7], dtype=np.int64), 1).tolist() == [
        _Claims.CLAIMED, _Claims.NEW, _Claims.CLAIMED]
    assert claims.claim(np.array([35, 5], dtype=np.int64), 2).tolist() == [
        _Claims.CLAIMED, _Claims.NEW]
    # Two levels on, level 1's slots are free again: a new state takes the first.
    assert claims.claim(np.array([51], dtype=np.int64), 3).tolist() == [_Claims.NEW]
    assert claims.fps[3 & claims.mask] == 51


def test_claims_from_several_processes_leave_every_new_state_a_holder():
    # Four forked processes claim overlapping batches of new and earlier states in a small
    # table (collisions, slot reuse), level by level: each new state is NEW to at least one.
    import multiprocessing

    from model_check.explore.explorer import _Claims

    levels, per, workers = 30, 120, 4
    fps = np.random.default_rng(5).choice(np.arange(-10 ** 6, 10 ** 6, dtype=np.int64),
                                          levels * per, replace=False).reshape(levels, per)
    claims = _Claims(bits=7)

    def claim(w, conn):
        rng = np.random.default_rng(w)
        for level in range(1, levels + 1):
            conn.recv()
            mine = rng.permutation(np.concatenate(
                [rng.choice(fps[level - 1], per * 3 // 4, replace=False),
                 fps[max(0, level - 4):level - 1].ravel()[:per // 2]]))
            conn.send({fp: status for lo in range(0, len(mine), 9)
                       for fp, status in zip(mine[lo:lo + 9].tolist(),
                                             claims.claim(mine[lo:lo + 9], level).tolist(),
                                             strict=True)})

    ctx = multiprocessing.get_context("fork")
    pipes = [ctx.Pipe() for _ in range(workers)]
    procs = [ctx.Process(target=claim, args=(w, pipes[w][1]), daemon=True)
             for w in range(workers)]
    for proc in procs:
        proc.start()
    try:
        for level in range(1, levels + 1):
            for ours, _ in pipes:
                ours.send(level)
            seen = [ours.recv() for ours, _ in pipes]
            for fp in fps[level - 1].tolist():
                found = [got[fp] for got in seen if fp in got]
                assert not found or _Claims.NEW in found, (level, fp, found)
    finally:
        for proc in procs:
            proc.join(timeout=5)
            if proc.is_alive():  # the assertion above stopped the levels early
                proc.kill()


def test_shares_follow_speed_but_never_starve_a_worker():
    from model_check.explore.explorer import _shares

    assert _shares(10, [1.0, 1.0, 1.0]) == [4, 3, 3]
    assert _shares(900, [2.0, 1.0]) == [600, 300]
    # One very slow level: the slow worker still gets a fifth (its rate counted as a quarter
    # of the fastest's), and is measured again.
    assert _shares(1000, [50_000.0, 1_000.0]) == [800, 200]


def test_a_state_two_workers_find_in_one_level_is_built_by_one():
    # Two expanders sharing claims, as forked workers do, expand the same states: the second
    # reports every successor with its parent and index (the coordinator keeps the smallest)
    # but holds none, so none is built or checked twice.
    from model_check.explore.explorer import _Claims, _Expander, _merge_level, _Tree

    config = Config(variant=VARIANTS["current"], brokers=2, max_records=1, max_leader_epochs=2)
    model = KafkaModel(config)
    first, second = _Expander(model, False, True), _Expander(model, False, True)
    first.claims = second.claims = _Claims(bits=12)
    seeded, _ = first.seed(model.init_states())
    second.seed(model.init_states())
    fps = np.array(sorted(fp for fp, _ in seeded), dtype=np.int64)
    level = (np.arange(len(fps), dtype=np.int64), fps)
    one, two = first.expand(level, [], True), second.expand(level, [], True)
    (held_one, held_two) = (one[1][3], two[1][3])
    assert held_one == len(one[1][0]) > 0 and held_two == 0
    assert sorted(two[1][0]) == sorted(one[1][0])
    tree = _Tree()
    tree.add_level(fps, [-1] * len(fps), list(range(len(fps))))
    new, _, _, owner = _merge_level(tree, [two, one])  # the holder is the second reply
    assert len(new) == held_one and set(owner.tolist()) == {1}


def test_the_compiled_expander_is_this_explorer_py_and_searches_the_same(monkeypatch, tmp_path):
    from model_check.explore import compiled, explorer

    module = compiled.load_explorer()
    assert module is not None, "model_check.explore._explorer_c is absent or stale: `make install`"
    assert explorer._Expander is module._Expander is not explorer.PythonExpander
    config = Config(variant=VARIANTS["hw-truncation"], brokers=2, max_records=1,
                    max_leader_epochs=2, max_crashes=1)
    seen = []
    for expander in (explorer.PythonExpander, module._Expander):
        monkeypatch.setattr(explorer, "_Expander", expander)
        for workers in (1, 2):
            r = explore(KafkaModel(config), workers=workers)
            seen.append((r.result, r.distinct_states, r.generated_states, r.depth, r.coverage,
                         [label for label, _ in r.violation.trace]))
    assert seen[0][:2] == ("violation", 7400) and seen.count(seen[0]) == 4, seen
    edited = tmp_path / "explorer.py"
    edited.write_text(compiled.EXPLORER_SOURCE.read_text() + "\n")
    monkeypatch.setattr(compiled, "EXPLORER_SOURCE", edited)
    assert compiled.load_explorer() is None  # an edited explorer.py runs as Python


def test_auto_workers_fork_at_a_large_level_and_search_the_same(monkeypatch):
    from model_check.explore import explorer

    monkeypatch.setattr(explorer, "AUTO_WORKERS", 2)
    monkeypatch.setattr(explorer, "AUTO_LEVEL", 200)
    config = Config(variant=VARIANTS["hw-truncation"], brokers=2, max_records=1,
                    max_leader_epochs=2, max_crashes=1)
    one = explore(KafkaModel(config), workers=1)
    auto = explore(KafkaModel(config), workers="auto")
    assert (auto.workers, one.workers) == (2, 1)
    assert (one.result, one.distinct_states, one.generated_states, one.depth) == (
        auto.result, auto.distinct_states, auto.generated_states, auto.depth)
    assert one.coverage == auto.coverage
    assert one.stored_bytes == auto.stored_bytes  # the coordinator's visited set is whole
    assert [a for a, _ in one.violation.trace] == [a for a, _ in auto.violation.trace]
    # No level that large: one process throughout.
    monkeypatch.setattr(explorer, "AUTO_LEVEL", 10 ** 6)
    assert explore(KafkaModel(config), workers="auto").workers == 1


def test_two_workers_on_the_tla_compat_model():
    model = TlaCompatModel("kip-101", brokers=2, log_size=2, records=2, epochs=3)
    one = explore(model, workers=1)
    two = explore(model, workers=2)
    assert (one.violation.invariant, len(one.violation.trace)) == (
        two.violation.invariant, len(two.violation.trace))
    assert one.distinct_states == two.distinct_states


def _position_order_tree(model) -> tuple[list[int], list[int]]:
    """The parent tree as a plain breadth-first search gives it, expanding each level in
    position order (the initial states as listed, then each level by fingerprint) and keeping
    a state's first discovery, which is then its smallest (parent position, index)."""
    level, seen = [], set()
    for i, s in enumerate(model.init_states()):
        if (h := hash(s)) not in seen:
            seen.add(h)
            level.append((h, s, -1, i))
    parents, indices, start = [], [], 0
    while level:
        parents += [p for _, _, p, _ in level]
        indices += [i for _, _, _, i in level]
        found: dict = {}
        for pos, (_, s, _, _) in enumerate(level, start):
            for i, (_, t) in enumerate(model.successors(s)):
                h = hash(t)
                if h not in seen and h not in found:
                    found[h] = (h, t, pos, i)
        start += len(level)
        seen.update(found)
        level = [found[h] for h in sorted(found)]
    return parents, indices


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("model", [
    KafkaModel(Config(variant=VARIANTS["current"], brokers=2, max_records=1,
                      max_leader_epochs=2, max_crashes=1)),
    TlaCompatModel("kip-320", brokers=2, log_size=2, records=2, epochs=2),
], ids=["kafka", "tla-compat"])
def test_each_state_s_parent_is_its_smallest_position_and_index(model, workers, monkeypatch):
    # The explorer expands a level in the order its states were found, not by position, and
    # keeps the smallest (parent position, index) per state: the tree, and so every trace, is
    # the one expanding by position gives.
    import numpy as np

    from model_check.explore import explorer

    trees = []

    class Kept(explorer._Tree):
        def __init__(self, *args):
            super().__init__(*args)
            trees.append(self)

    monkeypatch.setattr(explorer, "_Tree", Kept)
    result = explore(model, workers=workers, check_invariants=False, symmetry=False)
    parents, indices = _position_order_tree(model)
    assert result.distinct_states == len(parents) > 1000
    assert np.concatenate(trees[0].parent).tolist() == parents
    assert np.concatenate(trees[0].index).tolist() == indices


class _Fan:
    """A model whose one initial state has 65,537 successors, one more than a successor
    index (a uint16) can name."""

    name = "fan"
    invariants: dict = {}

    def init_states(self):
        return [-1]

    def successors(self, state):
        return ((None, n) for n in range(65_537)) if state == -1 else iter(())

    def symmetric(self) -> bool:
        return False


def test_a_state_with_more_successors_than_an_index_names_is_refused():
    with pytest.raises(OverflowError, match="65537 successors"):
        explore(_Fan())


def test_symmetry_is_off_where_unsound_and_on_where_sound():
    kafka = explore(KafkaModel(Config(brokers=2, max_records=1)))
    assert kafka.symmetry is False
    tla = TlaCompatModel("kip-320", brokers=2, log_size=2, records=2, epochs=3)
    full = explore(tla, symmetry=False)
    reduced = explore(tla)
    assert (full.distinct_states, reduced.distinct_states) == (28939, 14470)
    assert reduced.symmetry and (full.result, reduced.result) == ("ok", "ok")


def test_max_depth_bounds_the_search():
    result = explore(KafkaModel(Config(brokers=2, max_records=1)), max_depth=3)
    assert (result.result, result.depth) == ("ok", 3)


def test_simulation_is_seeded_and_finds_bugs():
    config = Config(variant=VARIANTS["hw-truncation"], brokers=2, max_records=1,
                    max_leader_epochs=2, max_crashes=1)
    first = simulate(KafkaModel(config), seed=7, depth=60, traces=2000)
    again = simulate(KafkaModel(config), seed=7, depth=60, traces=2000)
    assert first.result == "violation" and first.violation.invariant == "NoCommittedDataLoss"
    assert [a for a, _ in first.violation.trace] == [a for a, _ in again.violation.trace]
    clean = simulate(KafkaModel(config.replace(variant=VARIANTS["current"])), seed=2, depth=60,
                     traces=50)
    assert clean.result == "ok" and clean.generated_states > 0


def test_simulate_cli_prints_its_seed(capsys):
    code = main(["check", "--variant", "current", *SMALL, "--simulate", "--seed", "3",
                 "--traces", "5", "--depth", "20"])
    captured = capsys.readouterr()
    assert code == 0 and "simulation seed 3" in captured.err
    assert "OK: no violation in 5 random traces (seed 3)" in captured.out


def test_collision_probability():
    assert collision_probability(1) == 0.0
    assert collision_probability(2**32) == pytest.approx(0.5, rel=1e-6)


@pytest.mark.slow
def test_three_brokers_hw_truncation_violates_and_kip_320_holds(capsys):
    # hw-truncation against kip-320 at one record: the same bounds separate the variant with
    # the bug from the one with the fix (3 brokers, 1 record, 2 leader epochs, one live expiry).
    bounds = ["--brokers", "3", "--records", "1", "--epochs", "2", "--workers", "2"]
    code, bad = run_json(capsys, "--variant", "hw-truncation", *bounds)
    assert (code, bad["violation"]["invariant"], bad["depth"]) == (1, "NoCommittedDataLoss", 19)
    code, good = run_json(capsys, "--variant", "kip-320", *bounds)
    assert (code, good["result"], good["distinct_states"], good["depth"]) == (0, "ok", 110870, 37)


class _TwoViolations:
    """A toy model: 0 steps to 5 and to 9 (ints are their own hash, so 5 comes first in the
    level); 5 breaks the second invariant, 9 the first; 5 also steps on to 7."""

    name = "toy"

    def __init__(self):
        self.invariants = {"first": lambda s: "nine" if s == 9 else None,
                           "second": lambda s: "five" if s == 5 else None}

    def init_states(self):
        return [0]

    def successors(self, s):
        return {0: [("a", 5), ("b", 9)], 5: [("c", 7)]}.get(s, [])

    def action_name(self, label):
        return label

    def canonical(self, s):
        return s

    def symmetric(self):
        return False


@pytest.mark.parametrize("workers", [1, 2])
def test_a_level_reports_its_first_invariant_not_its_first_state(workers):
    # The module's promise: a level is checked whole, and the violation reported is the
    # smallest (invariant order, position), so the same invariant whatever the state order.
    result = explore(_TwoViolations(), workers=workers)
    assert (result.result, result.violation.invariant, result.violation.detail) == \
        ("violation", "first", "nine")
    assert [state for _, state in result.violation.trace] == [0, 9]
    assert result.distinct_states == 3
