"""Property-based fuzzing of the spec: a Hypothesis state machine generated from its actions.

Theory of operation. `make_machine(config)` builds a `RuleBasedStateMachine` with one rule per
action kind (one per class in `spec.ACTION_TYPES`) and one `@invariant()` per named invariant
(`spec.INVARIANTS`). A rule is runnable when at least one action of its kind is enabled in the
current state; it then draws one of those actions (`sampled_from` over the kind's enabled
actions, in the spec's fixed `enabled` order) and applies it with `spec.step`. The enabled set is
computed once per state and shared by every precondition and rule. Each invariant asserts that
`violations(config, state)` has nothing under its name. The machine keeps the actions it applied,
so a failure carries its own trace.

Each step picks a rule uniformly among the runnable ones (not Hypothesis's swarm testing,
which starves these runs: see `make_machine`), then an action of that kind; a run goes up to
`stateful_step_count` steps. `fuzz()` runs the machine with a fixed seed and no example
database, so the same (config, examples, steps, seed) gives the same run. A failing run is
shrunk twice: by Hypothesis (fewer steps, earlier kinds, earlier enabled actions), then by
`shrink_actions` (delta debugging on the action list itself, which Hypothesis cannot see: a
dropped step shifts what every later draw means, but an action keeps its meaning). The result
becomes a scenario transcript (`model_check.explore.scenario`) that `isrlab scenario` replays; its
last block shows `VIOLATED <name>`.

A state where no action at all is enabled gets a no-op `stutter` rule, so a run that reaches a
dead end (every bound used up) idles instead of stopping Hypothesis with "no progress".

Nothing here prints: the caller reports.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.reporting import with_reporter
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from spec import (
    ACTION_TYPES,
    INVARIANTS,
    VARIANTS,
    Config,
    NotEnabled,
    initial_state,
    step,
    violations,
)
from spec.actions import Action, enabled
from spec.state import Cluster

# Generous bounds for random walks: the explorer's defaults keep exhaustive search finite, but
# a fuzzer walks one path at a time and can afford crashes, expiries, drops and time.
FUZZ_BOUNDS: dict[str, int] = {
    "max_records": 4,
    "max_leader_epochs": 6,
    "max_crashes": 2,
    "max_session_expiries": 2,
    "max_ticks": 8,
    "max_message_drops": 2,
}

_HEALTH_CHECKS_OFF = [
    getattr(HealthCheck, name)
    for name in ("too_slow", "filter_too_much", "data_too_large", "large_base_example")
    if hasattr(HealthCheck, name)
]


def config_for_fuzz(base: Config | None = None, **changes: object) -> Config:
    """`base` (default `Config()`) with `FUZZ_BOUNDS` applied, then `changes` on top.

    `changes` are Config field names (`max_records=3`, `variant=VARIANTS["kip-101"]`).
    """
    return (base or Config()).replace(**{**FUZZ_BOUNDS, **changes})


class InvariantViolation(AssertionError):
    """An invariant failed after `actions` (from the initial state). `str()` names it."""

    def __init__(self, invariant: str, detail: str, actions: tuple[Action, ...]):
        super().__init__(f"{invariant}: {detail} (after {len(actions)} actions)")
        self.invariant = invariant
        self.detail = detail
        self.actions = actions


class StepFailed(AssertionError):
    """`step` raised on an action `enabled` had listed: a bug in the spec, not a finding about
    Kafka. `actions` are the ones applied before `action`."""

    def __init__(self, action: Action, actions: tuple[Action, ...], error: BaseException):
        super().__init__(f"{action} raised {type(error).__name__}: {error} "
                         f"(after {len(actions)} actions)")
        self.action = action
        self.actions = actions
        self.error = error


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


class _Counter:
    """Counts machine runs (Hypothesis test cases, shrinking included), steps, longest run."""

    def __init__(self) -> None:
        self.runs = 0
        self.steps = 0
        self.deepest = 0


def make_machine(config: Config, invariants: list[str] | None = None,
                 counter: _Counter | None = None, swarm: bool = False) -> type[RuleBasedStateMachine]:
    """A RuleBasedStateMachine class for `config`, checking `invariants` (default: all).

    Use `make_machine(config).TestCase` as a unittest/pytest test case (set its `.settings`),
    or `fuzz()` to get a counterexample as data.

    `swarm=False` (the default) picks each step's rule uniformly among the runnable ones.
    Hypothesis's own rule choice (`swarm=True`) disables a random subset of rules for each run
    (swarm testing); here that starves most runs: the few runnable kinds (say, the three
    steps of a fetch) are all disabled a few steps in, Hypothesis discards the run as invalid,
    and deep walks become rare.
    """
    names = list(INVARIANTS) if invariants is None else list(invariants)
    for name in names:
        if name not in INVARIANTS:
            raise ValueError(f"unknown invariant {name!r} (known: {', '.join(INVARIANTS)})")

    def __init__(self) -> None:
        RuleBasedStateMachine.__init__(self)
        self.config = config
        self.state: Cluster = initial_state(config)
        self.applied: list[Action] = []
        self._by_kind_for: Cluster | None = None
        self._by_kind: dict[type[Action], list[Action]] = {}
        if not swarm:
            # Hypothesis draws each step's (rule, arguments) from `_rules_strategy` (stateful.py,
            # checked against 6.170); `rules`, `preconditions` and `arguments_strategies`
            # are what its own RuleStrategy reads. If that ever changes, swarm=True still works.
            self._rules_strategy = _runnable_rule(self)
        if counter is not None:
            counter.runs += 1

    def enabled_by_kind(self) -> dict[type[Action], list[Action]]:
        """The enabled actions of the current state, grouped by kind (computed once per state)."""
        if self._by_kind_for is not self.state:
            grouped: dict[type[Action], list[Action]] = {}
            for action in enabled(config, self.state):
                grouped.setdefault(type(action), []).append(action)
            self._by_kind, self._by_kind_for = grouped, self.state
        return self._by_kind

    def apply(self, action: Action) -> None:
        try:
            self.state = step(config, self.state, action)
        except Exception as error:  # NotEnabled included: `enabled` said it was enabled
            raise StepFailed(action, tuple(self.applied), error) from error
        self.applied.append(action)
        if counter is not None:
            counter.steps += 1
            counter.deepest = max(counter.deepest, len(self.applied))

    def __repr__(self) -> str:
        return f"KafkaMachine({len(self.applied)} actions)"

    namespace: dict[str, object] = {
        "__init__": __init__,
        "__repr__": __repr__,
        "__doc__": f"Random walks of the spec under {config.to_properties()}.",
        "enabled_by_kind": enabled_by_kind,
        "apply": apply,
    }

    for kind in ACTION_TYPES:
        namespace[_snake(kind.__name__)] = _make_rule(kind)

    @precondition(lambda self: not self.enabled_by_kind())
    @rule()
    def stutter(self) -> None:
        """Nothing is enabled: time stands still (keeps Hypothesis from "no progress")."""

    namespace["stutter"] = stutter

    for name in names:
        namespace[f"invariant_{_snake(name)}"] = _make_invariant(config, name)

    return type("KafkaMachine", (RuleBasedStateMachine,), namespace)


def _runnable_rule(machine: RuleBasedStateMachine) -> st.SearchStrategy:
    """Draw (rule, arguments) uniformly among the rules whose preconditions hold: a stand-in for
    Hypothesis's `RuleStrategy` without swarm testing (see `make_machine`)."""
    rules = sorted(machine.rules, key=lambda r: _KIND_ORDER.get(r.function.__name__, -1))

    @st.composite
    def choose(draw):
        runnable = [r for r in rules if all(p(machine) for p in r.preconditions)]
        chosen = runnable[draw(st.integers(0, len(runnable) - 1))]
        return chosen, {k: draw(s) for k, s in chosen.arguments_strategies.items()}

    return choose()


