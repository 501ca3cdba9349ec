"""The merge operator: groupings, encodings, round trips, strict/lenient decoding, routes, registry."""

from __future__ import annotations

import json
import re
from collections import Counter

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.paths import SHARED_DATA
from toolbias import Call, NativeAction, VariantError, VariantSpec, build_codec, load_catalog
from toolbias.catalog.model import Catalog, Domain, Tool
from toolbias.operators import OPERATORS
from toolbias.operators import _grouping as grouping
from toolbias.operators.base import ALL_DOMAINS, RejectionKind
from toolbias.variants.codec import Codec, Control, Outcome, _closed, check_arguments
from toolbias.variants.named.merge import VARIANTS
from toolbias.variants.verify import coverage_actions

SHARED = SHARED_DATA / "toolschemaspace"
NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
TABLE11_MERGED = ("All operations go through a single dispatcher tool. Set operation to the operation you need "
                  "and pass each of its arguments under the key <operation>::<argument>.")
TABLE11_CLASS = ("Each class has one dispatcher tool named after the class. Call the tool of the right class, set "
                 "operation to the method you need, and pass each argument under the key <method>::<argument>.")


# -- a small hand-written catalog ---------------------------------------------------------

def _tool(domain: str, name: str, cls: str, props: dict, required: list[str] | None = None) -> Tool:
    return Tool(name, f"{name.replace('_', ' ')}.", {"type": "object", "properties": props,
                                                      "required": list(props) if required is None else required},
                domain, cls)


ZONE = {"type": "string", "enum": ["front", "rear"], "description": "Which zone."}
STATE = {"type": "string", "enum": ["on", "off"]}


def small_catalog() -> Catalog:
    """Two domains; classes of 1-3 tools; a name both domains use (set_light); an optional
    argument; a tool without arguments; integer/number bounds, booleans, free strings."""
    car = Domain("car", (
        _tool("car", "set_window", "window", {"zone": ZONE, "percent": {"type": "integer", "minimum": 0,
                                                                         "maximum": 100}}),
        _tool("car", "vent_window", "window", {"zone": ZONE}),
        _tool("car", "set_light", "light", {"zone": ZONE, "state": STATE}),
        _tool("car", "set_seat_heat", "seat", {"seat": {"type": "string", "enum": ["driver", "passenger"]},
                                               "level": {"type": "integer", "minimum": 0, "maximum": 3}}),
        _tool("car", "set_seat_massage", "seat", {"seat": {"type": "string", "enum": ["driver", "passenger"]},
                                                  "on": {"type": "boolean"}}),
        _tool("car", "honk", "horn", {}),
    ))
    home = Domain("home", (
        _tool("home", "set_light", "light", {"room": {"type": "string", "enum": ["kitchen", "hall", "office"]},
                                             "state": STATE}),
        _tool("home", "dim_light", "light", {"room": {"type": "string", "enum": ["kitchen", "hall", "office"]},
                                             "level": {"type": "number", "minimum": 0.5, "maximum": 1.5},
                                             "fade": {"type": "boolean"}}, required=["room", "level"]),
        _tool("home", "set_fan", "fan", {"speed": {"type": "string", "enum": ["low", "mid", "high"]}}),
        _tool("home", "announce", "speaker", {"message": {"type": "string"}, "loud": {"type": "boolean"}}),
        _tool("home", "set_thermostat", "climate", {"temp": {"type": "integer", "minimum": 16, "maximum": 28},
                                                    "mode": {"type": "string", "enum": ["heat", "cool", "auto"]}}),
    ))
    return Catalog("small", (car, home))


SMALL = small_catalog()


def tss() -> Catalog:
    if not (SHARED / "tools.json").exists():
        pytest.skip(f"needs the paper artifact copy in {SHARED} (../shared/data/toolschemaspace)")
    return load_catalog(f"toolschemaspace:{SHARED}")


def merge(catalog: Catalog, **params: object) -> Codec:
    return build_codec(catalog, VariantSpec("t", ({"op": "merge", **params},)))


def all_actions(catalog: Catalog) -> list[NativeAction]:
    return [a for t in catalog.tools for a in coverage_actions(t)]


def assert_round_trip(codec: Codec, actions: list[NativeAction]) -> None:
    for a in actions:
        calls = codec.encode([a])
        session = codec.session(a.domain)
        decoded = [session.decode(c) for c in calls]
        assert [x for d in decoded for x in d.actions] == [a], (a, calls, decoded)
        assert all(d.outcome is Outcome.NATIVE for d in decoded)


def groups(codec: Codec) -> list[dict]:
    return codec.layers[0].groups()  # type: ignore[attr-defined, no-any-return]


