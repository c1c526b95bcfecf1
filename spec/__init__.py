"""The executable specification of Kafka partition replication.

Pure and deterministic: frozen states, one `step(config, state, action)` that raises
`NotEnabled` and changes nothing when a guard fails, `enabled(config, state)` in a fixed order,
and named invariants. See `spec.actions` for the theory of operation.
"""

from spec.actions import (
    ACTION_TYPES,
    ACTIONS_BY_COMMAND,
    ACTIONS_BY_NAME,
    Action,
    NotEnabled,
    enabled,
    step,
    step_with_outcome,
    successors,
)
from spec.config import VARIANTS, Config, ConfigError, Variant, load_properties, parse_properties
from spec.invariants import INVARIANTS, violations
from spec.state import Cluster, initial_state

__all__ = [
    "ACTION_TYPES", "ACTIONS_BY_COMMAND", "ACTIONS_BY_NAME", "Action", "NotEnabled", "enabled",
    "step", "step_with_outcome", "successors", "VARIANTS", "Config", "ConfigError", "Variant",
    "load_properties", "parse_properties", "INVARIANTS", "violations", "Cluster", "initial_state",
]