_KIND_ORDER = {_snake(kind.__name__): i for i, kind in enumerate(ACTION_TYPES)}


def _make_rule(kind: type[Action]):
    def run(self, data) -> None:
        choices = self.enabled_by_kind()[kind]
        self.apply(data.draw(st.sampled_from(choices), label=kind.__name__))

    run.__name__ = run.__qualname__ = _snake(kind.__name__)
    run.__doc__ = f"Apply one enabled {kind.__name__} ({kind.command()})."
    return precondition(lambda self: kind in self.enabled_by_kind())(rule(data=st.data())(run))


def _make_invariant(config: Config, name: str):
    def check(self) -> None:
        found = violations(config, self.state, (name,))
        if found:
            raise InvariantViolation(name, found[0][1], tuple(self.applied))

    check.__name__ = check.__qualname__ = f"invariant_{_snake(name)}"
    check.__doc__ = f"{name} holds (spec.invariants.{name})."
    return invariant()(check)


# ------------------------------------------------------------------------------------------
# Transcripts


def command_line(action: Action) -> str:
    """The scenario command for `action`, every argument spelled out."""
    return " ".join([action.command(), *(f"{k}={v}" for k, v in action.args().items())])


def config_line(config: Config) -> str:
    return " ".join(["config", *(f"{k}={v}" for k, v in config.to_properties().items())])


