"""The interface the explorer searches: any transition system with named actions and invariants.

Two models implement it: `KafkaModel` (the spec in `spec/`, the default) and the tla-compat
model (`model_check.explore.tla_compat`), a re-expression of hachikuji/kafka-specification.

A model is deliberately small (stateright's shape): initial states, successors with their
action labels, named invariants, and ways to show a state and an action to a person or a tool.
States must be hashable; labels must be picklable (parallel search sends them between
processes).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import fields
from typing import Any

from spec import Config, initial_state
from spec.actions import successors
from spec.invariants import INVARIANTS
from spec.lemmas import run_start
from spec.render import render


class Model:
    """What the explorer searches: a transition system with named invariants.

    A model must give three things, as stateright's does: `init_states()`, `successors(state)`
    ((action label, next state) pairs in a deterministic order) and `invariants` (name ->
    check(state) -> None when it holds, else a one-line detail). States must be hashable and
    labels picklable (parallel search sends them between processes). Everything else has a
    default that a model overrides when it knows better: how an action is named and shown,
    how a state is shown to a person or a tool, and symmetry.

    Optional, looked up by the explorer when present: `holds(state) -> bool`, True when every
    invariant holds, asked first so that a state that breaks none costs one call;
    `holds_from(before, state) -> bool`, the same of a successor of `before`, answered from
    what the step changed; `compact(before, state)`, an equal state made of parts shared with
    earlier ones (`before` None: a state with no predecessor). model_check.explore.flat has
    all three.
    """

    name: str = "model"
    invariants: dict[str, Callable[[Any], str | None]] = {}

    def init_states(self) -> Iterable[Any]:
        raise NotImplementedError

    def successors(self, state: Any) -> Iterable[tuple[Any, Any]]:
        raise NotImplementedError

    def action_name(self, label: Any) -> str:
        """The action's kind, as coverage counts it."""
        return label.name

    def action_args(self, label: Any) -> dict[str, Any]:
        return label.args()

    def action_names(self) -> tuple[str, ...]:
        """Every action kind the model has (so coverage can flag those that never fired)."""
        return ()

    def render(self, state: Any) -> str:
        return repr(state)

    def to_json(self, state: Any) -> Any:
        return state_to_json(state)

    def symmetric(self) -> bool:
        """Whether a permutation of broker ids is an automorphism (then `canonical` is used)."""
        return False

    def canonical(self, state: Any) -> Any:
        """The representative of the state's symmetry class (identity when not symmetric)."""
        return state

    def config_json(self) -> dict[str, Any]:
        """The settings a report prints beside its verdict."""
        return {}


def core_problem(config: Config, kip966: bool = False) -> str | None:
    """What puts `config` outside the core model, or None: one partition replicated on every
    broker, one controller that never fails, no KIP-966 (unless `kip966`), synchronous ISR
    changes. The flat encoding (model_check.explore.flat) and the partial-order reduction cover
    exactly the core; the Z3 encoding (model_check.prove.symbolic, `isrlab prove`) the core and
    KIP-966."""
    if config.partitions != 1:
        return "more than one partition"
    if config.replication_factor not in (None, config.brokers):
        return "a replication factor below the broker count"
    if config.max_controller_failovers:
        return "controller failovers"
    if config.eligible_leader_replicas_enable and not kip966:
        return "eligible leader replicas (KIP-966)"
    if config.isr_changes_async or config.hw_over_requested_isr:
        return "asynchronous ISR changes (KIP-497)"
    return None


class KafkaModel(Model):
    """The default model: `spec` under one `Config`.

    Not symmetric: assignment order breaks broker symmetry (clean election takes the first
    live ISR member in assignment order, and replica 0 is the preferred leader), so no
    permutation of broker ids is an automorphism and symmetry reduction would be unsound.
    """

    name = "kafka"
    # Its states are spec Clusters under `config`: a partial-order reduction of the same config
    # (model_check.prove.por.Reduction) may be handed to the explorer with it.
    reducible = True

    def __init__(self, config: Config, invariants: Iterable[str] | None = None):
        self.config = config
        names = list(INVARIANTS) if invariants is None else list(invariants)
        self.invariants = {
            n: (lambda state, check=INVARIANTS[n], cfg=config: check(cfg, state)) for n in names
        }

    def init_states(self):
        return [initial_state(self.config)]

    def successors(self, state):
        return successors(self.config, state)

    def action_names(self):
        from spec.actions import ACTION_TYPES, ASYNC_ISR_ACTIONS

        # The AlterPartition actions exist only with isr.changes.async: not listed otherwise,
        # so coverage does not flag them as never fired.
        return tuple(t.__name__ for t in ACTION_TYPES
                     if self.config.isr_changes_async or t not in ASYNC_ISR_ACTIONS)

    def render(self, state) -> str:
        return render(self.config, state)

    def config_json(self) -> dict[str, Any]:
        # Every field, the model switches and variant rules included: a reader of the report
        # sees exactly which model was checked (replay checks runs against the same one).
        return self.config.settings()


class RunGhostModel(KafkaModel):
    """The default model with the ghost `run` carried along each path: states are
    (cluster, run), where `run` is the leader epoch since which every epoch has named the
    controller's leader (`spec.lemmas.run_start`). It checks lemmas about that history on
    reachable states (`spec.lemmas.RunLeaderBacked`), which the Z3 encoding states over its
    ghost `c_run`; a cluster is reached once per run it can have, so the search is larger."""

    name = "kafka-run-ghost"

    def init_states(self):
        return [(s, 0) for s in super().init_states()]

    def successors(self, state):
        s, run = state
        return [(a, (t, run_start(s, t, run))) for a, t in successors(self.config, s)]

    def render(self, state) -> str:
        run = f"run of the controller's leader from epoch {state[1]}"
        return f"{render(self.config, state[0])}\n{run}"

    def to_json(self, state) -> dict[str, Any]:
        return {"cluster": state_to_json(state[0]), "run": state[1]}

    # Its states are (cluster, run) pairs, which a partial-order reduction does not step.
    reducible = False


def state_to_json(value: Any) -> Any:
    """Frozen dataclasses, tuples and sets to JSON values; sets become sorted lists."""
    if hasattr(value, "__dataclass_fields__"):
        out = {f.name: state_to_json(getattr(value, f.name)) for f in fields(value) if f.name[0] != "_"}
        if type(value).__name__ in ("FetchRequest", "EpochRequest", "FetchResponse"):
            out = {"type": type(value).__name__, **out}
        return out
    if isinstance(value, frozenset | set):
        return sorted((state_to_json(v) for v in value), key=repr)
    if isinstance(value, tuple | list):
        return [state_to_json(v) for v in value]
    return value
