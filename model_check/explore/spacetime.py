"""Counterexamples as space-time diagrams: one lane per process, a step as a mark on the lane
of the process that takes it, messages as arrows from the step that sent them to the step that
received them, faults marked, and per step only the state fields that changed.

`timeline` turns a counterexample into plain data; `to_html` draws it as one self-contained
HTML file (inline SVG and CSS, no script, nothing fetched), and `to_mermaid` writes a Mermaid
sequence diagram that existing viewers (GitHub, mermaid.live) render.

Lanes. An action belongs to the process its arguments name: Controller* actions to the
controller, ProducerSend to the producer, ConsumerRead to the consumer, the network's drops to
the network, Tick to the clock, anything else to the broker it names (`broker`, else `leader`,
else `follower`). The tla-compat model's lanes are its replicas (`replica`, else `follower`,
else `leader`).

Messages. For the default model a message is anything in flight in the state: a LeaderAndIsr
request, a produce request, an AlterPartition request or answer, a fetch request or response in
a (partition, follower) slot. A message that appears after step i and is gone after step j is
an arrow from i to j; one a drop removed ends in a cross; one still in flight at the end has no
arrow.
"""

from __future__ import annotations

import html
import json
from collections.abc import Set
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any

from model_check.explore.explorer import Result
from model_check.explore.model import Model, state_to_json

CONTROLLER, PRODUCER, CONSUMER, NETWORK, CLOCK = "controller", "producer", "consumer", \
    "network", "clock"
FAULTS = frozenset({"BrokerCrash", "NetworkDropLeaderAndIsr", "NetworkDropFetch"})


@dataclass
class Step:
    index: int
    action: str
    args: dict[str, Any]
    lane: str
    changes: list[tuple[str, str, str]]  # (field, before, after)
    fault: bool = False


@dataclass
class Arrow:
    sent: int  # step index
    received: int | None  # None: still in flight at the end
    src: str
    dst: str | None
    label: str
    dropped: bool = False


@dataclass
class Timeline:
    title: str
    lanes: list[str]
    steps: list[Step]
    arrows: list[Arrow] = field(default_factory=list)
    verdict: str = ""


def lane_of(action: str, args: dict[str, Any], replicas: bool = False) -> str:
    """The lane of a step. `replicas`: the tla-compat model, whose processes are replicas and
    whose arguments name the acting one first as `replica`, then `follower`, then `leader`."""
    if action.startswith("Controller"):
        return CONTROLLER
    if action.startswith("Producer"):
        return PRODUCER
    if action.startswith("Consumer"):
        return CONSUMER
    if action.startswith("Network"):
        return NETWORK
    if action == "Tick":
        return CLOCK
    names = ("replica", "follower", "leader") if replicas else ("broker", "leader", "follower")
    for name in names:
        if isinstance(args.get(name), int) and args[name] >= 0:
            return f"{'r' if replicas else 'b'}{args[name]}"
    return CLOCK


# State fields ---------------------------------------------------------------------------


def _show(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)