def transcript_expressible(config: Config) -> bool:
    """Scenario files name variants; a mutant variant (`with_rules`) has no spelling there."""
    return VARIANTS.get(config.variant.name) == config.variant


def transcript(config: Config, actions: list[Action] | tuple[Action, ...],
               comments: list[str] | tuple[str, ...] = ()) -> str:
    """A scenario transcript applying `actions` from the initial state, expectations filled in."""
    from model_check.explore.scenario import run_text

    lines = [f"# {c}" for c in comments]
    if lines:
        lines.append("")
    lines += [config_line(config), "----", ""]
    for action in actions:
        lines += [command_line(action), "----", ""]
    return run_text("\n".join(lines), "<fuzz>").rewritten


# ------------------------------------------------------------------------------------------
# Shrinking by actions


# Arguments that say who acts; the rest (epochs, values, offsets) say which message or write,
# and shift when an earlier step is dropped.
_WHO = ("partition", "broker", "follower")


def _stand_in(config: Config, state: Cluster, action: Action) -> Action | None:
    """An enabled action of the same kind and actors as `action`, nearest in its other
    arguments (the same LeaderAndIsr one epoch lower, say, once an election was dropped)."""
    args = action.args()
    best, best_distance = None, None
    for other in enabled(config, state):
        if type(other) is not type(action):
            continue
        theirs = other.args()
        if any(theirs[k] != v for k, v in args.items() if k in _WHO):
            continue
        distance = sum(abs(theirs[k] - v) for k, v in args.items() if k not in _WHO)
        if best_distance is None or distance < best_distance:
            best, best_distance = other, distance
    return best


def replay(config: Config, actions, invariant_name: str,
           invariants: list[str] | None = None, stand_ins: bool = True) -> list[Action] | None:
    """Apply `actions` from the initial state, checking the `invariants` (default: all) in the
    initial state and after each applied action. An action that is not enabled is replaced by
    its nearest stand-in (same kind and actors, see `_stand_in`) or, with none or with
    `stand_ins=False`, skipped. Returns the actions applied up to the first state that
    violates any invariant, when `invariant_name` is among that state's violations (several
    may fail at once); else None."""
    names = list(INVARIANTS) if invariants is None else list(invariants)
    state = initial_state(config)
    applied: list[Action] = []
    found = violations(config, state, names)
    if found:
        return applied if invariant_name in dict(found) else None
    for action in actions:
        try:
            state = step(config, state, action)
        except NotEnabled:
            action = _stand_in(config, state, action) if stand_ins else None
            if action is None:
                continue
            state = step(config, state, action)
        applied.append(action)
        found = violations(config, state, names)
        if found:
            return applied if invariant_name in dict(found) else None
    return None


