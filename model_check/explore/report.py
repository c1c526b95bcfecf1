"""Counterexamples and results for people (tables) and for tools (JSON, ITF, JUnit XML)."""

from __future__ import annotations

import json
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from model_check.explore.explorer import Result
from model_check.explore.model import Model
from spec.promises import Promise, promise, promises


def unchecked(model: Model, names: list[str]) -> list[Promise]:
    """The invariants a default search leaves out because the configuration does not promise
    them (none for a model without a spec config: tla-compat's are all promised)."""
    config = getattr(model, "config", None)
    if config is None:
        return []
    return [p for p in promises(config) if not p.promised and p.invariant not in names]


def broken_promise(model: Model, result: Result) -> Promise | None:
    """Whether the configuration promises the violated invariant (None: no violation, or a
    model without a spec config, whose invariants are all promised)."""
    config = getattr(model, "config", None)
    if result.violation is None or config is None:
        return None
    return promise(config, result.violation.invariant)


def is_trade_off(model: Model, result: Result) -> bool:
    """A violation of an invariant the configuration does not promise: its trade-off."""
    broken = broken_promise(model, result)
    return broken is not None and not broken.promised


def exit_code(model: Model, result: Result) -> int:
    """0: every promised invariant holds (a trade-off shown is not a failure); 1: a promised
    invariant is violated; 3: stopped at --max-states."""
    if result.result == "violation" and is_trade_off(model, result):
        return 0
    return {"ok": 0, "violation": 1, "incomplete": 3}[result.result]


def unchecked_line(not_checked: list[Promise]) -> str:
    """One line naming the invariants not checked, grouped by why."""
    by_why: dict[str, list[str]] = {}
    for p in not_checked:
        by_why.setdefault(p.why, []).append(p.invariant)
    return "not checked, not promised by this configuration: " + "; ".join(
        f"{', '.join(names)}: {why}" for why, names in by_why.items())


def result_json(model: Model, variant: str, result: Result,
                not_checked: list[Promise] = ()) -> dict[str, Any]:
    """The `--json` object of `isrlab check` (a stable contract: CI parses it). `not_checked`
    lists the invariants left out of a default search (not promised); a violation says
    whether the configuration promises its invariant."""
    out: dict[str, Any] = {
        "result": result.result,
        "model": model.name,
        "variant": variant,
        "config": model.config_json(),
        "distinct_states": result.distinct_states,
        "generated_states": result.generated_states,
        "depth": result.depth,
        "seconds": round(result.seconds, 3),
        "states_per_second": round(result.states_per_second, 1),
        "symmetry": result.symmetry,
        "partial_order_reduction": result.reduction,
        "encoding": result.encoding,
        "compiled": result.compiled,
        "workers": result.workers,
        "fingerprint_collision_probability": result.collision_probability,
        "coverage": dict(sorted(result.coverage.items())),
        "never_fired": never_fired(model, result),
        "not_checked": [{"invariant": p.invariant, "why": p.why} for p in not_checked],
    }
    if result.seed is not None:
        out["seed"] = result.seed
        out["traces"] = result.traces
    if result.violation is not None:
        v = result.violation
        broken = broken_promise(model, result)
        out["violation"] = {
            "invariant": v.invariant,
            "detail": v.detail,
            "promised": broken is None or broken.promised,
            "why_not_promised": None if broken is None or broken.promised else broken.why,
            "trace": [
                {
                    "action": None if label is None else model.action_name(label),
                    "args": {} if label is None else model.action_args(label),
                    "state": model.to_json(state),
                }
                for label, state in v.trace
            ],
        }
    return out


def never_fired(model: Model, result: Result) -> list[str]:
    return [name for name in model.action_names() if result.coverage.get(name, 0) == 0]


def counterexample_table(model: Model, result: Result) -> str:
    """Step-by-step text: each action and the state after it, the violated invariant last."""
    v = result.violation
    lines = [f"Invariant {v.invariant} is violated after {len(v.trace) - 1} steps:", ""]
    for step, (label, state) in enumerate(v.trace):
        if label is None:
            lines.append("step 0: initial state")
        else:
            args = ", ".join(f"{k}={a}" for k, a in model.action_args(label).items())
            lines.append(f"step {step}: {model.action_name(label)}({args})")
        lines += ["    " + line for line in model.render(state).splitlines()]
        lines.append("")
    lines.append(f"VIOLATED {v.invariant}: {v.detail}")
    return "\n".join(lines)


def _encoding(result: Result) -> str:
    """Which flat encoding ran, when one did: a stale or absent build is slower, so it is said."""
    if result.encoding != "flat":
        return ""
    if result.compiled:
        return ", flat encoding (compiled)"
    from model_check.explore import compiled

    return (f", flat encoding as Python (the compiled module is {compiled.state()}: "
            "`make install` builds it)")


