"""Cross-call protocols: transaction, reference resolution, schema discovery."""

from __future__ import annotations

import pytest

from tests.support.catalogs import mini_catalog
from toolbias import Call, FlagKind, NativeAction, VariantError, VariantSpec, build_codec
from toolbias.operators import OPERATORS
from toolbias.variants.codec import Codec, Decoded, Outcome

PROTOCOLS = ("transaction", "reference", "discovery")


def codec(*steps: dict, catalog=None) -> Codec:
    return build_codec(catalog or mini_catalog(), VariantSpec("t", tuple(steps)))


def run(c: Codec, domain: str, calls: list[Call]) -> tuple[list[Decoded], list]:
    s = c.session(domain)
    return [s.decode(x) for x in calls], s.finish()


def flags(decoded: list[Decoded]) -> list[FlagKind]:
    return [f.kind for d in decoded for f in d.flags]


LIGHT = NativeAction("home", "set_light", {"room": "office", "state": "on"})
FAN = NativeAction("home", "set_fan", {"room": "kitchen", "speed": "high"})


# -- common ----------------------------------------------------------------------------

@pytest.mark.parametrize("op", PROTOCOLS)
def test_protocol_layers_are_registered_and_marked(op: str) -> None:
    cls = OPERATORS[op]
    assert getattr(cls, "protocol", False) is True
    assert cls.instruction and len(cls.instruction) > 40


@pytest.mark.parametrize("op", PROTOCOLS)
def test_round_trip_every_task(op: str) -> None:
    cat = mini_catalog()
    c = codec({"op": op}, catalog=cat)
    for task in cat.tasks:
        calls = c.encode(task.gold)
        assert len(calls) > len(task.gold)  # protocol calls are part of the encoding
        decoded, fin = run(c, task.domain, calls)
        assert [a for d in decoded for a in d.actions] == list(task.gold)
        assert all(d.outcome is not Outcome.REJECTION for d in decoded)
        assert fin == []


@pytest.mark.parametrize("op", PROTOCOLS)
def test_protocol_refuses_later_steps(op: str) -> None:
    with pytest.raises(VariantError, match="cross-call protocol"):
        codec({"op": op}, {"op": "strip"})


@pytest.mark.parametrize("op", PROTOCOLS)
def test_unknown_params_are_refused(op: str) -> None:
    with pytest.raises(VariantError, match="unknown parameter"):
        codec({"op": op, "colour": "blue"})


@pytest.mark.parametrize("op", PROTOCOLS)
def test_protocols_compose_over_other_operators(op: str) -> None:
    """A protocol on top of whatever single-call operators are installed (merge when present)."""
    cat = mini_catalog()
    below = [{"op": "strip"}]
    if "merge" in OPERATORS:
        below.append({"op": "merge"})
    if "rename" in OPERATORS:
        below.append({"op": "rename"})
    for step in below:
        c = build_codec(cat, VariantSpec("t", (step, {"op": op})))
        for task in cat.tasks:
            decoded, fin = run(c, task.domain, c.encode(task.gold))
            assert [a for d in decoded for a in d.actions] == list(task.gold), (step, task.id)
            assert fin == []


# -- transaction -------------------------------------------------------------------------

def test_transaction_schema_and_encoding() -> None:
    c = codec({"op": "transaction"})
    names = [t["function"]["name"] for t in c.schema("home")]
    assert names[:2] == ["begin", "commit"]
    assert "write_set_light" in names and "set_light" not in names
    write = next(t for t in c.tools_for("home") if t.name == "write_set_light")
    assert write.parameters["required"] == ["handle"]
    assert write.properties["room"]["enum"] == ["kitchen", "office", "bedroom"]
    calls = c.encode([LIGHT, FAN])
    assert calls[0] == Call("begin", {"tool": "set_light"})
    assert calls[1] == Call("write_set_light", {"handle": "txn_1", "room": "office"})
    assert calls[3] == Call("commit", {"handle": "txn_1"})
    assert calls[4] == Call("begin", {"tool": "set_fan"})
    assert {"handle": "txn_2"}.items() <= dict(calls[-1].arguments).items()


def test_transaction_single_write_mode() -> None:
    c = codec({"op": "transaction", "writes": "single"})
    assert c.encode([LIGHT]) == [Call("begin", {"tool": "set_light"}),
                                 Call("write_set_light", {"handle": "txn_1", "room": "office", "state": "on"}),
                                 Call("commit", {"handle": "txn_1"})]


