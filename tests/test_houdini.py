"""Lemma inference (`model_check.prove.houdini`): each candidate's two forms agree, the reachable-state
filter drops candidates that some run breaks, and the solver drops what is not inductive."""

from __future__ import annotations

import pytest
import z3

from model_check.prove import houdini as H
from model_check.prove import symbolic as sym
from spec import Config

CONFIG = Config(brokers=3)


@pytest.fixture(scope="module")
def walked():
    return H.random_walks(H.filter_config(CONFIG), walks=40, steps=60, seed=3)


def test_the_grammar_has_unique_names_and_every_kind_of_candidate():
    cands = H.candidates(3)
    assert len({c.name for c in cands}) == len(cands) > 1000
    text = " ".join(c.name for c in cands)
    for part in ("rleo(b0,b1)", "resp_hw(f2)", "req_offset(f1)", "log(b0) = log(b1) below",
                 "records = log(b2)", "true_leader(b1)", "in_isr(b2)"):
        assert part in text


def test_concrete_and_symbolic_forms_agree_on_reachable_states(walked):
    """For each sampled state, `holds` is True exactly when the Z3 violation formula is
    unsatisfiable on the state's representation (some witness breaks it otherwise)."""
    shape = sym.make_shape(CONFIG, bounded=False, cache_slots=3)
    cands = H.candidates(3)
    s, t = sym.fresh_state(shape, "s."), z3.Int("t")
    sample = walked[::len(walked) // 12][:12]
    guards_seen: set[str] = set()
    for state in sample:
        solver = z3.Solver()
        solver.add(sym.represent(shape, state, s))
        for c in cands:
            solver.push()
            solver.add(c.violation(shape, s, t))
            violated = solver.check() == z3.sat
            solver.pop()
            assert violated != c.holds(state), (c.name, state)
            if not c.holds(state):
                guards_seen.add(c.name.split(" -> ")[0])
    # The sample exercises guards beyond `true`: leaders, ISR members, messages in flight.
    assert {"leads(b0)", "alive(b1)"} & guards_seen
    assert any(g.startswith("answered") or g.startswith("requesting") for g in guards_seen)


def test_the_filter_drops_candidates_a_reachable_state_breaks(walked):
    cands = {c.name: c for c in H.candidates(3)}
    kept = {c.name for c in H.filter_reachable(list(cands.values()), walked)}
    # True everywhere: a HW never passes its log's end.
    assert "true -> hw(b0) <= leo(b0)" in kept
    # False on some run: a follower's log can grow past the leader's HW.
    assert "true -> leo(b1) <= hw(b1)" not in kept


def test_the_solver_drops_a_candidate_that_a_step_breaks_and_keeps_one_it_cannot():
    """`leo(b0) <= c_epoch` holds on the sampled states only by accident of small bounds:
    LeaderAppend from a state where they are equal breaks it. It cannot break the view's
    epoch staying at or below the controller's. (Nor can it break `hw <= leo` when the leader's
    remote LEOs are not known to be at most its own: a lemma is inductive only relative to
    others, which the search finds together.)"""
    from model_check.prove.lemmas import STRUCTURE

    cands = {c.name: c for c in H.candidates(3)}
    ind = H._Induction(CONFIG, [], list(STRUCTURE), cache_slots=3, timeout_ms=20_000)
    live = [cands["true -> view_epoch(b0) <= c_epoch"], cands["true -> leo(b0) <= c_epoch"]]
    inst = next(i for i in ind.table if i.name == "LeaderAppend" and i.brokers == (0,))
    answer, model = ind.step(ind.relation(inst), ind.fixed + live, live)
    assert answer == z3.sat
    assert ind.broken_in_post(model, live) == ["true -> leo(b0) <= c_epoch"]
    answer, _ = ind.step(ind.relation(inst), ind.fixed + live[:1], live[:1])
    assert answer == z3.unsat
    hw = [cands["true -> hw(b0) <= leo(b0)"]]
    answer, model = ind.step(ind.relation(inst), ind.fixed + hw, hw)
    assert answer == z3.sat and ind.broken_in_post(model, hw) == [hw[0].name]
    rleo = [cands[f"leads(b0) -> rleo(b0,b{f}) <= leo(b0)"] for f in (1, 2)]
    answer, _ = ind.step(ind.relation(inst), ind.fixed + hw + rleo, hw)
    assert answer == z3.unsat


@pytest.mark.parametrize("content, what", [
    ("[1, 2]", "expected a JSON list of lemma names"),
    ("{", "not JSON"),
    ('["true -> hw(b0) <= moon(b0)"]', "not in the grammar"),
])
def test_cli_bad_lemmas_file_exits_2_with_one_line(tmp_path, capsys, content, what):
    from isrlab.cli import main

    path = tmp_path / "lemmas.json"
    path.write_text(content, encoding="utf-8")
    assert main(["prove", "--induction", "--lemmas-file", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and what in err[0] and str(path) in err[0]


def test_cli_houdini_flags_need_induction(capsys):
    from isrlab.cli import main

    assert main(["prove", "--bmc", "2", "--houdini"]) == 2
    assert "--induction" in capsys.readouterr().err


def test_cli_checks_a_saved_lemma_set_and_reports_each_formula(tmp_path, capsys):
    """`--lemmas-file` checks the given set for every action instance: a verdict per
    instance and per formula, and exit 3 while some instance has a CTI."""
    import json

    from isrlab.cli import main

    path = tmp_path / "lemmas.json"
    names = ["true -> hw(b0) <= leo(b0)", "leads(b0) -> rleo(b0,b1) <= leo(b0)"]
    path.write_text(json.dumps(names), encoding="utf-8")
    code = main(["prove", "--induction", "--brokers", "2", "--invariant",
                 "HighWatermarkBelowLogEnd", "--no-lemmas", "--lemmas-file", str(path), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 3 and out["result"] == "cti"
    assert [(f["name"], f["kind"]) for f in out["formulas"]] == [
        ("HighWatermarkBelowLogEnd", "target"), *((n, "inferred") for n in names)]
    verdicts = {a["action"]: a for a in out["actions"]}
    # HW <= LEO alone is not inductive: a leader's append can take HW past LEO through
    # remote LEOs nothing bounds for b1 (only b0's are in the set).
    assert "HighWatermarkBelowLogEnd" in verdicts["LeaderAppend[1]"]["violated"]
    assert verdicts["Tick[]"]["verdict"] == "inductive"
    assert out["notes"][1] == "2 inferred lemmas (given)"


def test_cli_with_inferred_lemmas_on_a_buggy_variant_exits_1_with_a_real_run(tmp_path, capsys):
    """The Houdini path classifies too: on hw-truncation the explorer reaches a loss of a
    committed write (at the probe bounds), shown as a reachable CTI with its run; exit 1."""
    import json

    from isrlab.cli import main

    path = tmp_path / "lemmas.json"
    path.write_text(json.dumps(["true -> hw(b0) <= leo(b0)"]), encoding="utf-8")
    code = main(["prove", "--variant", "hw-truncation", "--induction", "--brokers", "2",
                 "--invariant", "NoCommittedDataLoss", "--no-lemmas", "--lemmas-file",
                 str(path), "--json"])
    out = json.loads(capsys.readouterr().out)
    cti = out["cti"]
    assert (code, out["result"], cti["classification"]) == (1, "cti", "reachable")
    assert cti["violated"] == ["NoCommittedDataLoss"] and cti["trace"][0]["action"] is None
    assert cti["trace"][-1]["state"] == cti["post"]
