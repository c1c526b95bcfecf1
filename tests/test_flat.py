"""The flat encoding (model_check.explore.flat) against the reference spec: on walks of several
configs, every state has the same enabled actions in the same order, the same next states and
the same invariant verdicts; whole searches give the same counts; a mutant of the flat
handlers or invariants is caught by the same comparison. The walks and whole searches are
made with the module as Python and as compiled by Cython (`model_check.explore.compiled`, which
`make install` builds), which the explorer runs."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from model_check.explore import compiled, flat
from model_check.explore.explorer import explore
from model_check.explore.flat import FlatKafka, FlatKafkaModel, decode, encode, problem
from model_check.explore.model import KafkaModel
from spec import INVARIANTS, VARIANTS, Config, initial_state
from spec.actions import successors
from spec.state import Record, Replica, replace

V = VARIANTS
# Each config turns on faults and rules the others do not, so that between them the walks
# take every branch of the flat handlers (crashes with unflushed data, expiries, lag by time
# and by messages, drops, unclean election, every truncation rule, acks 0/1/all).
CONFIGS = {
    "current": Config(variant=V["current"], brokers=3, max_records=2, max_leader_epochs=3,
                      max_crashes=2, max_ticks=3, max_message_drops=1, max_session_expiries=2,
                      min_insync_replicas=2, unclean_leader_election_enable=True),
    "hw-truncation": Config(variant=V["hw-truncation"], brokers=3, acks="1", max_records=3,
                            max_leader_epochs=4, max_crashes=2, max_ticks=3,
                            unclean_leader_election_enable=True, replica_lag_max_messages=1),
    "kip-101": Config(variant=V["kip-101"], brokers=2, max_records=3, max_leader_epochs=4,
                      max_crashes=2, max_ticks=2, max_message_drops=1,
                      log_flush_interval_messages=2, unclean_leader_election_enable=True),
    "kip-279": Config(variant=V["kip-279"], brokers=3, max_records=3, max_leader_epochs=4,
                      max_crashes=2, max_ticks=3, max_message_drops=2,
                      unclean_leader_election_enable=True),
    "kip-320": Config(variant=V["kip-320"], brokers=3, acks="0", max_records=3,
                      max_leader_epochs=3, max_crashes=2, max_ticks=2,
                      max_session_expiries=2, leader_keeps_last_fetch=False,
                      recovery_truncates_epoch_cache=False),
    "current-mutated-rules": Config(
        variant=V["current"].with_rules(hw_requires_min_isr=False, broker_epochs=False,
                                        isr_shrink_bumps_leader_epoch=True),
        brokers=3, max_records=2, max_leader_epochs=3, max_crashes=1, max_ticks=2,
        min_insync_replicas=2),
}


def _built():
    built = compiled.load()
    assert built is not None, (f"the compiled flat encoding is {compiled.state()}: "
                               "`make install` builds it")
    return built


@pytest.fixture(params=["python", "compiled"])
def module(request):
    """model_check.explore.flat as Python, or as compiled from the same source."""
    return flat if request.param == "python" else _built()


def compare_state(config: Config, model: FlatKafka, s, steps: bool = True,
                  module=flat) -> tuple[list, set[str], str | None]:
    """(the spec's successors of `s`, the invariants `s` breaks, the first difference between
    the spec and the flat model at `s`, or None). `steps` off: the invariants only (a
    corrupted state, where the spec's steps may not be defined). Each step is also asked of
    the explorer's shortcuts: its compacted state must be the same state, and `holds_from`
    must answer as `holds` (from a state where every invariant holds). `module`: the flat
    encoding's module, as Python or compiled."""
    encode, decode = module.encode, module.decode
    fs = encode(config, s)
    verdicts = {name: check(config, s) for name, check in INVARIANTS.items()}
    failed = {name for name, detail in verdicts.items() if detail is not None}
    ref = list(successors(config, s)) if steps else []
    if decode(fs) != s:
        return ref, failed, f"encode/decode does not round-trip {s}"
    if hash(fs) != hash(s):
        return ref, failed, f"the flat state's fingerprint is not the spec's: {s}"
    searched = module.FlatKafkaModel(config)
    searched.flat = model
    fs = searched.compact(None, fs)  # as the explorer keeps states
    got = list(model.successors(fs)) if steps else []
    if [a for a, _ in ref] != [a for a, _ in got]:
        return ref, failed, (f"enabled actions differ: spec {[str(a) for a, _ in ref]}, "
                             f"flat {[str(a) for a, _ in got]} in {s}")
    for (action, t), (_, u) in zip(ref, got, strict=True):
        if decode(u) != t or hash(u) != hash(t):
            return ref, failed, f"{action} leads elsewhere from {s}"
    for name, detail in verdicts.items():
        if getattr(model, name)(fs) != (detail is not None):
            return ref, failed, f"{name}: spec says {detail!r} of {s}"
    if searched.holds(fs) != (not failed):
        return ref, failed, f"holds() disagrees with the spec's invariants on {s}"
    for action, u in got:
        small = searched.compact(fs, u)
        if small != u or hash(small) != hash(u):
            return ref, failed, f"compact() changes the state {action} leads to from {s}"
        if not failed and searched.holds_from(fs, small) != searched.holds(u):
            return ref, failed, f"holds_from() disagrees with holds() after {action} from {s}"
    return ref, failed, None


def compare_walks(config: Config, seed: int, walks: int = 30, steps: int = 80,
                  model: FlatKafka | None = None, module=flat) -> tuple[int, str | None]:
    """(states compared, the first difference or None). Walks favour the action kinds taken
    least so far, which reach crashes, elections and truncations that uniform walks rarely
    do."""
    model = model or module.FlatKafka(config)
    rng = random.Random(seed)
    taken: dict[str, int] = {}
    compared = 0
    for _ in range(walks):
        s = initial_state(config)
        for _ in range(steps):
            ref, _, difference = compare_state(config, model, s, module=module)
            if difference is not None:
                return compared, difference
            compared += 1
            if not ref:
                break
            kinds = [type(a).__name__ for a, _ in ref]
            i = rng.choices(range(len(ref)), [1 / (1 + taken.get(k, 0)) for k in kinds])[0]
            taken[kinds[i]] = taken.get(kinds[i], 0) + 1
            s = ref[i][1]
    return compared, None


@pytest.mark.parametrize("name", list(CONFIGS))
def test_walks_agree_with_the_spec(name, module):
    compared, difference = compare_walks(CONFIGS[name], seed=1, module=module)
    assert difference is None, difference
    assert compared > 1000


B1 = Config(variant=V["hw-truncation"], brokers=2, max_records=2, max_leader_epochs=3)


def test_states_that_break_invariants_agree():
    """Failing verdicts are compared too: along the spec's own B1 counterexample, and on
    reachable states corrupted to break each invariant that no reachable state breaks."""
    trace = explore(KafkaModel(B1)).violation.trace
    failed = set()
    for _, s in trace:
        _, broken, difference = compare_state(B1, FlatKafka(B1), s)
        assert difference is None, difference
        failed |= broken
    assert "NoCommittedDataLoss" in failed
    s = trace[-2][1]
    row = s.replicas[0]
    leader = next(b for b, r in enumerate(row) if r.leader == b)
    other = 1 - leader
    corrupt = {
        "HighWatermarkBelowLogEnd": lambda r: replace(r, high_watermark=len(r.log) + 1),
        "LeaderEpochMonotonic": lambda r: replace(r, leader_epoch=9),
        "LeaderInIsr": lambda r: replace(r, isr=()),
    }
    for name, change in corrupt.items():
        bad = s.with_replica(0, leader, change(row[leader]))
        _, broken, difference = compare_state(B1, FlatKafka(B1), bad, steps=False)
        assert difference is None and name in broken, (name, difference)
    twin = replace(row[other], leader=other, leader_epoch=row[leader].leader_epoch,
                   isr=row[leader].isr, remote_log_end_offset=(-1, -1),
                   remote_broker_epoch=(-1, -1), lag_ticks=(0, 0))
    _, broken, difference = compare_state(B1, FlatKafka(B1), s.with_replica(0, other, twin),
                                          steps=False)
    assert difference is None and "SingleLeaderPerEpoch" in broken, difference


def _missing_guard(base: type) -> type:
    """`base` (the Python or the compiled FlatKafka) with ISR expansion that skips the
    broker-epoch check (the spec keeps it in `current`)."""

    class MissingGuard(base):
        def _leader_expand_isr(self, s, b, f):
            keep, self.broker_epochs = self.broker_epochs, False
            try:
                return super()._leader_expand_isr(s, b, f)
            finally:
                self.broker_epochs = keep

    return MissingGuard


class _OffByOne(FlatKafka):
    """NoCommittedDataLoss that stops one offset short of the leader's HW."""

    def NoCommittedDataLoss(self, s):
        leader = self._true_leader(s)
        if leader == -1:
            return False
        replicas = s[flat.ROWS][0]
        lr = replicas[leader]
        top = lr[flat.HW] - 1
        return any(s[flat.ALIVE][m] and replicas[m][flat.LOG][:top] != lr[flat.LOG][:top]
                   for m in s[flat.CTRL][0][0][2] if m != leader)


class _OverlooksHw(FlatKafka):
    """`reads_same` that overlooks a changed high watermark."""

    def reads_same(self, before, s):
        rows = tuple(r[:flat.HW] + (q[flat.HW],) + r[flat.HW + 1:]
                     for r, q in zip(s[flat.ROWS][0], before[flat.ROWS][0], strict=True))
        return super().reads_same(before, flat._put(s, flat.ROWS, (rows,)))


def test_a_missing_guard_is_caught(module):
    """On the compiled class too: its handlers are looked up on the instance, as in Python,
    so the subclass's is the one called."""
    config = CONFIGS["current"]
    mutant = _missing_guard(module.FlatKafka)(config)
    _, difference = compare_walks(config, seed=1, model=mutant, module=module)
    assert difference is not None and "LeaderExpandIsr" in difference, difference


def test_the_compiled_module_is_c_built_from_this_flat_py():
    import importlib.machinery

    built = _built()
    assert built.__file__.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))
    assert type(built.FlatKafka.successors).__name__ == "cython_function_or_method"
    assert built.BUILT_FROM == compiled.digest() and compiled.state() == "compiled"
    result = flat.search(B1, workers=1)
    assert (result.encoding, result.compiled) == ("flat", True)
    python = flat.search(B1, workers=1, compiled=False)
    assert python.compiled is False
    assert (result.distinct_states, result.generated_states, [str(a) for a, _ in
            result.violation.trace]) == (python.distinct_states, python.generated_states,
                                         [str(a) for a, _ in python.violation.trace])