def test_transaction_replies_and_handles_are_deterministic() -> None:
    c = codec({"op": "transaction"})
    decoded, _ = run(c, "home", [Call("begin", {"tool": "set_fan"}), Call("begin", {"tool": "set_light"})])
    assert [d.reply["handle"] for d in decoded] == ["txn_1", "txn_2"]  # type: ignore[index]
    assert decoded[0].outcome is Outcome.REPLY and decoded[0].reply["required"] == ["room", "speed"]  # type: ignore[index]


def test_flag_unknown_handle_on_write_and_commit() -> None:
    c = codec({"op": "transaction"})
    decoded, _ = run(c, "home", [Call("write_set_light", {"handle": "txn_7", "room": "office"}),
                                 Call("commit", {"handle": "nope"})])
    assert [d.outcome for d in decoded] == [Outcome.REJECTION, Outcome.REJECTION]
    assert flags(decoded) == [FlagKind.UNKNOWN_HANDLE, FlagKind.UNKNOWN_HANDLE]
    assert "begin" in decoded[0].message
    assert not any(d.actions for d in decoded)


def test_flag_write_after_commit_and_double_commit() -> None:
    c = codec({"op": "transaction"})
    calls = c.encode([LIGHT])
    decoded, fin = run(c, "home", calls + [Call("write_set_light", {"handle": "txn_1", "state": "off"}),
                                           Call("commit", {"handle": "txn_1"})])
    assert [a for d in decoded for a in d.actions] == [LIGHT]  # executed once
    assert flags(decoded) == [FlagKind.WRITE_AFTER_COMMIT, FlagKind.DOUBLE_COMMIT]
    assert decoded[-1].outcome is Outcome.REJECTION and not decoded[-1].actions
    assert fin == []


def test_flag_commit_missing_writes_keeps_handle_open() -> None:
    c = codec({"op": "transaction"})
    decoded, fin = run(c, "home", [
        Call("begin", {"tool": "set_light"}),
        Call("write_set_light", {"handle": "txn_1", "room": "office"}),
        Call("commit", {"handle": "txn_1"}),                      # state not written yet
        Call("write_set_light", {"handle": "txn_1", "state": "on"}),
        Call("commit", {"handle": "txn_1"}),
    ])
    assert flags(decoded) == [FlagKind.COMMIT_MISSING_WRITES]
    assert "state" in decoded[2].message
    assert decoded[3].reply == {"handle": "txn_1", "written": ["room", "state"], "missing_required": []}
    assert decoded[4].actions == (LIGHT,)
    assert fin == []


def test_flag_uncommitted_handle_at_finish() -> None:
    c = codec({"op": "transaction"})
    decoded, fin = run(c, "home", [Call("begin", {"tool": "set_light"}), Call("begin", {"tool": "set_fan"}),
                                   Call("write_set_fan", {"handle": "txn_2", "room": "office", "speed": "low"}),
                                   Call("commit", {"handle": "txn_2"})])
    assert [f.kind for f in fin] == [FlagKind.UNCOMMITTED_HANDLE]
    assert "txn_1" in fin[0].detail
    assert decoded[-1].actions == (NativeAction("home", "set_fan", {"room": "office", "speed": "low"}),)


def test_transaction_write_to_another_tools_handle_is_rejected() -> None:
    c = codec({"op": "transaction"})
    decoded, _ = run(c, "home", [Call("begin", {"tool": "set_light"}),
                                 Call("write_set_fan", {"handle": "txn_1", "speed": "low"})])
    assert decoded[1].outcome is Outcome.REJECTION and "write_set_light" in decoded[1].message


def test_transaction_invalid_write_value_is_rejected_by_schema() -> None:
    c = codec({"op": "transaction"})
    decoded, _ = run(c, "home", [Call("begin", {"tool": "set_brightness"}),
                                 Call("write_set_brightness", {"handle": "txn_1", "level": 101})])
    assert decoded[1].outcome is Outcome.REJECTION and decoded[1].rejection_kind.value == "invalid_arguments"


def test_transaction_selected_tools_and_handle_name_collision() -> None:
    c = codec({"op": "transaction", "tools": ["set_fan"]})
    names = [t.name for t in c.tools_for("home")]
    assert "set_light" in names and "write_set_fan" in names
    assert c.encode([LIGHT]) == [Call("set_light", dict(LIGHT.arguments))]
    with pytest.raises(VariantError, match="unknown tool"):
        codec({"op": "transaction", "tools": ["no_such_tool"]})