def ops_by_tool(codec: Codec) -> dict[str, list[str]]:
    return {g["name"]: g["operations"] for g in groups(codec)}


METHODS: list[dict[str, object]] = [
    {},
    {"encoding": "nested"},
    {"encoding": "union"},
    {"encoding": "mixed"},
    {"encoding": ["union", "flat"], "rotation": 1},
    {"groups": "class"},
    {"groups": "class", "encoding": "nested"},
    {"groups": "class", "encoding": "union"},
    {"groups": "class", "names": "neutral"},
    {"groups": "class", "scope": "catalog"},
    {"groups": "class", "scope": "catalog", "encoding": "union"},
    {"groups": "class", "scope": "catalog", "encoding": "nested", "key": "domain"},
    {"groups": "class", "ratio": 0.5},
    {"groups": "class", "functions": 7, "encoding": "mixed", "singletons": "merge"},
    {"groups": "class", "group_size": 2, "singletons": "merge", "encoding": "union"},
    {"groups": "random", "seed": 3},
    {"groups": "random", "scope": "catalog", "names": "neutral", "encoding": "nested"},
    {"groups": "anti_class", "group_size": 3},
    {"groups": "anti_class", "scope": "catalog", "names": "neutral", "encoding": "mixed"},
    {"scope": "catalog"},
    {"scope": "catalog", "encoding": "union"},
    {"groups": "none", "scope": "catalog"},
    {"groups": "none", "singletons": "merge", "encoding": "nested"},
    {"groups": [{"tools": ["car::set_light", "home::set_light", "set_fan"], "name": "lights", "encoding": "union"},
                {"tools": ["honk", "set_window"]}], "scope": "catalog"},
]


# -- round trips --------------------------------------------------------------------------

@pytest.mark.parametrize("params", METHODS, ids=lambda p: json.dumps(p, sort_keys=True)[:80])
def test_round_trip_small_catalog(params: dict) -> None:
    assert_round_trip(merge(SMALL, **params), all_actions(SMALL))


@pytest.mark.parametrize("params", [m for m in METHODS if not isinstance(m.get("groups"), list)],
                         ids=lambda p: json.dumps(p, sort_keys=True)[:80])
def test_round_trip_toolschemaspace(params: dict) -> None:
    cat = tss()
    if "functions" in params:
        params = {**params, "functions": 30}
    assert_round_trip(merge(cat, **params), all_actions(cat))


@pytest.mark.parametrize("spec", VARIANTS, ids=lambda v: v.name)
def test_registered_variants_round_trip_on_both_catalogs(spec: VariantSpec) -> None:
    assert_round_trip(build_codec(SMALL, spec), all_actions(SMALL))
    if (SHARED / "tools.json").exists():  # every value of every method is covered above; here two per tool
        cat = tss()
        assert_round_trip(build_codec(cat, spec), [a for t in cat.tools for a in coverage_actions(t)[:2]])


def test_coverage_actions_reach_every_enum_value_and_bound() -> None:
    seen: dict[str, set] = {}
    for a in all_actions(SMALL):
        for k, v in a.arguments.items():
            seen.setdefault(f"{a.uid}.{k}", set()).add(json.dumps(v))
    assert {'"front"', '"rear"'} <= seen["car::set_window.zone"]
    assert {"0", "100"} <= seen["car::set_window.percent"]
    assert {"0.5", "1.5"} <= seen["home::dim_light.level"]
    assert {"true", "false"} <= seen["car::set_seat_massage.on"]


# -- schemas --------------------------------------------------------------------------------

@pytest.mark.parametrize("params", METHODS, ids=lambda p: json.dumps(p, sort_keys=True)[:80])
def test_schemas_are_valid_deterministic_and_uniquely_named(params: dict) -> None:
    codec = merge(SMALL, **params)
    again = merge(SMALL, **params)
    assert json.dumps([t.to_openai() for t in codec.tools]) == json.dumps([t.to_openai() for t in again.tools])
    for d in SMALL.domains:
        names = [t["function"]["name"] for t in codec.schema(d.name)]
        assert len(names) == len(set(names))
        assert all(NAME_RE.match(n) for n in names)
    for t in codec.tools:
        jsonschema.Draft202012Validator.check_schema(t.parameters)
        for key in t.parameters.get("properties", {}):
            assert isinstance(key, str) and key and json.loads(json.dumps(key)) == key


def test_flat_keys_and_only_the_discriminator_required() -> None:
    t = merge(SMALL).tools_for("car")[0]
    assert t.name == "execute"
    assert t.parameters["required"] == ["operation"]
    keys = set(t.parameters["properties"]) - {"operation"}
    assert "set_window::percent" in keys and "set_seat_heat::level" in keys
    assert t.parameters["properties"]["set_window::percent"] == {"type": "integer", "minimum": 0, "maximum": 100}


