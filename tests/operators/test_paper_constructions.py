"""The paper's constructions of the cross-call protocols and of class dispatch (issue 13):
per-function transactions, per-function references, catalog-wide schema discovery, the
composed recipe, and lenient control of protocol misuse."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.catalogs import mini_catalog
from tests.support.paths import shared_path
from toolbias import Call, Outcome, RejectionKind, VariantError, build_codec
from toolbias.catalog import load_catalog
from toolbias.catalog.model import Catalog, NativeAction
from toolbias.operators.base import FlagKind
from toolbias.variants import VariantSpec, get_variant
from toolbias.variants.codec import Codec

CAT = mini_catalog()


def codec_of(*steps: dict[str, Any], cat: Catalog = CAT) -> Codec:
    return build_codec(cat, VariantSpec("t", tuple(steps)))


def play(codec: Codec, domain: str, calls: list[Call], control: str = "strict") -> list[Any]:
    s = codec.session(domain, control)
    return [s.decode(c) for c in calls] + [s.finish()]


def oracle_ok(codec: Codec, cat: Catalog) -> None:
    for task in cat.tasks:
        s = codec.session(task.domain)
        done: list[NativeAction] = []
        for call in codec.encode(task.gold):
            d = s.decode(call)
            assert d.outcome is not Outcome.REJECTION, (task.id, call, d.message)
            done.extend(d.actions)
        assert done == list(task.gold) and not s.finish(), task.id


# -- transaction: begin_<f> / set_<f>__<arg> / commit_<f> -------------------------------------

def test_per_function_transaction_shape_and_round_trip() -> None:
    codec = codec_of({"op": "transaction", "method": "per_function"})
    names = [t.name for t in codec.tools_for("home")]
    assert names[:4] == ["begin_set_light", "set_set_light__room", "set_set_light__state", "commit_set_light"]
    begin = next(t for t in codec.tools if t.name == "begin_set_light")
    assert begin.parameters["properties"] == {}
    setter = next(t for t in codec.tools if t.name == "set_set_light__room")
    assert setter.required == ("txn_id", "room") and setter.properties["room"]["enum"][0] == "kitchen"
    # every native function has two arguments here: 2 + args per function
    assert codec.function_count() == sum(2 + len(t.properties) for t in CAT.tools)
    oracle_ok(codec, CAT)


def test_per_function_transaction_protocol_errors() -> None:
    codec = codec_of({"op": "transaction", "method": "per_function"})
    out = play(codec, "home", [
        Call("set_set_light__room", {"txn_id": "txn_9", "room": "office"}),    # never opened
        Call("begin_set_light", {}),                                           # -> txn_1
        Call("set_set_fan__room", {"txn_id": "txn_1", "room": "office"}),      # another function's txn
        Call("set_set_light__room", {"txn_id": "txn_1", "room": "office"}),
        Call("commit_set_light", {"txn_id": "txn_1"}),                         # state missing
        Call("set_set_light__state", {"txn_id": "txn_1", "state": "on"}),
        Call("commit_set_light", {"txn_id": "txn_1"}),
        Call("commit_set_light", {"txn_id": "txn_1"}),                         # twice
        Call("begin_set_fan", {}),                                             # never committed
    ])
    *decoded, flags = out
    assert decoded[0].outcome is Outcome.REJECTION and decoded[0].flags[0].kind is FlagKind.UNKNOWN_HANDLE
    assert decoded[1].reply is not None and decoded[1].reply["txn_id"] == "txn_1"
    assert decoded[2].outcome is Outcome.REJECTION and "opened for 'set_light'" in decoded[2].message
    assert decoded[4].flags[0].kind is FlagKind.COMMIT_MISSING_WRITES and "state" in decoded[4].message
    assert decoded[6].actions == (NativeAction("home", "set_light", {"room": "office", "state": "on"}),)
    assert decoded[7].flags[0].kind is FlagKind.DOUBLE_COMMIT
    assert [f.kind for f in flags] == [FlagKind.UNCOMMITTED_HANDLE]


def test_per_function_transaction_keeps_short_functions_and_refuses_mixed_params() -> None:
    codec = codec_of({"op": "transaction", "method": "per_function", "min_args": 3})
    assert [t.name for t in codec.tools] == [t.name for t in CAT.tools]  # nothing has 3 arguments
    with pytest.raises(VariantError, match="'writes' applies to method 'shared' only"):
        codec_of({"op": "transaction", "method": "per_function", "writes": "single"})
    with pytest.raises(VariantError, match="unknown transaction method .curry."):
        codec_of({"op": "transaction", "method": "curry"})


# -- reference: resolve_<f>__<arg>(query) for free-text arguments --------------------------------

def test_per_function_reference_free_text_only() -> None:
    codec = codec_of({"op": "reference", "method": "per_function"})
    assert [t.name for t in codec.tools_for("car")] == [t.name for t in CAT.domain("car").tools]  # no free text
    home = [t.name for t in codec.tools_for("home")]
    assert home[0] == "resolve_announce__message" and len(home) == len(CAT.domain("home").tools) + 1
    calls = codec.encode([NativeAction("home", "announce", {"message": "dinner", "loud": True})])
    assert calls[0] == Call("resolve_announce__message", {"query": "dinner"})
    out = play(codec, "home", calls)
    assert out[0].reply is not None and out[0].reply["handle"] == calls[1].arguments["message"]
    assert out[1].actions == (NativeAction("home", "announce", {"message": "dinner", "loud": True}),)


def test_lenient_executes_a_raw_value_where_a_handle_is_expected() -> None:
    codec = codec_of({"op": "reference", "method": "per_function"})
    raw = Call("announce", {"message": "dinner", "loud": False})
    strict, _ = play(codec, "home", [raw])
    assert strict.rejection_kind is RejectionKind.PROTOCOL
    lenient, _ = play(codec, "home", [raw], "lenient")
    assert lenient.actions == (NativeAction("home", "announce", {"message": "dinner", "loud": False}),)
    assert lenient.lenient and "reference" in lenient.lenient
    # the shared design's enum references too: a raw enum value is unambiguous
    shared = codec_of({"op": "reference", "select": "enum"})
    d, _ = play(shared, "home", [Call("set_fan", {"room": "office", "speed": "high"})], "lenient")
    assert d.actions == (NativeAction("home", "set_fan", {"room": "office", "speed": "high"}),)
    d, _ = play(shared, "home", [Call("set_fan", {"room": "garage", "speed": "high"})], "lenient")
    assert d.outcome is Outcome.REJECTION  # not a value the argument accepts


# -- schema discovery: list_methods(class) / invoke(class, method, arguments) ------------------------

def test_catalog_discovery_two_tools_and_protocol() -> None:
    codec = codec_of({"op": "discovery", "method": "catalog"})
    assert [t.name for t in codec.tools] == ["list_methods", "invoke"] == [t.name for t in codec.tools_for("car")]
    lister = codec.tools[0]
    assert lister.properties["class"]["enum"] == ["home", "car"]
    invoke = Call("invoke", {"class": "home", "method": "set_light", "arguments": {"room": "office", "state": "on"}})
    first, listed, again, bad_args, wrong_domain, _ = play(codec, "home", [
        invoke, Call("list_methods", {"class": "home"}), invoke,
        Call("invoke", {"class": "home", "method": "set_light", "arguments": {"room": "garage", "state": "on"}}),
        Call("invoke", {"class": "car", "method": "set_light", "arguments": {"zone": "rear", "state": "on"}}),
    ])
    assert first.flags[0].kind is FlagKind.UNDISCOVERED_TOOL and "list_methods(class='home')" in first.message
    assert listed.reply is not None and [m["name"] for m in listed.reply["methods"]] == [
        t.name for t in CAT.domain("home").tools]
    assert listed.reply["methods"][0]["parameters"] == CAT.domain("home").tools[0].parameters
    assert again.actions == (NativeAction("home", "set_light", {"room": "office", "state": "on"}),)
    assert again.routes == ("home",)
    assert bad_args.rejection_kind is RejectionKind.INVALID_ARGUMENTS
    # car's class is listed in no episode here, and car acts on another domain: never a home action
    assert wrong_domain.outcome is Outcome.REJECTION
    oracle_ok(codec, CAT)


def test_lenient_executes_an_undiscovered_invoke() -> None:
    codec = codec_of({"op": "discovery", "method": "catalog"})
    call = Call("invoke", {"class": "car", "method": "set_fan", "arguments": {"room": "office", "speed": "low"}})
    strict, _ = play(codec, "home", [call])
    lenient, _ = play(codec, "home", [call], "lenient")  # wrong class, but set_fan is home's only set_fan
    assert strict.outcome is Outcome.REJECTION
    assert lenient.actions == (NativeAction("home", "set_fan", {"room": "office", "speed": "low"}),)
    ambiguous = Call("invoke", {"class": "car", "method": "no_such", "arguments": {}})
    assert play(codec, "home", [ambiguous], "lenient")[0].outcome is Outcome.REJECTION


# -- class dispatch and the recipe -----------------------------------------------------------------

def test_class_dispatch_is_one_dispatcher_per_domain_class() -> None:
    codec = build_codec(CAT, get_variant("class_dispatch"))
    assert sorted(t.name for t in codec.tools) == ["car", "home"]
    assert len(codec.tools_for("home")) == 2  # both classes' dispatchers in every episode
    by_object = build_codec(CAT, get_variant("class_dispatch_by_object"))
    assert by_object.function_count() == len({t.cls for t in CAT.tools})


def test_composed_recipe_on_a_small_catalog() -> None:
    codec = build_codec(CAT, get_variant("composed"))
    names = [t.name for t in codec.tools_for("home")]
    assert "resolve_announce__message" not in names  # announce is the 4th tool: merged
    assert any(n.startswith("set_light") and n != "set_light" for n in names)  # 1st tool: enum split
    oracle_ok(codec, CAT)
    with pytest.raises(VariantError, match="unknown recipe 'nope'"):
        codec_of({"op": "recipe", "name": "nope"})
    with pytest.raises(VariantError, match="must be the first step"):
        codec_of({"op": "strip"}, {"op": "recipe", "name": "composed"})


def test_composed_recipe_is_the_artifacts_mixed_spec() -> None:
    from toolbias.variants.recipes import composed_ops

    root = shared_path("toolschemaspace")
    cat = load_catalog(f"toolschemaspace:{root}")
    mixed = json.loads((root / "specs" / "mixed.json").read_text())["ops"]

    def key(op: dict[str, Any]) -> str:
        return json.dumps({k: v for k, v in op.items() if k != "values"}, sort_keys=True)

    assert sorted(map(key, composed_ops(cat)["ops"])) == sorted(map(key, mixed))


def test_lenient_executes_a_tool_invoked_before_its_schema_was_asked() -> None:
    codec = codec_of({"op": "discovery"})  # toolbias's per-tool design
    call = Call("set_fan", {"room": "office", "speed": "low"})
    strict, _ = play(codec, "home", [call])
    lenient, _ = play(codec, "home", [call], "lenient")
    assert strict.flags[0].kind is FlagKind.UNDISCOVERED_TOOL
    assert lenient.actions == (NativeAction("home", "set_fan", {"room": "office", "speed": "low"}),)
    bad = Call("set_fan", {"room": "office", "speed": "warp"})  # still checked against the real schema
    assert play(codec, "home", [bad], "lenient")[0].outcome is Outcome.REJECTION


def test_every_protocol_operator_documents_what_lenient_executes() -> None:
    from toolbias.operators import OPERATORS

    for op in ("transaction", "reference", "discovery"):
        text = OPERATORS[op].LENIENT
        assert text and text != OPERATORS["strip"].LENIENT, op