def test_an_edited_flat_py_is_not_run_from_an_older_build(tmp_path, monkeypatch, capsys):
    """A build from another flat.py is not used, and `isrlab check` says it ran Python."""
    from isrlab.cli import main

    argv = ["check", "--variant", "hw-truncation", "--brokers", "2", "--records", "1"]
    assert main(argv) == 0
    assert "workers 1, flat encoding (compiled)\n" in capsys.readouterr().out
    edited = tmp_path / "flat.py"
    edited.write_text(compiled.SOURCE.read_text().replace("return None", "return  None", 1))
    monkeypatch.setattr(compiled, "SOURCE", edited)
    assert compiled.load() is None and compiled.state() == "stale"
    assert flat.search(B1, workers=1).compiled is False
    assert compiled.main(["--check"]) == 1
    assert main(argv) == 0
    assert ("flat encoding as Python (the compiled module is stale: `make install` builds it)"
            in capsys.readouterr().out)


def test_the_build_command_refuses_an_unknown_flag(capsys):
    assert compiled.main(["--fast"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "usage: python -m model_check.explore.compiled" in err


def test_without_a_build_the_search_runs_python(monkeypatch, capsys):
    """No compiler: the build says so in one line and does not fail `make install`; with no
    module, the search runs the flat encoding as Python."""
    def no_compiler(quiet=True):
        raise OSError("gcc: not found")

    monkeypatch.setattr(compiled, "build", no_compiler)
    assert compiled.main([]) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not built (OSError: gcc: not found)" in err
    monkeypatch.setattr(compiled, "MODULE", "model_check._no_such_build")
    assert compiled.state() == "absent" and compiled.load() is None
    assert flat.search(B1, workers=1).compiled is False


def test_a_shortcut_that_overlooks_a_change_is_caught():
    """B1's last step only raises the leader's HW."""
    trace = explore(KafkaModel(B1)).violation.trace
    differences = [compare_state(B1, _OverlooksHw(B1), s)[2] for _, s in trace]
    assert any(d is not None and "holds_from" in d for d in differences), differences


def test_a_wrong_invariant_is_caught():
    trace = explore(KafkaModel(B1)).violation.trace
    differences = [compare_state(B1, _OffByOne(B1), s)[2] for _, s in trace]
    assert any(d is not None and "NoCommittedDataLoss" in d for d in differences), differences


@pytest.mark.parametrize("config", [
    Config(variant=V["current"], brokers=2, max_records=1, max_leader_epochs=2, max_crashes=1),
    Config(variant=V["kip-101"], brokers=2, max_records=1, max_leader_epochs=2, max_crashes=1,
           replica_lag_max_messages=1, log_flush_interval_messages=1, max_message_drops=1),
])
def test_whole_searches_count_the_same(config, module):
    ref = explore(KafkaModel(config))
    got = explore(module.FlatKafkaModel(config))
    assert ref.result == got.result == "ok"
    assert (got.distinct_states, got.generated_states, got.depth) == (
        ref.distinct_states, ref.generated_states, ref.depth)
    assert got.coverage == ref.coverage


def test_a_violation_is_the_reference_one():
    """B1 at 2 brokers: the same depth, the same invariant and detail; the trace replays
    through the spec to a state that breaks it."""
    from spec import step

    config = B1
    ref = explore(KafkaModel(config)).violation
    got = explore(FlatKafkaModel(config)).violation
    assert got.invariant == ref.invariant == "NoCommittedDataLoss"
    assert len(got.trace) == len(ref.trace)
    s = initial_state(config)
    for action, _ in got.trace[1:]:
        s = step(config, s, action)
    assert decode(got.trace[-1][1]) == s
    assert INVARIANTS[got.invariant](config, s) == got.detail


def test_same_counterexample_in_every_process(tmp_path):
    """Fingerprints pick the reported counterexample: a flat state hashes the same under any
    PYTHONHASHSEED (no strings, no None in it)."""
    import os
    import subprocess
    import sys

    code = ("from model_check.explore.flat import FlatKafkaModel; from model_check.explore.explorer import "
            "explore; from spec import Config, VARIANTS; v = explore(FlatKafkaModel(Config("
            "variant=VARIANTS['hw-truncation'], brokers=2, max_records=2, max_leader_epochs=3"
            "))).violation; print([str(a) for a, _ in v.trace[1:]])")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True, env={**os.environ, "PYTHONHASHSEED": seed}).stdout
            for seed in ("1", "2")}
    assert len(outs) == 1, outs