def test_nested_and_union_shapes() -> None:
    nested = merge(SMALL, encoding="nested").tools_for("car")[0].parameters
    assert nested["properties"]["set_window"]["properties"]["percent"]["maximum"] == 100
    assert nested["required"] == ["operation"]
    union = merge(SMALL, encoding="union").tools_for("car")[0].parameters
    assert [b["properties"]["operation"]["enum"] for b in union["oneOf"]] == [[t.name] for t in SMALL.domains[0].tools]
    assert all(b["additionalProperties"] is False for b in union["oneOf"])


def test_union_discriminator_avoids_argument_names() -> None:
    clash = Catalog("clash", (Domain("d", (
        _tool("d", "run_query", "db", {"operation": {"type": "string", "enum": ["add", "drop"]}, "table": STATE}),
        _tool("d", "op", "db", {"x": STATE}),
    )),))
    codec = merge(clash, encoding="union")  # "operation" is an argument: the next free key
    [g] = groups(codec)
    assert g["operation_key"] == "op"
    assert "Set op to" in codec.instructions()[0]
    assert groups(merge(clash, encoding="mixed"))[0]["operation_key"] == "operation_name"  # "op" is a tool
    assert_round_trip(codec, all_actions(clash))
    with pytest.raises(VariantError, match="discriminator"):
        merge(clash, encoding="union", operation_key="operation")
    assert groups(merge(clash))[0]["operation_key"] == "operation"  # flat keys never clash
    nested = merge(clash, encoding="nested")
    assert groups(nested)[0]["operation_key"] == "operation"  # no tool is called "operation"
    assert_round_trip(nested, all_actions(clash))


# -- counts and groupings -------------------------------------------------------------------

def test_fully_merged_and_class_dispatch_counts() -> None:
    assert merge(SMALL).function_count() == 2
    assert merge(SMALL, scope="catalog").function_count() == 1
    per_domain = sum(len({t.cls for t in d.tools}) for d in SMALL.domains)
    assert merge(SMALL, groups="class").function_count() == per_domain == 8
    catalog_classes = {t.cls for t in SMALL.tools}
    cd = merge(SMALL, groups="class", scope="catalog")
    assert cd.function_count() == len(catalog_classes) == 7
    assert {t.name for t in cd.tools} == catalog_classes  # named after the class
    assert all(t.domain == ALL_DOMAINS for t in cd.tools)


@pytest.mark.parametrize("ratio,expected", [(0.29, 49), (0.46, 77), (0.69, 116), (0.85, 143)])
def test_ladder_hits_figure3_targets_on_toolschemaspace(ratio: float, expected: int) -> None:
    cat = tss()
    codec = merge(cat, groups="class", ratio=ratio)
    assert codec.function_count() == expected == round(ratio * len(cat.tools))
    assert merge(cat, groups="class", ratio=ratio).function_count() == expected  # deterministic
    assert merge(cat, groups="random", ratio=ratio).function_count() == expected
    assert merge(cat, groups="anti_class", ratio=ratio).function_count() == expected


@pytest.mark.parametrize("k", range(2, 12))
def test_any_function_count_on_small(k: int) -> None:
    for rule in ("class", "random", "anti_class"):
        for singletons in ("keep", "merge"):
            codec = merge(SMALL, groups=rule, functions=k, singletons=singletons)
            assert codec.function_count() == k
    assert merge(SMALL, groups="class", functions=k, scope="catalog").function_count() == k


def test_registry_function_counts_on_toolschemaspace() -> None:
    cat = tss()
    got = {v.name: build_codec(cat, v).function_count() for v in VARIANTS}
    assert got["fully_merged"] == 12
    assert got["merge_semantic_groups"] == got["merge_random_groups"] == got["merge_anti_semantic_groups"] == 40
    assert got["convention_mixture_0_3x_flat"] == got["convention_mixture_0_3x_mixed_rot2"] == 50
    assert got["native_whole_catalog"] == 168
    assert got["class_dispatch_by_object"] == len({t.cls for t in cat.tools})
    assert got["class_dispatch"] == 12  # the paper: one dispatcher per class, its classes are the domains
    table8 = [n for n in got if n.startswith(("merge_catalog_random_classes", "merge_catalog_anti_classes"))]
    assert len(table8) == 10 and all(got[n] == 12 for n in table8)


def _profile(codec: Codec) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for g in groups(codec):
        out.setdefault(g["domain"], []).append(len(g["members"]))
    return {d: sorted(v) for d, v in out.items()}