def test_transaction_lenient_accepts_native_call() -> None:
    c = codec({"op": "transaction"})
    d = c.session("home", "lenient").decode(Call("set_light", {"room": "office", "state": "on"}))
    assert d.outcome is Outcome.NATIVE and d.actions == (LIGHT,) and d.lenient
    assert c.session("home").decode(Call("set_light", {"room": "office", "state": "on"})).outcome is Outcome.REJECTION


# -- reference resolution ----------------------------------------------------------------

def test_reference_schema_and_encoding() -> None:
    c = codec({"op": "reference"})
    names = [t.name for t in c.tools_for("home")]
    assert "resolve_room" in names and "resolve_message" in names  # target arg; free-string fallback
    light = next(t for t in c.tools_for("home") if t.name == "set_light")
    assert light.properties["room"]["type"] == "string" and "enum" not in light.properties["room"]
    calls = c.encode([LIGHT, NativeAction("home", "set_fan", {"room": "office", "speed": "low"})])
    assert calls[0] == Call("resolve_room", {"value": "office"})
    ref = calls[1].arguments["room"]
    assert ref.startswith("ref_") and len(ref) == 12
    assert calls[2].arguments["room"] == ref  # resolved once, reused
    assert len(calls) == 3


def test_reference_ids_are_deterministic_and_reply() -> None:
    c = codec({"op": "reference"})
    d1, _ = run(c, "home", [Call("resolve_room", {"value": "office"})])
    d2, _ = run(c, "home", [Call("resolve_room", {"value": "office"})])
    assert d1[0].reply == d2[0].reply
    assert d1[0].reply["value"] == "office" and d1[0].reply["reference"].startswith("ref_")  # type: ignore[index]


def test_flag_bad_reference_unknown_and_raw_value() -> None:
    c = codec({"op": "reference"})
    decoded, _ = run(c, "home", [Call("set_light", {"room": "ref_00000000", "state": "on"}),
                                 Call("set_light", {"room": "office", "state": "on"})])
    assert all(d.outcome is Outcome.REJECTION and not d.actions for d in decoded)
    assert flags(decoded) == [FlagKind.BAD_REFERENCE, FlagKind.BAD_REFERENCE]
    assert "resolve_room" in decoded[1].message


def test_flag_bad_reference_from_another_argument() -> None:
    c = codec({"op": "reference", "params": {"announce": "message"}})
    decoded, _ = run(c, "home", [Call("resolve_message", {"value": "hello"})])
    msg_ref = decoded[0].reply["reference"]  # type: ignore[index]
    decoded, _ = run(c, "home", [Call("resolve_message", {"value": "office"}),
                                 Call("set_light", {"room": msg_ref, "state": "on"})])
    assert decoded[1].outcome is Outcome.REJECTION
    assert flags(decoded) == [FlagKind.BAD_REFERENCE]


def test_reference_resolution_does_not_leak_across_sessions() -> None:
    c = codec({"op": "reference"})
    calls = c.encode([LIGHT])
    decoded, _ = run(c, "home", calls[1:])  # the id without its resolver call
    assert flags(decoded) == [FlagKind.BAD_REFERENCE]


def test_reference_explicit_params_and_errors() -> None:
    c = codec({"op": "reference", "params": {"set_light": "state"}, "select": "none"})
    assert [t.uid for t in c.tools if t.name.startswith("resolve_")] == ["home::resolve_state", "car::resolve_state"]
    c = codec({"op": "reference", "params": {"home::set_light": "state"}, "select": "none"})
    assert [t.uid for t in c.tools if t.name.startswith("resolve_")] == ["home::resolve_state"]
    with pytest.raises(VariantError, match="no argument"):
        codec({"op": "reference", "params": {"set_light": "colour"}})
    with pytest.raises(VariantError, match="select"):
        codec({"op": "reference", "select": "sometimes"})