def summary(model: Model, variant: str, result: Result, not_checked: list[Promise] = ()) -> str:
    """The final summary: verdict (a violation as a bug or as the configuration's trade-off),
    the invariants not checked because not promised, counts, speed, and per-action coverage."""
    head = {
        "ok": "OK: every checked invariant holds in every reachable state",
        "violation": f"VIOLATION of {result.violation.invariant if result.violation else '?'}",
        "incomplete": "INCOMPLETE: stopped at --max-states without a violation",
    }[result.result]
    if result.seed is not None and result.result == "ok":
        head = f"OK: no violation in {result.traces} random traces (seed {result.seed})"
    broken = broken_promise(model, result)
    if broken is not None:
        head = (f"VIOLATION of {broken.invariant}, which this configuration promises: a bug"
                if broken.promised else
                f"TRADE-OFF: {broken.invariant} is violated, and is not promised by this "
                f"configuration: {broken.why}")
    lines = [
        head,
        *([unchecked_line(not_checked)] if not_checked else []),
        f"model {model.name}, variant {variant}, symmetry {'on' if result.symmetry else 'off'}, "
        f"workers {result.workers}" + (", partial-order reduction" if result.reduction else "")
        + _encoding(result),
        f"{result.distinct_states:,} distinct states, {result.generated_states:,} generated, "
        f"depth {result.depth}, {result.seconds:.2f} s ({result.states_per_second:,.0f} distinct/s)",
        f"fingerprint collision probability <= {result.collision_probability:.1e}",
        "coverage (times each action fired):",
    ]
    for name in model.action_names():
        count = result.coverage.get(name, 0)
        flag = "   <- never fired: a guard may be wrong or the bounds too small" if count == 0 else ""
        lines.append(f"  {name:<32} {count:>12,}{flag}")
    return "\n".join(lines)


# ITF: the Informal Trace Format of Apalache and Quint.


def _itf_value(value: Any) -> Any:
    if isinstance(value, bool) or isinstance(value, str):
        return value
    if isinstance(value, int):
        return {"#bigint": str(value)}
    if value is None:
        return {"#unserializable": "None"}
    if isinstance(value, dict):
        return {str(k): _itf_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_itf_value(v) for v in value]
    return {"#unserializable": repr(value)}


def itf_trace(model: Model, result: Result) -> dict[str, Any]:
    """The counterexample as an ITF trace: one ITF state per step, with the action taken."""
    v = result.violation
    states = []
    variables: list[str] = []
    for index, (label, state) in enumerate(v.trace):
        body = model.to_json(state)
        variables = list(body)
        item = {"#meta": {"index": index}}
        item.update({k: _itf_value(x) for k, x in body.items()})
        item["action_taken"] = "init" if label is None else model.action_name(label)
        item["action_args"] = _itf_value({} if label is None else model.action_args(label))
        states.append(item)
    return {
        "#meta": {
            "format": "ITF",
            "format-description": "https://apalache-mc.org/docs/adr/015adr-trace.html",
            "source": f"isrlab {model.name}",
            "description": f"counterexample to {v.invariant}: {v.detail}",
        },
        "vars": variables + ["action_taken", "action_args"],
        "states": states,
    }


def junit_xml(model: Model, variant: str, result: Result, invariants: list[str],
              not_checked: list[Promise] = ()) -> str:
    """One test case per checked invariant, the violated one failing with the trace attached
    (skipped when not promised: a trade-off), and one skipped per invariant not checked."""
    trade_off = is_trade_off(model, result)
    failures = 1 if result.violation and not trade_off else 0
    errors = 1 if result.result == "incomplete" else 0
    suite = f"isrlab.check.{model.name}.{variant}"
    cases = []
    for name in invariants:
        attrs = f"classname={quoteattr(suite)} name={quoteattr(name)} time=\"{result.seconds:.3f}\""
        if trade_off and result.violation.invariant == name:
            why = quoteattr("TRADE-OFF, not promised by this configuration: "
                            + broken_promise(model, result).why)
            cases.append(f"  <testcase {attrs}>\n    <skipped message={why}/>\n  </testcase>")
        elif result.violation and result.violation.invariant == name:
            text = escape(counterexample_table(model, result))
            cases.append(f"  <testcase {attrs}>\n    <failure message={quoteattr(result.violation.detail)}>"
                         f"{text}</failure>\n  </testcase>")
        elif result.result == "incomplete":
            cases.append(f"  <testcase {attrs}>\n    <error message=\"state bound reached before "
                         f"the search completed\"/>\n  </testcase>")
        else:
            cases.append(f"  <testcase {attrs}/>")
    for p in not_checked:
        attrs = f"classname={quoteattr(suite)} name={quoteattr(p.invariant)} time=\"0.000\""
        why = quoteattr(f"not checked, not promised by this configuration: {p.why}")
        cases.append(f"  <testcase {attrs}>\n    <skipped message={why}/>\n  </testcase>")
    props = json.dumps(model.config_json(), sort_keys=True)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<testsuite name={quoteattr(suite)} tests=\"{len(invariants) + len(not_checked)}\" "
        f"failures=\"{failures}\" "
        f"errors=\"{errors}\" time=\"{result.seconds:.3f}\">\n"
        f"  <properties><property name=\"config\" value={quoteattr(props)}/>"
        f"<property name=\"distinct_states\" value=\"{result.distinct_states}\"/></properties>\n"
        + "\n".join(cases)
        + "\n</testsuite>\n"
    )