def test_random_and_anti_keep_the_semantic_size_profile() -> None:
    cat = tss()
    for scope in ("domain", "catalog"):
        sem = merge(cat, groups="class", group_size=4, scope=scope, singletons="merge")
        for rule in ("random", "anti_class"):
            other = merge(cat, groups=rule, group_size=4, scope=scope, singletons="merge")
            assert _profile(other) == _profile(sem)
            assert sorted(u for g in groups(other) for u in g["members"]) == sorted(t.uid for t in cat.tools)


def test_random_is_seeded() -> None:
    def members(seed: int) -> list[list[str]]:
        return [g["members"] for g in groups(merge(SMALL, groups="random", group_size=2, seed=seed))]
    assert members(1) == members(1)
    assert any(members(1) != members(s) for s in range(2, 6))


def test_anti_class_spreads_classes() -> None:
    cat = tss()
    # key=domain: the classes are the 12 domains (the paper's Table 8 arms)
    sem = merge(cat, groups="class", scope="catalog", key="domain", names="neutral")
    anti = merge(cat, groups="anti_class", scope="catalog", key="domain", names="neutral")
    assert all(len({u.split("::")[0] for u in g["members"]}) == 1 for g in groups(sem))
    for g in groups(anti):
        domains = Counter(u.split("::")[0] for u in g["members"])
        assert max(domains.values()) <= 3 and len(domains) >= 11
    rand = merge(cat, groups="random", scope="catalog", key="domain", names="neutral")
    assert _profile(rand) == _profile(anti) == _profile(sem)


def test_anti_class_small_groups_have_distinct_classes() -> None:
    codec = merge(SMALL, groups="anti_class", functions=4, scope="catalog")
    cls = {t.uid: t.cls for t in SMALL.tools}
    for g in groups(codec):
        assert max(Counter(cls[u] for u in g["members"]).values()) == 1


def test_neutral_names_keep_the_semantic_groups() -> None:
    sem = merge(SMALL, groups="class", scope="catalog")
    neu = merge(SMALL, groups="class", scope="catalog", names="neutral")
    assert [g["members"] for g in groups(sem)] == [g["members"] for g in groups(neu)]
    assert [g["name"] for g in groups(neu)] == [f"group_{i:02d}" for i in range(1, 8)]


def test_semantic_merging_prefers_shared_words() -> None:
    items = [grouping.Item(c, grouping.tokens(n)) for c, n in
             [("a", "set_fan_speed"), ("b", "set_window"), ("c", "set_fan_mode"), ("d", "set_window_tint")]]
    assert grouping.semantic(items, 2) == [[0, 2], [1, 3]]
    assert grouping.semantic(items, 4) == [[0], [1], [2], [3]]
    assert grouping.semantic([grouping.Item("x", frozenset())] * 5, 3) == [[0, 1], [2], [3, 4]]  # halving
    assert grouping.apportion([18, 13, 13], 12) == [5, 4, 3]
    assert sum(grouping.apportion([18, 16, 13, 15, 13], 9)) == 9


def test_mixture_rotations_assign_each_encoding_in_turn() -> None:
    cat = tss()
    encs = {}
    members = None
    for rot in range(3):
        codec = merge(cat, groups="class", ratio=0.3, singletons="merge", encoding="mixed", rotation=rot)
        encs[rot] = [g["encoding"] for g in groups(codec)]
        assert set(encs[rot]) == {"flat", "nested", "union"}
        got = [(g["name"], g["members"]) for g in groups(codec)]
        assert members is None or got == members  # same groups, names and count in every arm
        members = got
    for a, b, c in zip(encs[0], encs[1], encs[2], strict=True):
        assert {a, b, c} == {"flat", "nested", "union"}  # every group sees every structure once
    flat = merge(cat, groups="class", ratio=0.3, singletons="merge")
    assert [(g["name"], g["members"]) for g in groups(flat)] == members


def test_singletons_keep_or_merge() -> None:
    keep = merge(SMALL, groups="class", singletons="keep")
    assert "honk" in {t.name for t in keep.tools} and keep.function_count() == 8
    honk = next(t for t in keep.tools if t.name == "honk")
    assert honk == SMALL.domain("car").tool("honk")
    wrap = merge(SMALL, groups="class", singletons="merge")
    assert "horn" in {t.name for t in wrap.tools} and "honk" not in {t.name for t in wrap.tools}


# -- strict and lenient decoding ------------------------------------------------------------

WINDOW = NativeAction("car", "set_window", {"zone": "rear", "percent": 40})


def decode(codec: Codec, domain: str, name: str, args: dict, control: str = "strict"):
    return codec.session(domain, Control(control)).decode(Call(name, args))


