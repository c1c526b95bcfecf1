"""The trace format in `vocab.trace`: the message-id codec, the causal merge, and the two things
generated from or checked against its structs (the Spark schema, the field tables of
docs/traces.md), each shown to catch a struct that changed."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
import pytest

from vocab import trace as T

DOC = Path(__file__).resolve().parent.parent / "docs" / "traces.md"
STRUCTS = (T.HeaderLine, T.HeaderConfig, T.EventLine, T.Args, T.State, T.PartitionState,
           T.ReplicaState, T.HistoryLine, T.NemesisLine)


def test_message_ids_round_trip_and_anything_else_is_an_error():
    assert T.message_id("producer", 12) == "producer:m12"
    assert T.parse_message_id("b0:m7") == ("b0", 7)
    assert T.parse_message_id(T.message_id("meta", 1_000_001)) == ("meta", 1_000_001)
    for bad in ("b0:7", "b0:m", "b0:m07", "b0:m-1", ":m1", "a:b:m1", "b0:m1 ", 7, None):
        with pytest.raises(ValueError, match="bad message id"):
            T.parse_message_id(bad)
    for node, k in (("a:b", 1), ("", 1), ("b0", -1), ("b0", True)):
        with pytest.raises(ValueError):
            T.message_id(node, k)


def _merge(streams):
    """Merge lines written as (time, sends, recv, name)."""
    order = T.causal_merge(streams, lambda e: e[1], lambda e: e[2], lambda e: e[0])
    return [e[3] for e in order]


def test_causal_merge_waits_for_traced_sends_only_and_names_a_cycle():
    streams = {
        "b1": [(1, [], "b0:m1", "b1 handles b0:m1"), (2, [], "producer:m9", "b1 untraced")],
        "b0": [(5, ["b0:m1"], None, "b0 sends m1"), (5, [], None, "b0 later")],
        "b2": [(5, [], None, "b2 tie")],
    }
    # b1's clock is early: by time it would go first; it waits for b0's send. The untraced
    # receive does not wait. Ties at 5: node names in order (b0 before b2).
    assert _merge(streams) == ["b0 sends m1", "b1 handles b0:m1", "b1 untraced", "b0 later",
                               "b2 tie"]
    # Nothing waits: a merge by time with the same tie rule, each node's order kept even when
    # its clock goes back.
    assert _merge({"x": [(3, [], None, "x3"), (1, [], None, "x1")],
                   "a": [(2, [], None, "a2"), (3, [], None, "a3")]}) == ["a2", "a3", "x3", "x1"]
    # b0 receives b1's m1 before it sends b0:m1, which b1 waits for before sending: a cycle.
    cycle = {"b0": [(1, [], "b1:m1", "b0 waits"), (2, ["b0:m1"], None, "b0 sends")],
             "b1": [(1, [], "b0:m1", "b1 waits"), (2, ["b1:m1"], None, "b1 sends")]}
    with pytest.raises(T.CausalCycle, match="receives 'b1:m1', which no causal order") as info:
        _merge(cycle)
    assert info.value.item[3] == "b0 waits"


def test_check_accepts_the_structs_and_rejects_with_one_line():
    event = {"kind": "event", "node": "b0", "seq": 0, "time_ms": 1, "action": "LeaderAppend",
             "args": {"partition": 0, "broker": 0, "value": 1}, "outcome": "APPENDED",
             "outcome_args": {"offset": 0}, "send": ["b0:m1"], "recv": "producer:m2"}
    assert T.check(event).outcome_args == {"offset": 0}
    cases = [
        ({**event, "recv": "producer:2"}, "bad message id 'producer:2' (expected <node>:m<k>)"),
        ({**event, "send": ["b1:m1"]}, "sends 'b1:m1', an id of another node than b0"),
        ({**event, "outcome": "appended at 0"},
         "event line: outcome 'appended at 0' does not match '^[A-Z][A-Z0-9_]*$' - at `$.outcome`"),
        # Well-formed names are remembered per field: an action name is no outcome code.
        ({**event, "outcome": "LeaderAppend"}, "event line: outcome 'LeaderAppend' does not"),
        ({**event, "action": "LeaderAppend\n"}, "event line: action 'LeaderAppend\\n' does not"),
        ({**event, "outcome": "x" * 5000},
         f"event line: outcome {'x' * 80!r}... (5,000 chars) does not match"),
        ({**event, "time_ms": 1.5}, "event line: Expected `int`, got `float` - at `$.time_ms`"),
        ({**event, "args": {"partition": 0, "colour": 1}},
         "event line: Object contains unknown field `colour` - at `$.args`"),
        ({k: v for k, v in event.items() if k != "kind"}, "no `kind` field"),
        ({**event, "kind": "gossip"}, "unknown line kind 'gossip'"),
        ([event], "not a JSON object"),
    ]
    for body, message in cases:
        with pytest.raises(T.LineError) as info:
            T.check(body)
        assert str(info.value).startswith(message) and "\n" not in str(info.value)


# The Spark schema ------------------------------------------------------------------------------


class _ExtraEvent(T.EventLine, tag="event"):
    """An event struct with one field more, as if the format grew one."""

    colour: int | None = None


def test_the_spark_schema_is_generated_from_the_structs():
    pytest.importorskip("pyspark")
    from pyspark.sql.types import LongType, StringType

    from pyspark_harness import schemas as S

    for kind, cls in T.LINES.items():
        fields = {f.name: f.dataType for f in S.spark_struct(cls).fields}
        assert list(fields) == ["kind"] + [f.encode_name for f in
                                           msgspec.inspect.type_info(cls).fields], kind
        assert all(S.LINE[name].dataType == kind_type for name, kind_type in fields.items())
    assert S.REQUIRED["event"] == ("node", "seq", "time_ms", "action", "args", "outcome", "send")
    assert S.EVENT["outcome_args"].dataType == StringType()  # free-form: raw JSON text
    # A field added to a struct reaches Spark with its type; one Spark cannot hold is an error.
    grown = S.spark_struct(_ExtraEvent)
    assert grown["colour"].dataType == LongType() and "colour" not in S.EVENT.fieldNames()

    class Bad(msgspec.Struct):
        ratio: float

    with pytest.raises(TypeError, match="no Spark type for the trace field type"):
        S.spark_struct(Bad)


# The field tables of docs/traces.md -------------------------------------------------------------


def _type_text(t: msgspec.inspect.Type) -> str:
    i = msgspec.inspect
    if isinstance(t, i.UnionType):
        members = [m for m in t.types if not isinstance(m, i.NoneType)]
        return " or ".join(_type_text(m) for m in members) + " or null"
    if isinstance(t, i.IntType):
        return "integer"
    if isinstance(t, i.BoolType):
        return "boolean"
    if isinstance(t, i.StrType):
        return f"string `{t.pattern}`" if t.pattern else "string"
    if isinstance(t, i.LiteralType):
        return ", ".join(f"`{v}`" for v in t.values)
    if isinstance(t, i.ListType):
        return f"[{_type_text(t.item_type)}]"
    if isinstance(t, i.StructType):
        return f"`{t.cls.__name__}`"
    if isinstance(t, i.DictType):
        return "object"
    raise TypeError(f"no documented spelling for {t!r}")


def struct_rows(cls: type) -> list[tuple[str, str, str]]:
    """(field, type, required) of a struct, as docs/traces.md spells them."""
    info = msgspec.inspect.type_info(cls)
    rows = [(f"`{info.tag_field}`", f"`{info.tag}`", "yes")] if info.tag_field else []
    # An event's strings that `check_struct` matches against a pattern (not msgspec's type).
    patterns = T.EVENT_PATTERNS if issubclass(cls, T.EventLine) else {}
    return rows + [(f"`{f.encode_name}`", f"string `{patterns[f.name]}`" if f.name in patterns
                    else _type_text(f.type), "yes" if f.required else "no")
                   for f in info.fields]


def doc_rows(text: str, name: str) -> list[tuple[str, str, str]]:
    """The first three columns of the table under the heading "### `name`"."""
    section = re.search(rf"^### `{name}`\n(.*?)(?=^#|\Z)", text, re.S | re.M)
    assert section, f"docs/traces.md has no section for {name}"
    rows = []
    for line in section.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if line.startswith("| `"):
            rows.append(tuple(cells[:3]))
    return rows


def test_the_field_tables_of_docs_traces_md_match_the_structs():
    text = DOC.read_text(encoding="utf-8")
    assert f"(`{T.FORMAT}`)" in text.splitlines()[0]
    for cls in STRUCTS:
        assert doc_rows(text, cls.__name__) == struct_rows(cls), cls.__name__
    # Every struct of the module is documented.
    defined = {name for name, value in vars(T).items()
               if isinstance(value, type) and issubclass(value, msgspec.Struct)}
    assert defined == {cls.__name__ for cls in STRUCTS}
    # A field added to a struct and not to the doc is caught.
    grown = struct_rows(_ExtraEvent)
    assert grown != doc_rows(text, "EventLine")
    assert set(grown) - set(doc_rows(text, "EventLine")) == {("`colour`", "integer or null", "no")}


def _merge_holding(streams, window):
    order = T.causal_merge(streams, lambda e: e[1], lambda e: e[2], lambda e: e[0],
                           lambda e: window if e[3].endswith("crashes") else None)
    return [e[3] for e in order]


def test_a_crash_waits_for_the_receives_of_what_its_node_sent_before_it():
    # b2 answered b0 (m1) and was killed at 10; b0 read the answer at 40, from its socket.
    streams = {
        "b2": [(5, ["b2:m1"], None, "b2 answers"), (10, [], None, "b2 crashes")],
        "b0": [(30, [], None, "b0 appends"), (40, [], "b2:m1", "b0 reads the answer")],
    }
    assert _merge(streams) == ["b2 answers", "b2 crashes", "b0 appends", "b0 reads the answer"]
    assert _merge_holding(streams, 100) == [
        "b2 answers", "b0 appends", "b0 reads the answer", "b2 crashes"]
    # Outside the window the crash is not held.
    assert _merge_holding(streams, 20) == _merge(streams)


def test_a_held_crash_goes_first_when_the_receive_needs_it():
    # b0 reads b2's answer only after a message the controller sent once b2 was gone: the
    # receive is stuck behind a line of another node after the crash, which never overtakes
    # the crash, so the crash goes first (and the merge does not deadlock).
    streams = {
        "b2": [(5, ["b2:m1"], None, "b2 answers"), (10, [], None, "b2 crashes")],
        "meta": [(12, ["meta:m1"], None, "meta: b2 is gone")],
        "b0": [(20, [], "meta:m1", "b0 learns"), (40, [], "b2:m1", "b0 reads the answer")],
    }
    assert _merge_holding(streams, 100) == [
        "b2 answers", "b2 crashes", "meta: b2 is gone", "b0 learns", "b0 reads the answer"]


def test_a_held_crash_waits_for_each_awaited_receive_within_its_window():
    # b2 sent two answers before it was killed; b0 reads m1 (and later logs it dropped too,
    # a second receive of one id), b1 reads m2.
    streams = {
        "b2": [(5, ["b2:m1", "b2:m2"], None, "b2 answers"), (10, [], None, "b2 crashes")],
        "b0": [(20, [], "b2:m1", "b0 reads m1"), (21, [], "b2:m1", "b0 logs m1 dropped"),
               (50, [], None, "b0 appends")],
        "b1": [(30, [], "b2:m2", "b1 reads m2"), (60, [], None, "b1 appends")],
    }
    # Both receives within the window: the crash goes once both are read.
    assert _merge_holding(streams, 100) == [
        "b2 answers", "b0 reads m1", "b1 reads m2", "b2 crashes", "b0 logs m1 dropped",
        "b0 appends", "b1 appends"]
    # m2 is read after the window: the crash waits for m1's first receive only.
    assert _merge_holding(streams, 15) == [
        "b2 answers", "b0 reads m1", "b2 crashes", "b0 logs m1 dropped", "b1 reads m2",
        "b0 appends", "b1 appends"]
    # A window of 0 holds the crash for nothing keyed after it.
    assert _merge_holding(streams, 0) == _merge(streams)