def _flatten(value: Any, path: str, out: dict[str, str]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            _flatten(item, f"{path}.{key}" if path else str(key), out)
    elif isinstance(value, list) and value and all(isinstance(x, dict | list) for x in value) \
            and not path.endswith(("log", "epoch_cache", "purgatory")):
        for i, item in enumerate(value):
            _flatten(item, f"{path}[{i}]", out)
    else:
        out[path] = _show(value)


def _compact(value: Any) -> str:
    """A set member as `key=value ...` (a record) or its JSON."""
    if isinstance(value, dict):
        value = dict(value)
        head = [value.pop("type")] if "type" in value else []
        return " ".join(head + [f"{k}={_show(v)}" for k, v in value.items()])
    return _show(value)


def _change(name: str, before: Any, after: Any) -> tuple[str, str, str]:
    """(field, before, after); for a set, what left it and what joined it."""
    if isinstance(before, frozenset) or isinstance(after, frozenset):
        before, after = before or frozenset(), after or frozenset()
        return (name, "; ".join(sorted(before - after)) or "-",
                "; ".join(sorted(after - before)) or "-")
    return name, before, after


def _fields(model: Model, state: Any) -> dict[str, Any]:
    """The state as named fields: for the default model one per replica field (`p0 b1
    high_watermark`), store field and message slot, and each set whole; otherwise the JSON
    form, flattened."""
    out: dict[str, str] = {}
    if not (is_dataclass(state) and hasattr(state, "replicas")):
        _flatten(model.to_json(state), "", out)
        return out
    for f in fields(state):
        if f.name.startswith("_"):
            continue
        value = getattr(state, f.name)
        if f.name == "replicas":
            for p, row in enumerate(value):
                for b, replica in enumerate(row):
                    for name, item in state_to_json(replica).items():
                        if name == "log":  # records as the tables show them: v1@e0
                            item = " ".join(str(r) for r in replica.log) or "[]"
                            out[f"p{p} b{b} {name}"] = item
                        else:
                            out[f"p{p} b{b} {name}"] = _show(item)
        elif f.name == "fetches":
            for p, row in enumerate(value):
                for b, message in enumerate(row):
                    out[f"fetch p{p} b{b}"] = (_compact(state_to_json(message))
                                                if message is not None else "none")
        elif f.name == "controller":
            for name, item in state_to_json(value).items():
                if name == "partitions":
                    for p, ps in enumerate(item):
                        for key, v in ps.items():
                            out[f"store p{p} {key}"] = _show(v)
                else:
                    out[f"store {name}"] = _show(item)
        elif isinstance(value, Set):
            out[f.name] = frozenset(_compact(state_to_json(v)) for v in value)
        else:
            out[f.name] = _show(state_to_json(value))
    return out


def _messages(state: Any) -> dict[str, tuple[str, str]]:
    """key -> (label, sender's lane) of every message in flight (default model only)."""
    if not (is_dataclass(state) and hasattr(state, "leader_and_isr")):
        return {}
    out = {}
    for m in state.leader_and_isr:
        out[f"lai {m!r}"] = (f"LeaderAndIsr p{m.partition} leader {m.leader} epoch "
                             f"{m.leader_epoch} isr {list(m.isr)}", CONTROLLER)
    for m in state.produce_requests:
        out[f"produce {m!r}"] = (f"Produce v{m.value} p{m.partition}", PRODUCER)
    for m in state.alter_partitions:
        kind = ("AlterPartition", "accepted", "rejected")[m.answer]
        sender = f"b{m.leader}" if m.answer == 0 else CONTROLLER
        out[f"alter {m!r}"] = (f"{kind} p{m.partition} isr {list(m.isr)}", sender)
    for p, row in enumerate(state.fetches):
        for f, m in enumerate(row):
            if m is None:
                continue
            body = state_to_json(m)
            kind = body.pop("type", type(m).__name__)
            if kind == "FetchResponse":
                label, sender = f"{body.get('kind')} answer p{p} to b{f}", f"b{m.leader}"
            else:
                label, sender = f"{kind} p{p} from b{f}", f"b{f}"
            out[f"fetch {p} {f} {m!r}"] = (label, sender)
    return out


def timeline(model: Model, result: Result, title: str = "") -> Timeline:
    """The counterexample of `result` as lanes, steps, arrows and per-step changes."""
    v = result.violation
    if v is None:
        raise ValueError("no counterexample to draw")
    steps: list[Step] = []
    arrows: list[Arrow] = []
    in_flight: dict[str, tuple[int, str, str]] = {}  # key -> (sent at, lane, label)
    previous_fields: dict[str, Any] = {}
    previous_messages: dict[str, tuple[str, str]] = {}
    lanes: set[str] = set()
    for index, (label, state) in enumerate(v.trace):
        now = _fields(model, state)
        messages = _messages(state)
        if label is None:
            action, args, lane = "initial state", {}, CLOCK
            changes: list[tuple[str, str, str]] = []
        else:
            action, args = model.action_name(label), model.action_args(label)
            lane = lane_of(action, args, replicas=model.name != "kafka")
            changes = [_change(k, previous_fields.get(k, ""), now.get(k, ""))
                       for k in sorted(set(now) | set(previous_fields))
                       if now.get(k) != previous_fields.get(k)]
            for key in sorted(previous_messages.keys() - messages.keys()):
                sent, src, text = in_flight.pop(key)
                # A drop or a crash loses what it removes; any other step received it.
                dropped = action.startswith("NetworkDrop") or action in FAULTS
                dst = _dropped_lane(args) if action.startswith("NetworkDrop") else lane
                arrows.append(Arrow(sent, index, src, dst, text, dropped))
                lanes.add(dst)
        for key in sorted(messages.keys() - previous_messages.keys()):
            text, src = messages[key]
            in_flight[key] = (index, src, text)
            lanes.add(src)
        lanes.add(lane)
        steps.append(Step(index, action, args, lane, changes, action in FAULTS))
        previous_fields, previous_messages = now, messages
    for sent, src, text in in_flight.values():
        arrows.append(Arrow(sent, None, src, None, text))
    return Timeline(title or f"{v.invariant} after {len(v.trace) - 1} steps",
                    _order(lanes), steps, arrows, f"{v.invariant}: {v.detail}")


def _dropped_lane(args: dict[str, Any]) -> str:
    """Where a dropped message was going: the broker the drop names, else the network."""
    for name in ("broker", "follower"):
        if isinstance(args.get(name), int):
            return f"b{args[name]}"
    return NETWORK


def _order(lanes: set[str]) -> list[str]:
    first = [x for x in (CONTROLLER,) if x in lanes]
    brokers = sorted((x for x in lanes if x[0] in "br" and x[1:].isdigit()),
                     key=lambda x: (x[0], int(x[1:])))
    last = [x for x in (PRODUCER, CONSUMER, NETWORK, CLOCK) if x in lanes]
    return first + brokers + last


# HTML ------------------------------------------------------------------------------------

LANE_W, ROW_H, TOP, LEFT = 150, 34, 50, 60
STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.3em; } .verdict { color: #b00020; font-weight: 600; }
svg text { font: 12px system-ui, sans-serif; }
.lane { stroke: #bbb; stroke-width: 1; }
.lane-name { font-weight: 600; text-anchor: middle; }
.step { fill: #1f6feb; } .fault { fill: #d1242f; }
.action { text-anchor: start; } .num { fill: #888; text-anchor: end; }
.msg { stroke: #6e7781; stroke-width: 1.2; fill: none; marker-end: url(#head); }
.drop { stroke: #d1242f; stroke-dasharray: 4 3; }
.msg-label { fill: #57606a; font-size: 10px; }
table { border-collapse: collapse; margin-top: 1.5em; }
td, th { border: 1px solid #d0d7de; padding: 2px 8px; vertical-align: top; font-size: 13px; }
th { background: #f6f8fa; text-align: left; } td.field { font-family: monospace; }
del { color: #d1242f; text-decoration: none; } ins { color: #1a7f37; text-decoration: none; }
"""


def _lane_x(lanes: list[str], lane: str | None) -> float:
    return LEFT + LANE_W * (lanes.index(lane) if lane in lanes else len(lanes) - 0.5) \
        + LANE_W / 2


def _row_y(index: int) -> float:
    return TOP + 20 + ROW_H * index


def to_html(t: Timeline) -> str:
    """One self-contained HTML page: the diagram, then a table of each step's changes."""
    e = html.escape
    width = LEFT + LANE_W * len(t.lanes) + 240
    height = _row_y(len(t.steps)) + 20
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'class="spacetime">',
           '<defs><marker id="head" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
           'markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" '
           'fill="#6e7781"/></marker></defs>']
    for lane in t.lanes:
        x = _lane_x(t.lanes, lane)
        svg.append(f'<text class="lane-name" x="{x}" y="{TOP - 14}">{e(lane)}</text>')
        svg.append(f'<line class="lane" data-lane="{e(lane)}" x1="{x}" y1="{TOP}" x2="{x}" '
                   f'y2="{height - 10}"/>')
    for a in t.arrows:
        x1, y1 = _lane_x(t.lanes, a.src), _row_y(a.sent)
        if a.received is None:
            x2, y2 = x1 + LANE_W * 0.4, y1 + ROW_H * 0.6
        else:
            x2, y2 = _lane_x(t.lanes, a.dst), _row_y(a.received)
        cls = "msg drop" if a.dropped else "msg"
        svg.append(f'<path class="{cls}" d="M {x1:.0f} {y1:.0f} L {x2:.0f} {y2:.0f}">'
                   f'<title>{e(a.label)}</title></path>')
        mx, my = x1 + (x2 - x1) * 0.3, y1 + (y2 - y1) * 0.3
        svg.append(f'<text class="msg-label" x="{mx + 4:.0f}" y="{my - 3:.0f}">'
                   f'{e(a.label)}</text>')
    for s in t.steps:
        x, y = _lane_x(t.lanes, s.lane), _row_y(s.index)
        mark = (f'<path class="fault" d="M {x - 6} {y - 6} L {x + 6} {y + 6} M {x - 6} {y + 6} '
                f'L {x + 6} {y - 6}" stroke="#d1242f" stroke-width="3"/>' if s.fault else
                f'<circle class="step" cx="{x}" cy="{y}" r="5"/>')
        args = ", ".join(f"{k}={v}" for k, v in s.args.items())
        svg.append(f'<g class="step-mark" data-step="{s.index}">{mark}'
                   f'<text class="num" x="{LEFT - 10}" y="{y + 4}">{s.index}</text>'
                   f'<text class="action" x="{x + 9}" y="{y + 4}">{e(s.action)}'
                   f'<title>{e(s.action)}({e(args)})</title></text></g>')
    svg.append("</svg>")
    rows = []
    for s in t.steps:
        args = ", ".join(f"{k}={v}" for k, v in s.args.items())
        if s.changes:
            cells = "<br>".join(
                f'<span class="field">{e(k)}</span>: <del>{e(before) or "-"}</del> &rarr; '
                f'<ins>{e(after) or "-"}</ins>' for k, before, after in s.changes)
        else:
            cells = "(initial)" if s.index == 0 else "(no field changed)"
        rows.append(f'<tr data-step="{s.index}"><td>{s.index}</td><td>{e(s.lane)}</td>'
                    f'<td>{e(s.action)}({e(args)})</td><td>{cells}</td></tr>')
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<title>{e(t.title)}</title><style>{STYLE}</style></head><body>'
            f'<h1>{e(t.title)}</h1><p class="verdict">{e(t.verdict)}</p>'
            + "".join(svg)
            + '<table class="changes"><tr><th>step</th><th>lane</th><th>action</th>'
            '<th>what changed</th></tr>' + "".join(rows) + "</table></body></html>\n")


# Mermaid ---------------------------------------------------------------------------------


def to_mermaid(t: Timeline) -> str:
    """A Mermaid sequence diagram: a received message is an arrow labelled with the step that
    received it; a step that received nothing is a note over its lane."""
    names = {lane: lane.replace("-", "_") for lane in t.lanes}
    received = {a.received: a for a in t.arrows if a.received is not None and not a.dropped}
    lines = ["sequenceDiagram"] + [f"    participant {names[x]}" for x in t.lanes]
    for s in t.steps[1:]:
        a = received.get(s.index)
        args = ", ".join(f"{k}={v}" for k, v in s.args.items())
        text = f"{s.index}. {s.action}({args})".replace(";", ",").replace("#", "")
        if a is not None and a.src in names and a.dst in names:
            arrow = "-x" if a.dropped else "->>"
            lines.append(f"    {names[a.src]}{arrow}{names[a.dst]}: {text}")
        else:
            lines.append(f"    Note over {names[s.lane]}: {text}")
    lines.append(f"    Note over {names[t.lanes[0]]}: {t.verdict[:120].replace(';', ',')}")
    return "\n".join(lines) + "\n"


# Runs of the reference broker --------------------------------------------------------------


def _state_fields(body: dict) -> dict[str, str]:
    """A trace line's post-state as named fields: `p0 b1 high_watermark`, `store p0 isr`."""
    state = body.get("state") or {}
    out: dict[str, str] = {}
    replicas = state.get("replicas") or ([state] if state.get("broker") is not None else [])
    for r in replicas:
        for key, value in r.items():
            if key not in ("partition", "broker"):
                out[f"p{r['partition']} b{r['broker']} {key}"] = _show(value)
    for ps in state.get("partitions") or ():
        for key, value in ps.items():
            if key != "partition":
                out[f"store p{ps['partition']} {key}"] = _show(value)
    if state.get("registered") is not None:
        out["store registered"] = _show(state["registered"])
    return out


def run_timeline(events: list, title: str, verdict: str = "") -> Timeline:
    """Lines of a run (merged order; `Event`s of `model_check.conformance.replay`) as a space-time view:
    a lane per node, messages from their send ids to their receive, nemesis faults marked,
    and per step the post-state fields that changed since that replica's previous line."""
    steps: list[Step] = []
    arrows: list[Arrow] = []
    sent: dict[str, tuple[int, str]] = {}
    known: dict[str, str] = {}
    lanes: set[str] = set()
    for index, e in enumerate(events):
        body = e.body
        lane = e.node
        lanes.add(lane)
        if e.kind == "event":
            action, args = e.action, dict(body.get("args") or {})
            fields_now = _state_fields(body)
            changes = [(k, known.get(k, "-"), v) for k, v in sorted(fields_now.items())
                       if known.get(k) != v]
            known.update(fields_now)
            fault = action in FAULTS or action.startswith("NetworkDrop")
        elif e.kind == "nemesis":
            action = f"nemesis {body.get('f', '')} {body.get('type', '')}".strip()
            args, changes, fault = {"target": body.get("value")}, [], True
        else:
            action = f"{body.get('f', '')} {body.get('type', '')}".strip()
            args = {k: body[k] for k in ("value", "offset", "partition") if k in body}
            changes, fault = [], False
        if e.recv is not None and e.recv in sent:
            at, src = sent.pop(e.recv)
            arrows.append(Arrow(at, index, src, lane, e.recv,
                                dropped=e.action.startswith("NetworkDrop")))
        for mid in e.send:
            sent[mid] = (index, lane)
        steps.append(Step(index, action, args, lane, changes, fault))
    for mid, (at, src) in sent.items():
        arrows.append(Arrow(at, None, src, None, mid))
    order = sorted(lanes, key=lambda x: (x != "meta", not (x[0] == "b" and x[1:].isdigit()),
                                         int(x[1:]) if x[1:].isdigit() else 0, x))
    return Timeline(title, order, steps, arrows, verdict)