def test_flat_rejects_other_operations_args_strict_accepts_lenient() -> None:
    codec = merge(SMALL)
    args = {"operation": "set_window", "set_window::zone": "rear", "set_window::percent": 40,
            "vent_window::zone": "front"}
    d = decode(codec, "car", "execute", args)
    assert d.outcome is Outcome.REJECTION and d.rejection_kind is RejectionKind.INVALID_ARGUMENTS
    assert "vent_window::zone" in d.message and "'vent_window'" in d.message and "set_window::percent" in d.message
    assert not d.actions
    d = decode(codec, "car", "execute", args, "lenient")
    assert d.outcome is Outcome.NATIVE and d.actions == (WINDOW,) and d.lenient


def test_flat_missing_argument_is_named_and_not_repairable() -> None:
    codec = merge(SMALL)
    for control in ("strict", "lenient"):
        d = decode(codec, "car", "execute", {"operation": "set_window", "set_window::zone": "rear"}, control)
        assert d.outcome is Outcome.REJECTION and "'set_window::percent'" in d.message


def test_nested_rejects_other_objects_and_missing_ones() -> None:
    codec = merge(SMALL, encoding="nested")
    args = {"operation": "set_window", "set_window": {"zone": "rear", "percent": 40}, "vent_window": {"zone": "front"}}
    d = decode(codec, "car", "execute", args)
    assert d.outcome is Outcome.REJECTION and "'vent_window'" in d.message
    assert decode(codec, "car", "execute", args, "lenient").actions == (WINDOW,)
    d = decode(codec, "car", "execute", {"operation": "set_window"})
    assert d.outcome is Outcome.REJECTION and "'set_window.zone'" in d.message
    # a tool without arguments needs no object
    assert decode(codec, "car", "execute", {"operation": "honk"}).actions == (NativeAction("car", "honk", {}),)


def test_union_errors_name_the_operation() -> None:
    codec = merge(SMALL, encoding="union")
    d = decode(codec, "car", "execute", {"operation": "set_window", "zone": "rear"})
    assert d.outcome is Outcome.REJECTION and "set_window" in d.message and "percent" in d.message
    d = decode(codec, "car", "execute", {"operation": "set_window", "zone": "rear", "percent": 40, "state": "on"})
    assert d.outcome is Outcome.REJECTION and "state" in d.message


@pytest.mark.parametrize("encoding", ["flat", "nested", "union"])
@pytest.mark.parametrize("form", ["flat", "nested", "union", "arguments", "no_operation", "tool_name"])
def test_lenient_accepts_any_unambiguous_form(encoding: str, form: str) -> None:
    codec = merge(SMALL, encoding=encoding)
    native = {"zone": "rear", "percent": 40}
    name, args = "execute", {
        "flat": {"operation": "set_window", "set_window::zone": "rear", "set_window::percent": 40},
        "nested": {"operation": "set_window", "set_window": native},
        "union": {"operation": "set_window", **native},
        "arguments": {"operation": "set_window", "arguments": native},
        "no_operation": {"set_window::zone": "rear", "set_window::percent": 40},
        "tool_name": {"set_window::zone": "rear", "set_window::percent": 40},
    }[form]
    if form == "tool_name":
        name = "set_window"
    lenient = decode(codec, "car", name, args, "lenient")
    assert lenient.outcome is Outcome.NATIVE and lenient.actions == (WINDOW,)
    assert lenient.routes == ("execute",)
    strict = decode(codec, "car", name, args)
    if form != encoding:
        assert strict.outcome is Outcome.REJECTION and not strict.actions
    else:
        assert strict.outcome is Outcome.NATIVE and strict.lenient is None


def test_lenient_native_form_and_ambiguity() -> None:
    codec = merge(SMALL)
    d = decode(codec, "car", "set_window", {"zone": "rear", "percent": 40}, "lenient")  # codec's lower-level rule
    assert d.actions == (WINDOW,) and d.lenient
    ambiguous = {"set_window::zone": "rear", "vent_window::zone": "rear"}  # two operations, no discriminator
    assert decode(codec, "car", "execute", ambiguous, "lenient").outcome is Outcome.REJECTION
    unknown = {"operation": "set_window", "set_window::zone": "rear", "set_window::percent": 40, "colour": "red"}
    assert decode(codec, "car", "execute", unknown, "lenient").outcome is Outcome.REJECTION
    conflict = {"operation": "set_window", "set_window::zone": "rear", "set_window::percent": 40,
                "set_window": {"zone": "front"}}
    assert decode(codec, "car", "execute", conflict, "lenient").outcome is Outcome.REJECTION