@pytest.mark.parametrize("changes, reason", [
    ({"partitions": 2}, "more than one partition"),
    ({"replication_factor": 2}, "replication factor"),
    ({"max_controller_failovers": 1}, "controller failovers"),
    ({"eligible_leader_replicas_enable": True, "min_insync_replicas": 2}, "KIP-966"),
    ({"isr_changes_async": True}, "KIP-497"),
])
def test_configs_outside_are_refused(changes, reason):
    config = Config(variant=V["current"], brokers=3).replace(**changes)
    assert reason in problem(config)
    with pytest.raises(ValueError, match=reason):
        FlatKafka(config)


# The truncations answer questions few walks ask (an epoch below every cached one, an
# empty cache): compared with the spec's Replica methods on generated replicas.
_epochs = st.lists(st.integers(0, 5), max_size=5).map(sorted)


@st.composite
def _replicas(draw):
    log = tuple(Record(e, v + 1) for v, e in enumerate(draw(_epochs)))
    starts = draw(st.lists(st.integers(0, len(log)), max_size=4, unique=True).map(sorted))
    epochs = draw(st.lists(st.integers(0, 6), min_size=len(starts), max_size=len(starts),
                           unique=True).map(sorted))
    hw = draw(st.integers(0, len(log)))
    return Replica(log=log, high_watermark=hw, flushed_offset=draw(st.integers(0, len(log))),
                   epoch_cache=tuple(zip(epochs, starts, strict=True)))