def shrink_actions(config: Config, actions, invariant_name: str,
                   invariants: list[str] | None = None) -> list[Action]:
    """A shorter action list whose first violating state (its last) still violates
    `invariant_name`.

    Delta debugging on the actions themselves: drop chunks of halving size, replay (an action
    no longer enabled gets a stand-in or is skipped: see `replay`), keep any candidate that
    still fails the same way and is shorter, until no single action can go. Hypothesis shrinks the choices behind the actions, where dropping a
    step changes what every later index means; actions keep their meaning, so this pass is
    fast (milliseconds) and usually removes another third. Deterministic.
    """
    current = replay(config, actions, invariant_name, invariants)
    if current is None:
        raise ValueError(f"the actions do not end in a violation of {invariant_name}")
    changed = True
    while changed:
        changed = False
        chunk = max(1, len(current) // 2)
        while chunk >= 1:
            i = 0
            while i < len(current):
                candidate = replay(config, current[:i] + current[i + chunk:], invariant_name,
                                   invariants)
                if candidate is not None and len(candidate) < len(current):
                    current, changed = candidate, True
                else:
                    i += chunk
            chunk //= 2
    return current


# ------------------------------------------------------------------------------------------
# The fuzz driver


@dataclass
class FuzzResult:
    """The outcome of `fuzz`.

    `invariant` is None when nothing failed. On a failure: `detail` (as `violations` says it
    for the final state of `actions`), the shrunk counterexample `actions`, `hypothesis_actions`
    (its length as Hypothesis shrank it, before the action-level pass), and `transcript` (None
    only for mutant variants, which scenario files cannot name); `reproduced` says the
    transcript was replayed with no mismatch and its last block shows `VIOLATED <invariant>`.
    `error` is set instead when the spec itself raised on an enabled action (a spec bug; then
    `actions` lead up to it). `examples` counts machine runs (Hypothesis test cases, shrinking
    included), `steps` the actions applied across them, `deepest` the longest run.
    """

    config: Config
    seed: int
    examples: int
    steps: int
    seconds: float
    deepest: int = 0
    invariant: str | None = None
    detail: str | None = None
    actions: list[Action] = field(default_factory=list)
    hypothesis_actions: int = 0
    transcript: str | None = None
    reproduced: bool = False
    error: str | None = None

    @property
    def found(self) -> bool:
        return self.invariant is not None or self.error is not None


def fuzz_settings(examples: int, steps: int, shrink: bool = True) -> settings:
    """Quiet, database-free settings for one fuzz run (the seed is set on the machine)."""
    phases = [Phase.explicit, Phase.reuse, Phase.generate]
    if shrink:
        phases.append(Phase.shrink)
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        database=None,
        deadline=None,
        derandomize=False,  # `hypothesis.seed` on the machine takes precedence anyway
        suppress_health_check=_HEALTH_CHECKS_OFF,
        report_multiple_bugs=False,
        verbosity=Verbosity.quiet,
        print_blob=False,
        phases=phases,
    )


def fuzz(config: Config, examples: int = 100, steps: int = 50, seed: int = 0,
         invariants: list[str] | None = None, shrink: bool = True) -> FuzzResult:
    """Up to `examples` random walks of up to `steps` actions each; the first violation found,
    shrunk (by Hypothesis unless `shrink=False`, then by `shrink_actions`), as a transcript.

    Deterministic for given arguments (Hypothesis stops shrinking after 300 s, the one
    wall-clock limit, far beyond what these models need). Raises ValueError on bad arguments.
    """
    if examples < 1:
        raise ValueError("examples must be >= 1")
    if steps < 1:
        raise ValueError("steps must be >= 1")
    names = list(INVARIANTS) if invariants is None else list(invariants)
    counter = _Counter()
    machine = hypothesis_seed(seed)(make_machine(config, names, counter))
    start = time.perf_counter()
    failure: InvariantViolation | StepFailed | None = None
    with with_reporter(lambda *_: None):
        try:
            run_state_machine_as_test(machine, settings=fuzz_settings(examples, steps, shrink))
        except (InvariantViolation, StepFailed) as error:
            failure = error
    result = FuzzResult(config, seed, counter.runs, counter.steps, 0.0, counter.deepest)
    if isinstance(failure, StepFailed):
        result.actions, result.error = list(failure.actions), str(failure)
    elif failure is not None:
        result.hypothesis_actions = len(failure.actions)
        result.actions = shrink_actions(config, failure.actions, failure.invariant, names)
        result.invariant = failure.invariant
        result.detail = dict(violations(config, _final(config, result.actions), names))[
            failure.invariant
        ]
        if transcript_expressible(config):
            result.transcript = transcript(config, result.actions, [
                f"isrlab fuzz: {result.invariant} after {len(result.actions)} actions "
                f"(seed {seed}, {counter.runs} runs).",
                f"{result.invariant}: {result.detail}",
            ])
            result.reproduced = _replays(result.transcript, result.invariant)
    result.seconds = time.perf_counter() - start
    return result


def _final(config: Config, actions) -> Cluster:
    state = initial_state(config)
    for action in actions:
        state = step(config, state, action)
    return state


def _replays(text: str, invariant_name: str) -> bool:
    """The transcript matches its own expectations and its last block shows the violation."""
    from model_check.explore.scenario import parse, run_text

    replay_result = run_text(text, "<fuzz>")
    last = parse(text, "<fuzz>")[-1]
    return not replay_result.mismatches and any(
        line.startswith(f"VIOLATED {invariant_name}:") for line in last.expected
    )