def test_lenient_reroutes_an_operation_sent_to_the_wrong_dispatcher() -> None:
    codec = merge(SMALL, groups="class")
    args = {"operation": "set_window", "set_window::zone": "rear", "set_window::percent": 40}
    assert decode(codec, "car", "seat", args).outcome is Outcome.REJECTION
    d = decode(codec, "car", "seat", args, "lenient")
    assert d.actions == (WINDOW,) and d.routes == ("window",) and d.call.name == "seat"


# -- routes, classes and catalog scope --------------------------------------------------------

def test_route_and_classes_are_recorded() -> None:
    codec = merge(SMALL, groups="class")
    [call] = codec.encode([WINDOW])
    assert call.name == "window"
    d = codec.session("car").decode(call)
    assert d.routes == ("window",) and d.route_classes == ("window",)
    d = merge(SMALL).session("car").decode(merge(SMALL).encode([WINDOW])[0])
    assert d.routes == ("execute",) and set(d.route_classes) == {"window", "light", "seat", "horn"}
    kept = merge(SMALL, groups="none", scope="catalog")
    d = kept.session("car").decode(kept.encode([WINDOW])[0])
    assert d.routes == () and d.actions == (WINDOW,)


def test_catalog_scope_keeps_equal_names_apart() -> None:
    codec = merge(SMALL, scope="catalog")
    [t] = codec.tools
    assert t.domain == ALL_DOMAINS and {"car.set_light", "home.set_light"} <= set(groups(codec)[0]["operations"])
    car_light = NativeAction("car", "set_light", {"zone": "rear", "state": "on"})
    home_light = NativeAction("home", "set_light", {"room": "hall", "state": "on"})
    assert codec.encode([car_light])[0].arguments["operation"] == "car.set_light"
    assert_round_trip(codec, [car_light, home_light])
    # an operation of another domain is rejected by the codec, with the route recorded
    d = codec.session("home").decode(codec.encode([car_light])[0])
    assert d.outcome is Outcome.REJECTION and d.rejection_kind is RejectionKind.INVALID_ACTION
    assert d.routes == ("execute",) and not d.actions
    # lenient: the bare native name means the episode domain's operation
    args = {"operation": "set_light", "set_light::room": "hall", "set_light::state": "on"}
    d = decode(codec, "home", "execute", args, "lenient")
    assert d.actions == (home_light,)


def test_class_dispatch_wrong_class_is_scorable() -> None:
    codec = merge(SMALL, groups="class", scope="catalog", key="domain")
    assert {t.name for t in codec.tools} == {"car", "home"}
    d = codec.session("home").decode(codec.encode([WINDOW])[0])
    assert d.outcome is Outcome.REJECTION and d.routes == ("car",) and "window" in d.route_classes


def test_whole_catalog_control() -> None:
    codec = merge(SMALL, groups="none", scope="catalog")
    assert codec.function_count() == len(SMALL.tools) and not codec.instructions()
    by_name = {(t.domain, t.name) for t in codec.tools}
    assert (ALL_DOMAINS, "set_window") in by_name and (ALL_DOMAINS, "announce") in by_name
    assert ("car", "set_light") in by_name and ("home", "set_light") in by_name  # shared name stays home
    car_view = {t.name for t in codec.tools_for("car")}
    assert "announce" in car_view and "set_window" in car_view
    assert [t["function"]["name"] for t in codec.schema("home")].count("set_light") == 1
    assert_round_trip(codec, all_actions(SMALL))
    d = codec.session("car").decode(Call("announce", {"message": "hi", "loud": True}))
    assert d.rejection_kind is RejectionKind.INVALID_ACTION


# -- instructions ----------------------------------------------------------------------------

def test_table11_instructions() -> None:
    reg = {v.name: v for v in VARIANTS}
    assert build_codec(SMALL, reg["fully_merged"]).instructions() == [TABLE11_MERGED]
    assert build_codec(SMALL, reg["class_dispatch"]).instructions() == [TABLE11_CLASS]
    for name in ("merge_domain_nested", "merge_domain_union", "convention_mixture_0_3x_mixed_rot0",
                 "merge_domain_0_46x", "merge_catalog_neutral_names"):
        [text] = build_codec(SMALL, reg[name]).instructions()
        assert "operation" in text and text not in (TABLE11_MERGED, TABLE11_CLASS)
    assert build_codec(SMALL, reg["native_whole_catalog"]).instructions() == []


# -- parameters -------------------------------------------------------------------------------