def _flat_replica(r: Replica) -> tuple:
    return encode(B1, replace(initial_state(B1), replicas=((r, r),)))[flat.ROWS][0][0]


@settings(max_examples=300, deadline=None)
@given(_replicas(), st.integers(-1, 7), st.integers(-1, 7))
def test_epoch_helpers_answer_as_the_spec(r, epoch, end):
    from spec.actions import truncate_to_epoch_answer

    # (The epoch-cache answers and assign_epoch are spec/state.py's own functions, called
    # by both encodings: only the tuple-side truncations are compared.)
    fr = _flat_replica(r)
    assert flat._truncated(fr, max(end, 0)) == _flat_replica(r.truncated_to(max(end, 0)))
    ref, done = truncate_to_epoch_answer(r, epoch, max(end, 0))
    got, finished = flat._truncate_to_epoch_answer(fr, epoch, max(end, 0))
    assert (got, finished) == (_flat_replica(ref), done)


@pytest.mark.parametrize("mode", [
    ["--variant", "hw-truncation"],
    ["--variant", "current", "--acks", "1", "--crashes", "1", "--simulate", "--traces", "100",
     "--depth", "30", "--seed", "4", "--invariant", "AckedWritesDurable"],
])
def test_check_reports_the_same_from_either_encoding(capsys, mode):
    """`isrlab check` searches (or walks) the flat encoding by default and says so;
    `--spec-states` gives the same counts and the same counterexample."""
    import json

    from isrlab.cli import main

    argv = ["check", "--brokers", "2", "--records", "2", "--epochs", "3", "--json", *mode]
    outs = []
    for extra in ([], ["--spec-states"]):
        code = main([*argv, *extra])
        outs.append(json.loads(capsys.readouterr().out))
        # acks=1's lost write is its trade-off (exit 0); hw-truncation's violation a bug.
        assert code == (1 if outs[-1]["violation"]["promised"] else 0)
    flat_out, spec_out = outs
    assert (flat_out["encoding"], spec_out["encoding"]) == ("flat", "spec")
    for key in ("distinct_states", "generated_states", "depth", "violation", "coverage"):
        assert flat_out[key] == spec_out[key], key
