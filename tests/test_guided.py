"""Guided search (model_check/explore/guided.py): it covers the same states as BFS when it runs to the
end, its counterexamples are real paths of the spec, and the features are what take it deep."""

from __future__ import annotations

from model_check.explore.explorer import explore
from model_check.explore.guided import guided_search
from model_check.explore.model import KafkaModel
from spec import VARIANTS, Config, initial_state, step
from spec.invariants import INVARIANTS


def _config(variant: str, **changes) -> Config:
    base = dict(brokers=2, max_records=1, max_leader_epochs=2, max_crashes=1,
                max_session_expiries=1)
    return Config(variant=VARIANTS[variant], **{**base, **changes})


def test_run_to_the_end_it_visits_exactly_the_states_bfs_visits():
    config = _config("current")
    guided = guided_search(KafkaModel(config))
    bfs = explore(KafkaModel(config))
    assert guided.result == bfs.result == "ok"
    assert guided.distinct_states == bfs.distinct_states
    assert guided.generated_states == bfs.generated_states


def test_its_counterexample_is_a_path_of_the_spec_and_breaks_the_invariant():
    config = _config("kip-320")
    found = guided_search(KafkaModel(config))
    assert found.result == "violation"
    trace = found.violation.trace
    state = initial_state(config)
    assert trace[0][1] == state
    for action, expected in trace[1:]:
        state = step(config, state, action)
        assert state == expected
    assert INVARIANTS[found.violation.invariant](config, state) == found.violation.detail
    assert found.depth == len(trace) - 1


def test_without_the_features_it_is_breadth_first_and_finds_the_shortest():
    config = _config("kip-320")
    plain = guided_search(KafkaModel(config), weight=0)
    bfs = explore(KafkaModel(config))
    assert plain.violation.invariant == bfs.violation.invariant
    assert plain.depth == bfs.depth == 12
    # With the features it takes another route, which is no shorter.
    assert guided_search(KafkaModel(config)).depth >= 12


def test_a_state_cap_stops_it_as_incomplete():
    result = guided_search(KafkaModel(_config("current")), max_states=500)
    assert (result.result, result.distinct_states) == ("incomplete", 500)