@pytest.mark.parametrize("params,match", [
    ({"grups": "class"}, "unknown parameter.*'grups'"),
    ({"scope": "world"}, "'scope' must be one of 'domain', 'catalog'"),
    ({"groups": "semantic"}, "'groups'.*all, class, random, anti_class, none"),
    ({"encoding": "json"}, "'encoding'"),
    ({"encoding": []}, "'encoding'"),
    ({"groups": "class", "ratio": 1.5}, "'ratio'.*\\(0, 1\\]"),
    ({"groups": "class", "functions": 1}, "'functions'.*between 2 .* and 11"),
    ({"groups": "class", "functions": 12}, "'functions'"),
    ({"groups": "class", "functions": 3, "ratio": 0.5}, "both set a target"),
    ({"ratio": 0.5}, "'ratio' sets a group count"),
    ({"groups": "class", "group_size": 0}, "'group_size'"),
    ({"names": "fancy"}, "'names'"),
    ({"singletons": "drop"}, "'singletons'"),
    ({"rotation": -1}, "'rotation'"),
    ({"seed": "x"}, "'seed'"),
    ({"into": "bad name"}, "'into'"),
    ({"operation_key": "a::b"}, "'operation_key'"),
    ({"groups": [{"tools": ["set_light"]}]}, "'set_light' is ambiguous.*car::set_light"),
    ({"groups": [{"tools": ["nope"]}]}, "'nope' is not a tool"),
    ({"groups": [{"tools": ["honk"]}, {"tools": ["honk"]}]}, "in two groups"),
    ({"groups": [{"tools": ["honk", "set_fan"]}]}, "mixes domains"),
    ({"groups": [{"tools": []}]}, "non-empty 'tools'"),
])
def test_bad_parameters_are_refused_with_the_valid_values(params: dict, match: str) -> None:
    with pytest.raises(VariantError, match="(?s)" + match) as err:
        merge(SMALL, **params)
    assert err.value.fix


def test_flat_refuses_open_argument_objects() -> None:
    open_tool = Tool("free", "", {"type": "object", "properties": {"a": {"type": "string"}},
                                  "additionalProperties": True}, "d", "c")
    cat = Catalog("open", (Domain("d", (open_tool, _tool("d", "other", "c", {"b": STATE}))),))
    with pytest.raises(VariantError, match="(?s)additionalProperties.*fix: use encoding 'nested'"):
        merge(cat)
    codec = merge(cat, encoding="nested")
    assert_round_trip(codec, [NativeAction("d", "free", {"a": "x", "extra": 1})])


def test_operator_is_registered() -> None:
    assert OPERATORS["merge"].__name__ == "Merge"


# -- registry -----------------------------------------------------------------------------------

def test_registry_entries() -> None:
    names = [v.name for v in VARIANTS]
    assert len(names) == len(set(names)) == 40
    assert all(re.fullmatch(r"[a-z0-9_]+", n) for n in names)
    tags = {v.name: v.tags for v in VARIANTS}
    assert tags["fully_merged"] == tags["class_dispatch"] == ("representative",)
    assert all(tags[f"merge_domain_{r}x"] == ("ladder",) for r in ("0_29", "0_46", "0_69", "0_85"))
    assert all(t in (("representative",), ("ladder",), ("control",)) for t in tags.values())
    registry = SHARED / "registry.json"
    if registry.exists():
        paper = {e["name"] for e in json.loads(registry.read_text())["variants"]}
        assert {v.paper for v in VARIANTS} - {None} <= paper
        merges = {e["name"] for e in json.loads(registry.read_text())["variants"]
                  if e["operator"] == "merge" or e["name"] == "native · whole catalog"}
        assert merges == {v.paper for v in VARIANTS} - {None}


# -- the codec's fast check of union schemas agrees with jsonschema ----------------------------

_UNION = merge(SMALL, encoding="union").tools_for("car")[0]
_VALUES = st.one_of(st.sampled_from(["front", "rear", "on", "off", "driver", "set_window", "honk", "x"]),
                    st.integers(-2, 102), st.booleans(), st.none())


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.sampled_from(["operation", "zone", "percent", "state", "seat", "level", "on", "x"]),
                       _VALUES, max_size=5))
def test_union_fast_check_matches_jsonschema(args: dict) -> None:
    fast = check_arguments(_UNION, args)
    validator = jsonschema.Draft202012Validator(_closed(_UNION.parameters))
    assert (fast is None) == validator.is_valid(args), (args, fast)


# -- property test over random small catalogs ---------------------------------------------------

_PARAM_SCHEMAS = st.sampled_from([
    {"type": "string", "enum": ["a", "b", "c"]},
    {"type": "string", "enum": ["x"]},
    {"type": "integer", "minimum": 0, "maximum": 5},
    {"type": "number", "minimum": -1, "maximum": 1},
    {"type": "boolean"},
    {"type": "string"},
])


