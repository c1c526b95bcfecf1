"""The trace format: its name, the message-id codec and the causal merge (docs/traces.md).

Every writer (impl/trace.py) and reader (model_check.replay, model_check.history, the Spark
harness) takes the format's name, the spelling of message ids and the order in which one run's
per-node lines are merged from here, so the two sides cannot drift apart.
"""

from __future__ import annotations

import re

FORMAT = "isrlab-trace/2"

# A message id: the sending node's name, a colon, the letter m and the node's message count.
_MESSAGE_ID = re.compile(r"([^:\s]+):m(0|[1-9][0-9]*)")


def message_id(node: str, k: int) -> str:
    """The id of the k-th message `node` sent: `b0:m7`."""
    if not node or ":" in node or any(c.isspace() for c in node):
        raise ValueError(f"node name {node!r} cannot be part of a message id")
    if type(k) is not int or k < 0:
        raise ValueError(f"message number {k!r} is not a non-negative integer")
    return f"{node}:m{k}"


def parse_message_id(text: object) -> tuple[str, int]:
    """(node, k) of a message id `<node>:m<k>`; ValueError on anything else."""
    match = _MESSAGE_ID.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"bad message id {text!r} (expected <node>:m<k>)")
    return match.group(1), int(match.group(2))