def test_reference_united_enum_rejects_value_the_tool_refuses() -> None:
    """Two tools reference 'state' with different enums: one resolver (united), and a value only
    the other tool accepts is a bad reference for this one."""
    from toolbias.catalog.model import Catalog, Domain, Tool

    def tool(name: str, values: list[str]) -> Tool:
        return Tool(name, name, {"type": "object", "properties": {"state": {"type": "string", "enum": values}},
                                 "required": ["state"]}, domain="d", cls="x")

    cat = Catalog("u", (Domain("d", (tool("a", ["on", "off"]), tool("b", ["open", "closed"]))),))
    c = build_codec(cat, VariantSpec("t", ({"op": "reference"},)))
    resolvers = [t for t in c.tools if t.name.startswith("resolve_")]
    assert [t.name for t in resolvers] == ["resolve_state"]
    assert resolvers[0].properties["value"]["enum"] == ["on", "off", "open", "closed"]
    decoded, _ = run(c, "d", [Call("resolve_state", {"value": "open"})])
    ref = decoded[0].reply["reference"]  # type: ignore[index]
    decoded, _ = run(c, "d", [Call("resolve_state", {"value": "open"}), Call("a", {"state": ref}),
                              Call("b", {"state": ref})])
    assert decoded[1].outcome is Outcome.REJECTION and flags(decoded) == [FlagKind.BAD_REFERENCE]
    assert decoded[2].actions == (NativeAction("d", "b", {"state": "open"}),)


# -- schema discovery --------------------------------------------------------------------

def test_discovery_schema_hides_arguments() -> None:
    c = codec({"op": "discovery"})
    tools = {t["function"]["name"]: t["function"] for t in c.schema("home")}
    assert "get_tool_schema" in tools
    assert tools["set_light"]["parameters"]["properties"] == {}
    assert tools["set_light"]["description"] == "set_light tool"
    assert tools["get_tool_schema"]["parameters"]["properties"]["name"]["enum"] == [
        "set_light", "set_brightness", "set_fan", "announce"]


def test_flag_undiscovered_tool_then_discovery() -> None:
    c = codec({"op": "discovery"})
    decoded, fin = run(c, "home", [Call("set_light", {"room": "office", "state": "on"}),
                                   Call("get_tool_schema", {"name": "set_light"}),
                                   Call("set_light", {"room": "office", "state": "on"})])
    assert decoded[0].outcome is Outcome.REJECTION and not decoded[0].actions
    assert flags(decoded) == [FlagKind.UNDISCOVERED_TOOL]
    assert "get_tool_schema(name='set_light')" in decoded[0].message
    assert decoded[1].reply["parameters"]["properties"]["room"]["enum"] == ["kitchen", "office", "bedroom"]  # type: ignore[index]
    assert decoded[2].actions == (LIGHT,)
    assert fin == []


def test_discovery_checks_real_schema_after_discovery() -> None:
    c = codec({"op": "discovery"})
    decoded, _ = run(c, "home", [Call("get_tool_schema", {"name": "set_light"}),
                                 Call("set_light", {"room": "garage", "state": "on"}),
                                 Call("set_light", {"room": "office", "state": "on", "colour": "red"})])
    assert [d.outcome for d in decoded[1:]] == [Outcome.REJECTION, Outcome.REJECTION]
    assert not any(d.actions for d in decoded)


def test_discovery_encoding_queries_each_tool_once() -> None:
    c = codec({"op": "discovery"})
    calls = c.encode([LIGHT, LIGHT, FAN])
    assert [x.name for x in calls] == ["get_tool_schema", "set_light", "set_light", "get_tool_schema", "set_fan"]


def test_discovery_per_domain_and_selected_tools() -> None:
    c = codec({"op": "discovery", "tools": ["set_seat_heat"]})
    assert [t.name for t in c.tools_for("home")] == ["set_light", "set_brightness", "set_fan", "announce"]
    car = {t.name: t for t in c.tools_for("car")}
    assert car["get_tool_schema"].properties["name"]["enum"] == ["set_seat_heat"]
    assert car["set_light"].properties  # not hidden


def test_reference_over_flat_dispatcher_references_operation_arguments() -> None:
    if "merge" not in OPERATORS:
        pytest.skip("the merge operator is not installed")
    cat = mini_catalog()
    c = build_codec(cat, VariantSpec("t", ({"op": "merge"}, {"op": "reference"})))
    ref = c.layers[-1]
    keys = [k for ks in ref.referenced.values() for k in ks]  # type: ignore[attr-defined]
    assert keys and all("::" in k for k in keys) and "operation" not in keys
    calls = c.encode([LIGHT])
    assert calls[0].name.startswith("resolve_") and calls[1].arguments["operation"] == "set_light"
    decoded, fin = run(c, "home", calls)
    assert [a for d in decoded for a in d.actions] == [LIGHT] and fin == []
    raw = dict(calls[1].arguments)
    raw[next(k for k in raw if k != "operation" and str(raw[k]).startswith("ref_"))] = "office"
    decoded, _ = run(c, "home", [Call(calls[1].name, raw)])
    assert flags(decoded) == [FlagKind.BAD_REFERENCE]
