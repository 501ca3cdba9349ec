"""Per-tool representation operators: nest / flatten, rename (namespaced, opaque), reorder."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.operators import E, decode1, spec, tool, toolschemaspace_catalog
from tests.support.paths import SHARED_DATA, needs_shared
from toolbias import (
    Call,
    Catalog,
    Codec,
    Domain,
    NativeAction,
    RejectionKind,
    VariantError,
    VariantSpec,
    build_codec,
    get_variant,
    load_catalog,
    validate_action,
    validate_catalog,
)
from toolbias.base.names import TOOL_NAME_RE
from toolbias.catalog.validation import value_error
from toolbias.variants.codec import Outcome

SHARED = SHARED_DATA
TSS = SHARED / "toolschemaspace"
BFCL = SHARED / "bfcl"
needs_tss = needs_shared("toolschemaspace", "tools.json")
NAME = TOOL_NAME_RE

MINE = ["nested_args", "namespaced_names", "reorder_arguments", "opaque_names", "opaque_names_and_params",
        "namespaced_names_by_object", "flat_args"]
PAPER = {"nested_args": "nested args", "namespaced_names": "namespaced names",
         "reorder_arguments": "reorder arguments", "opaque_names": "rename · opaque"}
NAMESPACE_INSTRUCTION = ("Tool names are prefixed with their class name. Call each tool by its full prefixed name, "
                         "using the class you intend to act on.")
NEST_INSTRUCTION = ("Some arguments are grouped into nested objects. Put each argument inside the object that the "
                    "tool's parameter schema defines for it.")


# -- helpers -------------------------------------------------------------------------------------

def values_for(schema: Mapping[str, Any]) -> list[Any]:
    """Valid values covering every enum value, numeric bounds, and objects with and without optional members."""
    if "enum" in schema:
        vals = list(schema["enum"])
    elif schema.get("type") == "boolean":
        vals = [True, False]
    elif schema.get("type") in ("integer", "number"):
        vals = sorted({0, 1, 7} | {schema[k] for k in ("minimum", "maximum") if k in schema})
    elif schema.get("type") == "object" and isinstance(schema.get("properties"), Mapping):
        props, req = schema["properties"], set(schema.get("required") or [])
        full = {k: values_for(s)[0] for k, s in props.items()}
        vals = [full, {k: v for k, v in full.items() if k in req}]
        vals += [{**full, k: v} for k, s in props.items() for v in values_for(s)[1:3]]
    elif schema.get("type") == "object":
        vals = [{}, {"k": 1}]
    elif schema.get("type") == "array":
        vals = [[], ["x"]] if schema.get("items", {}).get("type") == "string" else [[]]
    else:
        vals = ["x", ""]
    return [v for v in vals if value_error(schema, v, "v") is None] or [None]


def actions_for(catalog: Catalog) -> list[NativeAction]:
    out: dict[str, NativeAction] = {}
    for t in catalog.tools:
        cand = {p: values_for(s) for p, s in t.properties.items()}
        base = {p: v[0] for p, v in cand.items()}
        acts = [base, {p: v for p, v in base.items() if p in t.required}]
        acts += [{**base, p: v} for p, vals in cand.items() for v in vals]
        acts += [{k: v for k, v in base.items() if k != p} for p in base]  # each optional argument left out
        n = 1
        for vals in cand.values():
            n *= len(vals)
        if cand and n <= 64:
            acts += [dict(zip(cand, combo, strict=True)) for combo in itertools.product(*cand.values())]
        for args in acts:
            a = NativeAction(t.domain, t.name, args)
            if validate_action(catalog, a) is None:
                out.setdefault(a.key(), a)
    return list(out.values())


def sample_args(schema: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for p, s in (schema.get("properties") or {}).items():
        out[p] = sample_args(s) if s.get("type") == "object" and isinstance(s.get("properties"), Mapping) \
            else values_for(s)[0]
    return out


def assert_roundtrip(catalog: Catalog, codec: Codec) -> int:
    """decode(encode(a)) == [a] for covering actions; every variant tool encodes back from its
    decoded action; names valid and unique per domain."""
    acts = actions_for(catalog)
    for a in acts:
        calls = codec.encode([a])
        session = codec.session(a.domain)
        got: list[NativeAction] = []
        for c in calls:
            d = session.decode(c)
            assert d.outcome is Outcome.NATIVE and d.lenient is None, (a, c, d.message)
            got.extend(d.actions)
        assert got == [a], (a, calls, got)
    for dom in catalog.domains:
        tools = codec.tools_for(dom.name)
        names = [t.name for t in tools]
        assert len(names) == len(set(names)) and all(NAME.match(n) for n in names)
        for t in tools:
            call = Call(t.name, sample_args(t.parameters))
            d = codec.session(dom.name).decode(call)
            if d.outcome is Outcome.REJECTION and d.rejection_kind is RejectionKind.INVALID_ACTION:
                continue  # a catalog-scope tool of another domain
            assert d.outcome is Outcome.NATIVE, (call, d.message)
            assert codec.encode(d.actions) == [call]
    return len(acts)










NUM = {"type": "number"}
OBJ_BUDGET = {"type": "object", "description": "Budget range.", "properties": {"min": NUM, "max": NUM}}
OBJ_FILTERS = {"type": "object", "properties": {"pets": {"type": "boolean"}, "garden": {"type": "boolean"}},
               "required": ["pets"]}
OBJ_META = {"type": "object", "properties": {"note": {"type": "string"}}}
OBJ_OPEN = {"type": "object", "properties": {"k": {"type": "string"}}, "additionalProperties": True}
OBJ_DEEP = {"type": "object", "properties": {"inner": {"type": "object", "properties": {"x": {"type": "integer"}},
                                                       "required": ["x"]}, "tag": {"type": "string"}},
            "required": ["inner"]}


def hand_catalog() -> Catalog:
    car = (
        tool("set_window", "car", {"position": E("front_left", "rear_left"), "state": E("open", "closed"),
                                   "speed": E("slow", "fast")}, cls="window"),
        tool("set_seat", "car", {"seat": E("driver", "passenger"), "level": {"type": "integer", "minimum": 0,
                                                                             "maximum": 5},
                                 "massage": {"type": "boolean"}}, cls="seat"),
        tool("honk", "car", {}, cls="horn"),
        tool("set_mode", "car", {"mode": E("eco", "sport")}, cls="mode"),
    )
    home = (tool("set_window", "home", {"room": E("kitchen", "bath"), "open": {"type": "boolean"}}, cls="window"),
            tool("set_light", "home", {"room": E("kitchen", "bath"), "level": {"type": "integer"},
                                       "p_0": {"type": "string"}}, required=["room"], cls=""))
    shop = (tool("find_properties", "shop", {"location": {"type": "string"}, "budget": OBJ_BUDGET,
                                             "filters": OBJ_FILTERS, "meta": OBJ_META, "extra": OBJ_OPEN,
                                             "deep": OBJ_DEEP, "budget__min": {"type": "integer"}},
                 required=["location", "budget", "deep"], cls="property"),)
    cat = Catalog("hand", (Domain("car", car), Domain("home", home), Domain("shop", shop)))
    validate_catalog(cat)
    return cat




# -- registry ------------------------------------------------------------------------------------

def test_registry_entries() -> None:
    for name, paper in PAPER.items():
        assert get_variant(name).paper == paper
    for name in ("nested_args", "namespaced_names", "reorder_arguments", "native", "strip_descriptions"):
        assert "representative" in get_variant(name).tags
    if (TSS / "registry.json").is_file():
        names = {e["name"] for e in json.loads((TSS / "registry.json").read_text())["variants"]}
        assert set(PAPER.values()) <= names


# -- round trips ---------------------------------------------------------------------------------

@needs_tss
@pytest.mark.parametrize("name", MINE)
def test_roundtrip_toolschemaspace(tss: Catalog, name: str) -> None:
    assert assert_roundtrip(tss, build_codec(tss, get_variant(name))) > 1000


@pytest.mark.parametrize("steps", [
    [{"op": "nest"}], [{"op": "nest", "keep": 0, "min_pack": 1}], [{"op": "flatten"}], [{"op": "nest"}, {"op": "flatten"}],
    [{"op": "flatten"}, {"op": "nest", "into": "args"}], [{"op": "rename"}], [{"op": "rename", "prefix": "domain"}],
    [{"op": "rename", "scope": "catalog"}], [{"op": "rename", "scope": "catalog", "prefix": "domain"}],
    [{"op": "rename", "method": "opaque"}], [{"op": "rename", "method": "opaque", "params": False, "seed": 3}],
    [{"op": "reorder", "seed": 1}], [{"op": "reorder", "seed": 2, "deep": True}],
    [{"op": "nest"}, {"op": "rename", "method": "opaque"}, {"op": "reorder"}],
    [{"op": "rename", "scope": "catalog"}, {"op": "split"}], [{"op": "split"}, {"op": "rename"}, {"op": "strip"}],
    [{"op": "flatten"}, {"op": "split", "method": "interval"}, {"op": "rename", "method": "opaque"}],
])
def test_roundtrip_hand_catalog(steps: list[dict[str, Any]]) -> None:
    cat = hand_catalog()
    assert assert_roundtrip(cat, build_codec(cat, spec(*steps))) > 50


@pytest.mark.skipif(not list(BFCL.glob("BFCL_v4_*.json")), reason=f"BFCL data not found at {BFCL}")
@pytest.mark.parametrize("steps", [[{"op": "flatten"}], [{"op": "nest"}], [{"op": "rename", "method": "opaque"}],
                                   [{"op": "flatten"}, {"op": "nest"}]])
def test_roundtrip_bfcl_nested_dicts(steps: list[dict[str, Any]]) -> None:
    try:
        full = load_catalog(f"bfcl:{BFCL}")
    except Exception as exc:  # the importer is another module's; say why if it cannot load
        pytest.skip(f"bfcl importer unavailable: {exc}")
    domains = tuple(Domain(d.name, tuple(t for t in d.tools if any(s.get("type") == "object"
                                                                   for s in t.properties.values())))
                    for d in full.domains)
    cat = Catalog("bfcl-objects", tuple(d for d in domains if d.tools))
    assert cat.tools
    codec = build_codec(cat, spec(*steps))
    assert_roundtrip(cat, codec)
    if steps == [{"op": "flatten"}]:
        flat = {t.name: t for t in codec.tools}
        assert any("__" in p for t in flat.values() for p in t.properties)


# -- nest ---------------------------------------------------------------------------------------

@needs_tss
def test_nested_args_matches_the_papers_pack_spec(tss: Catalog) -> None:
    ops = json.loads((TSS / "specs" / "pack.json").read_text())["ops"]
    paper = {f"{o['group']}::{o['tool']}": (o["into"], o["params"]) for o in ops}
    codec = build_codec(tss, get_variant("nested_args"))
    ours = {}
    for t, native in zip(codec.tools, tss.tools, strict=True):
        objects = [p for p, s in t.properties.items() if s.get("type") == "object" and p not in native.properties]
        if objects:
            ours[native.uid] = (objects[0], list(t.properties[objects[0]]["properties"]))
    assert ours == paper
    assert codec.instructions() == [NEST_INSTRUCTION]


def test_nest_schema_and_lenient_forms() -> None:
    cat = hand_catalog()
    codec = build_codec(cat, spec({"op": "nest"}))
    t = {x.name: x for x in codec.tools_for("car")}["set_window"]
    assert list(t.properties) == ["position", "options"] and t.required == ("position", "options")
    assert list(t.properties["options"]["properties"]) == ["state", "speed"]
    want = (NativeAction("car", "set_window", {"position": "rear_left", "state": "open", "speed": "fast"}),)
    flat = {"position": "rear_left", "state": "open", "speed": "fast"}
    d = decode1(codec, "car", "set_window", flat)
    assert d.rejection_kind is RejectionKind.INVALID_ARGUMENTS and "options" in d.message
    for args in (flat, {"position": "rear_left", "options": {"state": "open"}, "speed": "fast"},
                 {"options": {"position": "rear_left", "state": "open", "speed": "fast"}}):
        d = decode1(codec, "car", "set_window", args, "lenient")
        assert d.outcome is Outcome.NATIVE and d.actions == want and d.lenient, args
    for args in ({"position": "rear_left", "options": {"state": "open", "speed": "fast"}, "state": "closed"},
                 {"position": "rear_left", "options": {"state": "open", "speed": "fast", "colour": "red"}}):
        assert decode1(codec, "car", "set_window", args, "lenient").outcome is Outcome.REJECTION, args


def test_nest_by_mapping_and_errors() -> None:
    cat = hand_catalog()
    codec = build_codec(cat, spec({"op": "nest", "method": "groups", "groups": {
        "*": {"motion": ["state", "speed"]}, "car::set_seat": {"adjust": ["level", "massage"]}}}))
    tools = {(t.domain, t.name): t for t in codec.tools}
    assert list(tools["car", "set_window"].properties) == ["position", "motion"]
    assert list(tools["car", "set_seat"].properties) == ["seat", "adjust"]
    assert tools["home", "set_window"].parameters == cat.domain("home").tools[0].parameters
    assert_roundtrip(cat, codec)
    for groups, match in [({"set_seat": {"a": ["nope"]}}, "no argument"), ({"set_seat": {"seat": ["level"]}}, "clash"),
                          ({"set_seat": {"a": ["level"], "b": ["level"]}}, "two groups"), ({"nope": {"a": ["x"]}},
                                                                                          "unknown tool")]:
        with pytest.raises(VariantError, match=match):
            build_codec(cat, spec({"op": "nest", "method": "groups", "groups": groups}))
    with pytest.raises(VariantError, match="unknown nest method"):
        build_codec(cat, spec({"op": "nest", "method": "pile"}))


# -- flatten --------------------------------------------------------------------------------------

def test_flatten_schema() -> None:
    cat = hand_catalog()
    codec = build_codec(cat, spec({"op": "flatten"}))
    t = codec.tools_for("shop")[0]
    assert list(t.properties) == ["location", "budget__min_2", "budget__max", "filters__pets", "filters__garden",
                                  "meta", "extra", "deep__inner__x", "deep__tag", "budget__min"]
    assert t.required == ("location", "deep__inner__x")
    assert t.properties["meta"] == OBJ_META and t.properties["extra"] == OBJ_OPEN  # cannot say "absent" when flat
    assert codec.tools_for("car") == list(cat.domain("car").tools)


def test_flatten_rejects_partial_objects_and_repairs_nested_forms() -> None:
    cat = hand_catalog()
    codec = build_codec(cat, spec({"op": "flatten"}))
    base = {"location": "Cambridge", "deep__inner__x": 3}
    d = decode1(codec, "shop", "find_properties", {**base, "filters__garden": True})
    assert d.outcome is Outcome.REJECTION and "filters__pets" in d.message and not d.actions
    d = decode1(codec, "shop", "find_properties", {**base, "filters__pets": False})
    assert d.actions == (NativeAction("shop", "find_properties", {"location": "Cambridge", "budget": {},
                                                                   "filters": {"pets": False},
                                                                   "deep": {"inner": {"x": 3}}}),)
    want = (NativeAction("shop", "find_properties", {"location": "Cambridge", "budget": {"max": 2.5},
                                                      "deep": {"inner": {"x": 3}, "tag": "t"}}),)
    for args in ({"location": "Cambridge", "budget": {"max": 2.5}, "deep": {"inner": {"x": 3}, "tag": "t"}},
                 {"location": "Cambridge", "budget.max": 2.5, "deep__inner__x": 3, "deep": {"tag": "t"}},
                 {"location": "Cambridge", "budget__max": 2.5, "deep": {"inner": {"x": 3}}, "deep.tag": "t"}):
        assert decode1(codec, "shop", "find_properties", args).outcome is Outcome.REJECTION
        d = decode1(codec, "shop", "find_properties", args, "lenient")
        assert d.outcome is Outcome.NATIVE and d.actions == want and d.lenient, args
    bad = {"location": "Cambridge", "deep__inner__x": 3, "deep": {"inner": {"x": 4}}}
    assert decode1(codec, "shop", "find_properties", bad, "lenient").outcome is Outcome.REJECTION


# -- rename -------------------------------------------------------------------------------------------

def test_namespaced_names_route_and_lenient() -> None:
    cat = hand_catalog()
    codec = build_codec(cat, get_variant("namespaced_names_by_object"))
    assert [t.name for t in codec.tools_for("car")] == ["window__set_window", "seat__set_seat", "horn__honk",
                                                        "mode__set_mode"]
    assert [t.name for t in codec.tools_for("home")] == ["window__set_window", "home__set_light"]  # no class: domain
    assert codec.instructions() == [NAMESPACE_INSTRUCTION]
    args = {"position": "front_left", "state": "open", "speed": "slow"}
    want = (NativeAction("car", "set_window", args),)
    d = decode1(codec, "car", "window__set_window", args)
    assert d.actions == want and d.routes == ("window",) and d.route_classes == ("window",)
    d = decode1(codec, "car", "set_window", args)
    assert d.rejection_kind is RejectionKind.UNKNOWN_TOOL and "window__set_window" in d.message
    for name in ("set_window", "Window.set_window", "WINDOW__SET_WINDOW", "seat__set_window", "window/set_window"):
        d = decode1(codec, "car", name, args, "lenient")
        assert d.outcome is Outcome.NATIVE and d.actions == want and d.lenient, name
    for name in ("window__set_windows", "set"):
        assert decode1(codec, "car", name, args, "lenient").outcome is Outcome.REJECTION, name


def test_namespaced_catalog_scope() -> None:
    cat = hand_catalog()
    codec = build_codec(cat, spec({"op": "rename", "scope": "catalog"}))
    names = [t.name for t in codec.tools_for("car")]
    assert len(names) == len(cat.tools)  # every domain's tools in every episode
    assert {"car__window__set_window", "home__window__set_window", "seat__set_seat"} <= set(names)
    d = decode1(codec, "car", "home__window__set_window", {"room": "bath", "open": True})
    assert d.outcome is Outcome.REJECTION and d.route_classes == ("window",) and not d.actions
    d = decode1(codec, "car", "seat__set_seat", {"seat": "driver", "level": 2, "massage": False})
    assert d.actions == (NativeAction("car", "set_seat", {"seat": "driver", "level": 2, "massage": False}),)
    d = decode1(codec, "home", "set_window", {"room": "bath", "open": True}, "lenient")
    assert d.actions == (NativeAction("home", "set_window", {"room": "bath", "open": True}),)
    by_domain = build_codec(cat, get_variant("namespaced_names"))  # the paper's: whole catalog, classes = domains
    assert {"car__set_window", "home__set_window", "shop__find_properties"} <= {t.name for t in by_domain.tools}
    assert len(by_domain.tools_for("car")) == len(cat.tools)
    assert by_domain.instructions() == [NAMESPACE_INSTRUCTION]  # Table 11's sentence


def test_opaque_names_seeded_and_lenient() -> None:
    cat = hand_catalog()
    a = build_codec(cat, spec({"op": "rename", "method": "opaque", "seed": 0}))
    b = build_codec(cat, spec({"op": "rename", "method": "opaque", "seed": 0}))
    c = build_codec(cat, spec({"op": "rename", "method": "opaque", "seed": 1}))
    dump = lambda codec: json.dumps([t.to_openai() for t in codec.tools])  # noqa: E731
    assert dump(a) == dump(b) and dump(a) != dump(c)
    car = a.tools_for("car")
    assert sorted(t.name for t in car) == ["f_00", "f_01", "f_02", "f_03"]
    seat = next(t for t in car if t.description.startswith("set_seat"))
    assert list(seat.properties) == ["p_0", "p_1", "p_2"] and seat.required == ("p_0", "p_1", "p_2")
    shop = a.tools_for("shop")[0]
    assert list(shop.properties["p_1"]["properties"]) == ["p_0", "p_1"]  # nested objects too
    native = {"seat": "passenger", "level": 5, "massage": True}
    want = (NativeAction("car", "set_seat", native),)
    assert decode1(a, "car", seat.name, {"p_0": "passenger", "p_1": 5, "p_2": True}).actions == want
    for name, args in ((seat.name, native), ("set_seat", native), (seat.name, {"p_0": "passenger", "level": 5,
                                                                                "p_2": True})):
        assert decode1(a, "car", name, args).outcome is Outcome.REJECTION
        d = decode1(a, "car", name, args, "lenient")
        assert d.outcome is Outcome.NATIVE and d.actions == want and d.lenient, (name, args)
    # 'p_0' is both a native parameter of set_light and the new name of another: ambiguous, refused
    light = next(t for t in a.tools_for("home") if t.description.startswith("set_light"))
    assert decode1(a, "home", light.name, {"room": "bath", "p_0": "x"}, "lenient").outcome is Outcome.REJECTION
    only_tools = build_codec(cat, get_variant("opaque_names"))
    assert all(re.fullmatch(r"f_\d\d", t.name) for t in only_tools.tools)
    assert [t.parameters for t in only_tools.tools] == [t.parameters for t in cat.tools]


def test_rename_bad_parameters() -> None:
    for step, match in [({"op": "rename", "method": "hash"}, "unknown rename method"),
                        ({"op": "rename", "scope": "galaxy"}, "scope"), ({"op": "rename", "prefix": "x"}, "prefix"),
                        ({"op": "rename", "sep": "."}, "separator")]:
        with pytest.raises(VariantError, match=match):
            build_codec(hand_catalog(), spec(step))


# -- reorder ---------------------------------------------------------------------------------------------

def test_reorder_seeded_and_always_changes_order() -> None:
    cat = hand_catalog()
    a = build_codec(cat, spec({"op": "reorder", "seed": 13}))
    b = build_codec(cat, spec({"op": "reorder", "seed": 13}))
    c = build_codec(cat, spec({"op": "reorder", "seed": 14}))
    assert [t.to_openai() for t in a.tools] == [t.to_openai() for t in b.tools]
    assert [list(t.properties) for t in a.tools] != [list(t.properties) for t in c.tools]
    for new, old in zip(a.tools, cat.tools, strict=True):
        assert sorted(new.properties) == sorted(old.properties) and set(new.required) == set(old.required)
        if len(old.properties) > 1:
            assert list(new.properties) != list(old.properties), old.name
        assert list(new.required) == [p for p in new.properties if p in old.required]
    act = NativeAction("car", "set_window", {"position": "rear_left", "state": "open", "speed": "fast"})
    (call,) = a.encode([act])
    assert list(call.arguments) == list(a.tools_for("car")[0].properties)
    assert a.instructions() == []


@needs_tss
def test_reorder_arguments_on_toolschemaspace(tss: Catalog) -> None:
    codec = build_codec(tss, get_variant("reorder_arguments"))
    changed = sum(list(n.properties) != list(o.properties) for n, o in zip(codec.tools, tss.tools, strict=True))
    assert changed == sum(len(o.properties) > 1 for o in tss.tools)


# -- property test -------------------------------------------------------------------------------------

@st.composite
def schema_st(draw: st.DrawFn, depth: int = 0) -> dict[str, Any]:
    kinds = ["enum", "int", "num", "bool", "str"] + (["obj"] if depth < 2 else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "enum":
        return {"type": "string", "enum": draw(st.lists(st.sampled_from(["a", "b", "c d", "E"]), min_size=1,
                                                         max_size=3, unique=True))}
    if kind == "int":
        return {"type": "integer", "minimum": 0, "maximum": draw(st.integers(0, 9))}
    if kind == "num":
        return {"type": "number"}
    if kind == "bool":
        return {"type": "boolean"}
    if kind == "obj":
        names = draw(st.lists(st.sampled_from(["x", "y", "z", "p_0"]), min_size=1, max_size=3, unique=True))
        return {"type": "object", "properties": {n: draw(schema_st(depth + 1)) for n in names},
                "required": [n for n in names if draw(st.booleans())]}
    return {"type": "string"}


@st.composite
def small_catalog(draw: st.DrawFn) -> Catalog:
    domains = []
    for d in range(draw(st.integers(1, 2))):
        names = draw(st.lists(st.sampled_from(["set_a", "set_b", "get_c", "run", "x__y"]), min_size=1, max_size=3,
                              unique=True))
        tools = []
        for n in names:
            pnames = draw(st.lists(st.sampled_from(["a", "b", "c", "options", "a__b", "p_1"]), max_size=4, unique=True))
            props = {p: draw(schema_st()) for p in pnames}
            tools.append(tool(n, f"d{d}", props, [p for p in pnames if draw(st.booleans())],
                              cls=draw(st.sampled_from(["", "lamp", "door"]))))
        domains.append(Domain(f"d{d}", tuple(tools)))
    cat = Catalog("random", tuple(domains))
    validate_catalog(cat)
    return cat


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cat=small_catalog(), steps=st.sampled_from([
    [{"op": "nest"}], [{"op": "nest", "keep": 0, "min_pack": 1}], [{"op": "flatten"}],
    [{"op": "nest"}, {"op": "flatten"}], [{"op": "rename"}], [{"op": "rename", "scope": "catalog"}],
    [{"op": "rename", "method": "opaque"}], [{"op": "reorder", "deep": True}],
    [{"op": "flatten"}, {"op": "rename", "method": "opaque"}, {"op": "reorder"}]]))
def test_property_roundtrip_random_catalogs(cat: Catalog, steps: list[dict[str, Any]]) -> None:
    assert assert_roundtrip(cat, build_codec(cat, spec(*steps))) > 0


@pytest.mark.parametrize(("step", "bad"), [
    ({"op": "split", "methd": "interval"}, "methd"),
    ({"op": "rename", "method": "opaque", "seeed": 3}, "seeed"),
    ({"op": "reorder", "sed": 1}, "sed"),
    ({"op": "strip", "deep": True}, "deep"),
    ({"op": "nest", "int": "options"}, "int"),
    ({"op": "flatten", "separator": "."}, "separator"),
])
def test_every_operator_refuses_unknown_parameters(step: dict, bad: str) -> None:
    """A typo in a step parameter would silently build another variant: refused, naming it."""
    with pytest.raises(VariantError, match=f"unknown parameter.*'{bad}'") as exc:
        build_codec(load_catalog("builtin"), VariantSpec("typo", (step,)))
    assert "use:" in (exc.value.fix or "") or step["op"] == "strip"


def test_opaque_parameters_rename_every_alternative_of_a_union_alike() -> None:
    """Opaque parameter names over a union-encoded merge: a key gets one new name in the
    dispatcher and in every alternative, and every action round-trips (found by hypothesis)."""
    from tests.support.catalogs import mini_catalog
    from toolbias.variants.verify import verify_codec

    catalog = mini_catalog()
    codec = build_codec(catalog, spec({"op": "merge", "encoding": "union"}, {"op": "rename", "method": "opaque"}))
    for t in codec.tools:
        top = set(t.parameters["properties"])
        for branch in t.parameters["oneOf"]:
            keys = set(branch["properties"])
            assert all(re.fullmatch(r"p_\d+", k) for k in keys)
            assert top <= keys  # the discriminator has the same new name everywhere
    result = verify_codec(codec, catalog)
    assert result.ok, result.examples


@pytest.fixture(scope="module")
def tss() -> Catalog:
    return toolschemaspace_catalog()