@st.composite
def catalogs(draw: st.DrawFn) -> Catalog:
    domains = []
    n_domains = draw(st.integers(1, 3))
    for di in range(n_domains):
        names = draw(st.lists(st.sampled_from(["set_a", "set_b", "get_c", "run_d", "toggle_e", "set_a_mode",
                                               "operation", "x"]), min_size=1, max_size=6, unique=True))
        tools = []
        for name in names:
            args = draw(st.lists(st.sampled_from(["zone", "level", "mode", "operation", "op", "on"]),
                                 max_size=3, unique=True))
            props = {a: draw(_PARAM_SCHEMAS) for a in args}
            required = [a for a in args if draw(st.booleans())]
            tools.append(_tool(f"d{di}", name, draw(st.sampled_from(["k1", "k2", "k3", ""])), props, required))
        domains.append(Domain(f"d{di}", tuple(tools)))
    return Catalog("random", tuple(domains))


@st.composite
def methods(draw: st.DrawFn) -> dict:
    rule = draw(st.sampled_from(["all", "class", "random", "anti_class", "none"]))
    params: dict = {"groups": rule, "scope": draw(st.sampled_from(["domain", "catalog"])),
                    "encoding": draw(st.sampled_from(["flat", "nested", "union", "mixed"])),
                    "rotation": draw(st.integers(0, 2)), "seed": draw(st.integers(0, 3)),
                    "singletons": draw(st.sampled_from(["keep", "merge"])),
                    "names": draw(st.sampled_from(["semantic", "neutral"]))}
    if rule in ("class", "random", "anti_class"):
        params["key"] = draw(st.sampled_from(["class", "domain"]))
        target = draw(st.sampled_from([None, "ratio", "group_size"]))
        if target == "ratio":
            params["ratio"] = draw(st.sampled_from([0.3, 0.5, 0.8, 1.0]))
        elif target == "group_size":
            params["group_size"] = draw(st.sampled_from([1, 2, 3.5]))
    return params


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(catalogs(), methods(), st.randoms(use_true_random=False))
def test_property_round_trip_random_catalogs(cat: Catalog, params: dict, rnd) -> None:
    codec = merge(cat, **params)
    actions = all_actions(cat)
    rnd.shuffle(actions)
    assert_round_trip(codec, actions[:40])
    for d in cat.domains:
        names = [t["function"]["name"] for t in codec.schema(d.name)]
        assert len(names) == len(set(names)) and all(NAME_RE.match(n) for n in names)
    if params["groups"] == "all":
        units = 1 if params["scope"] == "catalog" else len(cat.domains)
        assert codec.function_count() == units
    # a whole domain's actions as one episode
    for d in cat.domains:
        acts = [coverage_actions(t)[0] for t in d.tools]
        session = codec.session(d.name)
        got = [a for c in codec.encode(acts) for a in session.decode(c).actions]
        assert got == acts


def _forms(op_key: str, op: str, args: dict) -> dict[str, dict]:
    return {"flat": {op_key: op, **{f"{op}::{a}": v for a, v in args.items()}},
            "nested": {op_key: op, op: dict(args)},
            "union": {op_key: op, **args},
            "no_operation": {f"{op}::{a}": v for a, v in args.items()}}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(catalogs(), methods(), st.randoms(use_true_random=False))
def test_property_lenient_accepts_every_form_strict_only_its_own(cat: Catalog, params: dict, rnd) -> None:
    codec = merge(cat, **params)
    by_name = {(g["domain"], g["name"]): g for g in groups(codec)}
    actions = all_actions(cat)
    rnd.shuffle(actions)
    for a in actions[:25]:
        [call] = codec.encode([a])
        g = by_name.get((a.domain, call.name)) or by_name.get((ALL_DOMAINS, call.name))
        if g is None:
            continue  # a native tool kept as is
        k = g["operation_key"]
        op = call.arguments[k]
        if k in a.arguments or op == k:
            continue  # flat keeps an argument or operation named like the discriminator; other forms cannot
        for form, args in _forms(k, op, dict(a.arguments)).items():
            if form == "no_operation" and not a.arguments:
                continue  # nothing names the operation
            tool = cat.tool(a.domain, a.tool)
            if form == "nested" and tool is not None and op in tool.properties:
                continue  # the operation's object and its argument of that name: ambiguous
            lenient = codec.session(a.domain, Control.LENIENT).decode(Call(call.name, args))
            assert lenient.actions == (a,), (form, args, lenient)
            strict = codec.session(a.domain).decode(Call(call.name, args))
            if args == dict(call.arguments):
                assert strict.actions == (a,)
            elif form != g["encoding"] and not (form == "nested" and g["encoding"] == "nested"):
                assert strict.outcome is Outcome.REJECTION and not strict.actions, (form, args, strict)
