"""Split operator: fully split, one-enum split, interval split, split ladder; its registry entries."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Mapping
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
    Task,
    VariantError,
    VariantSpec,
    build_codec,
    get_variant,
    validate_action,
    validate_catalog,
)
from toolbias.base.names import TOOL_NAME_RE
from toolbias.catalog.validation import value_error
from toolbias.operators.split import ENUM_INSTRUCTION, INTERVAL_INSTRUCTION, Split
from toolbias.variants.codec import Outcome

SHARED = SHARED_DATA
TSS = SHARED / "toolschemaspace"
needs_tss = needs_shared("toolschemaspace", "tools.json")
NAME = TOOL_NAME_RE

SPLIT_VARIANTS = ["fully_split", "interval_split", "split_enum_1_5x", "split_enum_2_9x", "split_enum_5_4x",
                  "split_one_enum", "split_all_enums"]
PAPER = {"fully_split": "fully split", "interval_split": "interval split", "split_enum_1_5x": "split · enum 1.5x",
         "split_enum_2_9x": "split · enum 2.9x", "split_enum_5_4x": "split · enum 5.4x",
         "split_one_enum": "split · one enum", "split_all_enums": "split · all enums"}


# -- helpers (shared shape with test_representation) -------------------------------------------

def interesting(schema: Mapping[str, Any], extra: Iterable[Any] = ()) -> list[Any]:
    """Values covering every enum value and the numeric boundaries (``extra``: bounds seen in the variant)."""
    if "enum" in schema:
        return list(schema["enum"])
    t = schema.get("type")
    if t == "boolean":
        return [True, False]
    if t in ("integer", "number"):
        vals: set[Any] = {0, 1, 7, 100} | set(extra)
        vals |= {schema[k] for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum") if k in schema}
        if t == "integer":
            vals = {int(v) + d for v in vals for d in (-1, 0, 1)}
        else:
            vals = {v + d for v in vals for d in (-0.5, 0, 0.5)}
        return sorted(vals)
    if t == "object" and isinstance(schema.get("properties"), Mapping):
        return [{k: interesting(s)[0] for k, s in schema["properties"].items()}]
    if t == "array":
        return [[]]
    return ["x"]


def variant_bounds(codec: Codec, domain: str) -> dict[str, set[Any]]:
    out: dict[str, set[Any]] = {}
    for t in codec.tools_for(domain):
        for p, s in t.properties.items():
            for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
                if isinstance(s, Mapping) and k in s:
                    out.setdefault(p, set()).add(s[k])
    return out


def actions_for(catalog: Catalog, codec: Codec, product_limit: int = 48) -> list[NativeAction]:
    """Valid native actions covering every enum value (all enum combinations where few) and
    every numeric boundary of the native schema and of the variant (combined across arguments)."""
    out: dict[str, NativeAction] = {}
    bounds = {d.name: variant_bounds(codec, d.name) for d in catalog.domains}
    for t in catalog.tools:
        extra = bounds[t.domain]
        cand = {p: [v for v in interesting(s, extra.get(p, ())) if value_error(s, v, p) is None] or [None]
                for p, s in t.properties.items()}
        base = {p: v[0] for p, v in cand.items()}
        acts = [base, {p: v for p, v in base.items() if p in t.required}]
        acts += [{**base, p: v} for p, vals in cand.items() for v in vals]
        enums = [p for p, s in t.properties.items() if "enum" in s or s.get("type") == "boolean"]
        nums = [p for p, s in t.properties.items() if "enum" not in s and s.get("type") in ("integer", "number")]
        for group in (enums + nums, enums, nums):  # all combinations where few, else per kind
            n = 1
            for p in group:
                n *= len(cand[p])
            if group and n <= product_limit:
                acts += [{**base, **dict(zip(group, combo, strict=True))}
                         for combo in itertools.product(*(cand[p] for p in group))]
                if group == enums + nums:
                    break
        for args in acts:
            a = NativeAction(t.domain, t.name, args)
            if validate_action(catalog, a) is None:
                out.setdefault(a.key(), a)
    return list(out.values())


def assert_roundtrip(catalog: Catalog, codec: Codec, every_tool: bool = True) -> int:
    """decode(encode(a)) == [a] through a fresh session for every covering action; every variant
    tool is reached; names valid and unique per domain. Returns the number of actions checked."""
    acts = actions_for(catalog, codec)
    for a in acts:
        calls = codec.encode([a])
        session = codec.session(a.domain)
        got: list[NativeAction] = []
        for c in calls:
            d = session.decode(c)
            assert d.outcome is Outcome.NATIVE, (a, c, d.message)
            assert d.lenient is None
            got.extend(d.actions)
        assert got == [a], (a, calls, got)
    for dom in catalog.domains:
        names = [t.name for t in codec.tools_for(dom.name)]
        assert len(names) == len(set(names)), f"duplicate names in {dom.name}"
        assert all(NAME.match(n) for n in names), [n for n in names if not NAME.match(n)]
    if every_tool:  # every variant tool stands for a native action that encodes back to it
        for dom in catalog.domains:
            for t in codec.tools_for(dom.name):
                call = Call(t.name, sample_args(t.parameters))
                dec = codec.session(dom.name).decode(call)
                assert dec.outcome is Outcome.NATIVE and len(dec.actions) == 1, (call, dec.message)
                assert codec.encode(dec.actions) == [call], (call, dec.actions)
    return len(acts)


def sample_args(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Valid arguments for an object schema: the first enum value, a bound, or a plain value."""
    out: dict[str, Any] = {}
    for p, s in (schema.get("properties") or {}).items():
        if "enum" in s:
            out[p] = s["enum"][0]
        elif s.get("type") in ("integer", "number"):
            step = 1 if s.get("type") == "integer" else 0.5
            out[p] = (s["minimum"] if "minimum" in s else s["exclusiveMinimum"] + step if "exclusiveMinimum" in s
                      else s["maximum"] if "maximum" in s else s["exclusiveMaximum"] - step if "exclusiveMaximum" in s
                      else 1)
        elif s.get("type") == "boolean":
            out[p] = True
        elif s.get("type") == "object" and isinstance(s.get("properties"), Mapping):
            out[p] = sample_args(s)
        elif s.get("type") == "array":
            out[p] = []
        else:
            out[p] = "x"
    return out










def hand_catalog(tasks: tuple[Task, ...] = ()) -> Catalog:
    car = (
        tool("set_window", "car", {"position": E("front_left", "front_right", "rear_left", "rear_right"),
                                   "state": E("open", "closed", "vent"), "speed": E("slow", "fast")}, cls="window"),
        tool("set_window__open", "car", {"x": {"type": "string"}}, cls="window"),  # a name trap for the allocator
        tool("set_volume", "car", {"zone": E("kitchen", "living"),
                                   "volume": {"type": "integer", "minimum": 0, "maximum": 100}}, cls="volume"),
        tool("set_temperature", "car", {"temperature": {"type": "number", "minimum": 16, "maximum": 30},
                                        "eco": {"type": "boolean"}}, cls="climate"),
        tool("set_level", "car", {"level": {"type": "integer", "enum": [1, 2, 3]}, "note": {"type": "string"},
                                  "mode": E("a b", "A-B", "ü")}, required=["level"], cls="level"),
        tool("set_extent", "car", {"extent": {"type": "integer"}, "door": E("left", "right")}, cls="door"),
        tool("ping", "car", {}, cls="misc"),
    )
    home = (tool("set_volume", "home", {"volume": {"type": "integer", "minimum": 0, "maximum": 10}}, cls="volume"),)
    cat = Catalog("hand", (Domain("car", car), Domain("home", home)), tasks)
    validate_catalog(cat)
    return cat




# -- registry ------------------------------------------------------------------------------------

def test_registry_entries_name_the_paper() -> None:
    for name, paper in PAPER.items():
        v = get_variant(name)
        assert v.paper == paper
        assert v.steps and all(s["op"] == "split" for s in v.steps)
    assert "representative" in get_variant("fully_split").tags
    assert "representative" in get_variant("interval_split").tags
    if (TSS / "registry.json").is_file():
        names = {e["name"] for e in json.loads((TSS / "registry.json").read_text())["variants"]}
        assert set(PAPER.values()) <= names


# -- toolschemaspace --------------------------------------------------------------------------------

@needs_tss
@pytest.mark.parametrize("name", SPLIT_VARIANTS)
def test_roundtrip_toolschemaspace(tss: Catalog, name: str) -> None:
    codec = build_codec(tss, get_variant(name))
    assert assert_roundtrip(tss, codec) > 2000


@needs_tss
@pytest.mark.parametrize("target", [1.5, 2.9, 5.4])
def test_ladder_hits_target_ratio(tss: Catalog, target: float) -> None:
    codec = build_codec(tss, get_variant(f"split_enum_{str(target).replace('.', '_')}x"))
    ratio = codec.function_count() / len(tss.tools)
    assert abs(ratio - target) / target < 0.04, ratio
    for d in tss.domains:  # every domain is near its own target
        assert abs(len(codec.tools_for(d.name)) / len(d.tools) - target) / target < 0.2, d.name


@needs_tss
def test_ladder_is_monotone_and_below_fully_split(tss: Catalog) -> None:
    counts = [build_codec(tss, get_variant(n)).function_count()
              for n in ("split_enum_1_5x", "split_enum_2_9x", "split_enum_5_4x", "split_all_enums", "fully_split")]
    assert counts == sorted(counts) and len(set(counts)) == len(counts), counts


def _paper_spec(name: str) -> dict[str, list[str]]:
    ops = json.loads((TSS / "specs" / name).read_text())["ops"]
    return {f"{o['group']}::{o['tool']}": list(o["params"]) for o in ops}


@needs_tss
@pytest.mark.parametrize(("variant", "spec_file"), [("split_one_enum", "enum1.json"),
                                                     ("split_all_enums", "enumfull.json")])
def test_enum_selection_matches_the_papers_spec(tss: Catalog, variant: str, spec_file: str) -> None:
    """Computed from the catalog, the folds equal what the paper's spec files list."""
    paper = _paper_spec(spec_file)
    layer = build_codec(tss, get_variant(variant)).layers[0]
    assert isinstance(layer, Split)
    ours = {t.uid: layer.folds_of(t.uid) for t in tss.tools if layer.folds_of(t.uid)}
    assert ours == paper


@needs_tss
def test_interval_split_on_toolschemaspace_uses_gold_values(tss: Catalog) -> None:
    """Its integers have no range; the cut is the gold values' upper median, one per argument."""
    codec = build_codec(tss, get_variant("interval_split"))
    layer = codec.layers[0]
    assert isinstance(layer, Split)
    split = {t.uid: layer.cuts_of(t.uid) for t in tss.tools if layer.cuts_of(t.uid)}
    assert len(split) > 60 and all(len(c) == 1 for cuts in split.values() for c in cuts.values())
    assert codec.instructions() == [INTERVAL_INSTRUCTION]
    no_tasks = tss.with_tasks(())
    assert build_codec(no_tasks, get_variant("interval_split")).function_count() == len(tss.tools)


@needs_tss
def test_fully_split_names(tss: Catalog) -> None:
    codec = build_codec(tss, get_variant("fully_split"))
    names = {t.name for t in codec.tools_for("car_cabin")}
    assert "set_window__front_left__open__slow" in names
    assert codec.instructions() == [ENUM_INSTRUCTION]
    dish = [t for t in codec.tools if t.name.startswith("run_dishwasher")]
    assert any("__dry_true" in t.name for t in dish) and any("__dry_false" in t.name for t in dish)


# -- hand-written catalog -----------------------------------------------------------------------------

@pytest.mark.parametrize("step", [
    {"op": "split"}, {"op": "split", "method": "one_enum"}, {"op": "split", "method": "one_enum", "choose": "smallest"},
    {"op": "split", "method": "one_enum", "choose": "largest"}, {"op": "split", "method": "ladder", "ratio": 2},
    {"op": "split", "method": "interval"}, {"op": "split", "method": "interval", "cuts": {"set_volume.volume": [20, 80]}},
    {"op": "split", "method": "enum", "interval": True, "max_per_tool": 6},
    {"op": "split", "method": "enum", "select": {"set_window": ["state"], "home::set_volume": []}},
])
def test_roundtrip_hand_catalog(step: dict[str, Any]) -> None:
    cat = hand_catalog()
    assert_roundtrip(cat, build_codec(cat, spec(step)))


def test_fully_split_hand_catalog_schema() -> None:
    cat = hand_catalog()
    codec = build_codec(cat, spec({"op": "split"}))
    tools = {t.name: t for t in codec.tools_for("car")}
    t = tools["set_window__front_left__open__slow"]
    assert t.parameters["properties"] == {} and t.parameters["required"] == []
    assert "position=front_left" in t.description
    assert "set_window__open" in tools and tools["set_window__open"].properties == {"x": {"type": "string"}}
    assert {"set_level__level_1", "set_level__level_2", "set_level__level_3"} <= set(tools)
    assert set(tools["set_level__level_1"].properties) == {"note", "mode"}  # optional enum stays an argument
    assert {"set_temperature__eco_true", "set_temperature__eco_false"} <= set(tools)
    assert len(codec.tools_for("car")) == 4 * 3 * 2 + 1 + 2 + 2 + 3 + 2 + 1


def test_interval_names_bounds_and_midpoint() -> None:
    cat = hand_catalog()
    codec = build_codec(cat, spec({"op": "split", "method": "interval"}))
    tools = {t.name: t for t in codec.tools_for("car")}
    lo, hi = tools["set_volume__0_to_49"], tools["set_volume__50_to_100"]
    assert (lo.properties["volume"]["minimum"], lo.properties["volume"]["maximum"]) == (0, 49)
    assert (hi.properties["volume"]["minimum"], hi.properties["volume"]["maximum"]) == (50, 100)
    assert "zone" in lo.properties and "volume" in lo.required  # the value is still passed
    t_lo, t_hi = tools["set_temperature__16_to_23"], tools["set_temperature__23_to_30"]
    assert t_lo.properties["temperature"]["exclusiveMaximum"] == 23 and "maximum" not in t_lo.properties["temperature"]
    assert t_hi.properties["temperature"]["minimum"] == 23 and t_hi.properties["temperature"]["maximum"] == 30
    assert "set_extent" in tools  # no range, no tasks: left alone
    assert [t.name for t in codec.tools_for("home")] == ["set_volume__0_to_4", "set_volume__5_to_10"]


def test_interval_explicit_cuts_and_observed_values() -> None:
    cat = hand_catalog()
    codec = build_codec(cat, spec({"op": "split", "method": "interval",
                                   "cuts": {"car::set_volume.volume": [20, 80], "set_extent.extent": 5}}))
    names = [t.name for t in codec.tools_for("car")]
    assert {"set_volume__0_to_19", "set_volume__20_to_79", "set_volume__80_to_100",
            "set_extent__below_5", "set_extent__from_5"} <= set(names)
    assert [t.name for t in codec.tools_for("home")] == ["set_volume__0_to_4", "set_volume__5_to_10"]
    gold = [NativeAction("car", "set_extent", {"extent": v, "door": "left"}) for v in (10, 30, 30, 60)]
    with_tasks = hand_catalog(tuple(Task(f"t{i}", "car", "q", (a,)) for i, a in enumerate(gold)))
    codec = build_codec(with_tasks, spec({"op": "split", "method": "interval"}))
    assert {"set_extent__below_30", "set_extent__from_30"} <= {t.name for t in codec.tools_for("car")}
    assert_roundtrip(with_tasks, codec)
    off = build_codec(with_tasks, spec({"op": "split", "method": "interval", "cuts_from_tasks": False}))
    assert "set_extent" in {t.name for t in off.tools_for("car")}


def test_strict_rejects_and_lenient_repairs_intervals() -> None:
    cat = hand_catalog()
    codec = build_codec(cat, spec({"op": "split", "method": "interval"}))
    d = decode1(codec, "car", "set_volume__0_to_49", {"zone": "kitchen", "volume": 70})
    assert d.outcome is Outcome.REJECTION and d.rejection_kind is RejectionKind.INVALID_ARGUMENTS
    assert "volume" in d.message and "49" in d.message and not d.actions
    d = decode1(codec, "car", "set_volume__0_to_49", {"zone": "kitchen", "volume": 70}, "lenient")
    assert d.outcome is Outcome.NATIVE and d.lenient
    assert d.actions == (NativeAction("car", "set_volume", {"zone": "kitchen", "volume": 70}),)
    # real numbers: the cut belongs to the upper range
    d = decode1(codec, "car", "set_temperature__16_to_23", {"temperature": 23.0, "eco": True})
    assert d.outcome is Outcome.REJECTION and "23" in d.message
    d = decode1(codec, "car", "set_temperature__16_to_23", {"temperature": 23.0, "eco": True}, "lenient")
    assert d.actions == (NativeAction("car", "set_temperature", {"temperature": 23.0, "eco": True}),)
    # outside the native range: no range fits, lenient too
    d = decode1(codec, "car", "set_volume__50_to_100", {"zone": "kitchen", "volume": 170}, "lenient")
    assert d.outcome is Outcome.REJECTION and not d.actions
    # the unsplit name with its value (the codec's generic lower-level rule)
    d = decode1(codec, "car", "set_volume", {"zone": "living", "volume": 3}, "lenient")
    assert d.actions == (NativeAction("car", "set_volume", {"zone": "living", "volume": 3}),)


def test_strict_rejects_and_lenient_repairs_enum_splits() -> None:
    cat = hand_catalog()
    codec = build_codec(cat, spec({"op": "split"}))
    want = (NativeAction("car", "set_window", {"position": "rear_left", "state": "vent", "speed": "fast"}),)
    native = {"position": "rear_left", "state": "vent", "speed": "fast"}
    d = decode1(codec, "car", "set_window", native)
    assert d.rejection_kind is RejectionKind.UNKNOWN_TOOL and "set_window__rear_left__vent__fast" in d.message
    for name, args in [("set_window", native),                                           # unsplit name
                       ("set_window__rear_left", {"state": "vent", "speed": "fast"}),      # partial name
                       ("set_window__fast__vent__rear_left", {}),                          # other order
                       ("set_window__rear_left__vent__fast", {"state": "vent"}),           # repeated value
                       ("set_window__REAR_LEFT__vent", {"speed": "fast"})]:                # case
        assert decode1(codec, "car", name, args).outcome is Outcome.REJECTION, name
        d = decode1(codec, "car", name, args, "lenient")
        assert d.outcome is Outcome.NATIVE and d.actions == want and d.lenient, (name, d.message)
    for name, args in [("set_window__rear_left__vent__fast", {"state": "open"}),   # conflicts with the name
                       ("set_window__rear_left", {"state": "vent"}),               # speed unknown
                       ("set_window__rear_left__sideways", {"speed": "fast"})]:    # no such value
        d = decode1(codec, "car", name, args, "lenient")
        assert d.outcome is Outcome.REJECTION and not d.actions, name
    d = decode1(codec, "car", "set_level__level_2", {"level": 2, "mode": "a b"}, "lenient")
    assert d.actions == (NativeAction("car", "set_level", {"level": 2, "mode": "a b"}),)


def test_names_valid_unique_and_shortened() -> None:
    long_values = [f"value number {i} with a very long and very descriptive label: ok?" for i in range(3)]
    t = tool("a_rather_long_tool_name_for_testing_the_length_limit", "d",
             {"choice": {"type": "string", "enum": long_values}, "other": E("x y", "x-y", "x_y")})
    cat = Catalog("long", (Domain("d", (t,)),))
    codec = build_codec(cat, spec({"op": "split"}))
    names = [x.name for x in codec.tools]
    assert len(names) == 9 and len(set(names)) == 9 and all(NAME.match(n) for n in names)
    assert max(map(len, names)) == 64
    assert_roundtrip(cat, codec)
    again = build_codec(cat, spec({"op": "split"}))
    assert [x.to_openai() for x in again.tools] == [x.to_openai() for x in codec.tools]


def test_deterministic_and_seeded_ladder() -> None:
    cat = hand_catalog()
    a = build_codec(cat, spec({"op": "split", "method": "ladder", "ratio": 3}))
    b = build_codec(cat, spec({"op": "split", "method": "ladder", "ratio": 3}))
    assert json.dumps([t.to_openai() for t in a.tools]) == json.dumps([t.to_openai() for t in b.tools])


@pytest.mark.parametrize(("step", "match"), [
    ({"op": "split", "method": "halves"}, "unknown split method"),
    ({"op": "split", "method": "ladder"}, "ratio"),
    ({"op": "split", "method": "ladder", "ratio": 0.5}, "ratio"),
    ({"op": "split", "method": "interval", "cuts": {"set_volume.zone": [1]}}, "not numeric"),
    ({"op": "split", "method": "interval", "cuts": {"set_volume.volume": "high"}}, "numbers"),
    ({"op": "split", "select": {"set_window": ["speedy"]}}, "cannot fold"),
    ({"op": "split", "select": {"nope": ["x"]}}, "unknown tool"),
    ({"op": "split", "method": "one_enum", "choose": "random"}, "unknown choice"),
    ({"op": "split", "max_per_tool": 0}, "max_per_tool"),
])
def test_bad_parameters_are_refused(step: dict[str, Any], match: str) -> None:
    with pytest.raises(VariantError, match=match):
        build_codec(hand_catalog(), spec(step))


def test_composes_with_other_operators() -> None:
    cat = hand_catalog()
    for steps in ([{"op": "split"}, {"op": "strip"}], [{"op": "split", "method": "interval"}, {"op": "split"}],
                  [{"op": "strip"}, {"op": "split", "method": "ladder", "ratio": 1.5}]):
        assert_roundtrip(cat, build_codec(cat, spec(*steps)))


# -- property test over random small catalogs ---------------------------------------------------------

_VALUE = st.text(alphabet="abAB _-.é1", min_size=0, max_size=6)


@st.composite
def param_schema(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["enum", "int_enum", "bool", "int", "int_range", "num_range", "string"]))
    if kind == "enum":
        return {"type": "string", "enum": draw(st.lists(_VALUE, min_size=1, max_size=4, unique=True))}
    if kind == "int_enum":
        return {"type": "integer", "enum": draw(st.lists(st.integers(-3, 20), min_size=1, max_size=4, unique=True))}
    if kind == "bool":
        return {"type": "boolean"}
    if kind == "int":
        return {"type": "integer"}
    if kind == "int_range":
        lo = draw(st.integers(-50, 50))
        return {"type": "integer", "minimum": lo, "maximum": lo + draw(st.integers(0, 60))}
    if kind == "num_range":
        low = draw(st.floats(-10, 10, allow_nan=False).map(lambda x: round(x, 2)))
        return {"type": "number", "minimum": low, "maximum": low + draw(st.sampled_from([0.5, 1, 7.25, 100]))}
    return {"type": "string"}


@st.composite
def small_catalog(draw: st.DrawFn) -> Catalog:
    domains = []
    for d in range(draw(st.integers(1, 2))):
        names = draw(st.lists(st.from_regex(r"[a-z]{1,5}(_[a-z]{1,4})?", fullmatch=True), min_size=1, max_size=3,
                              unique=True))
        tools = []
        for n in names:
            pnames = draw(st.lists(st.from_regex(r"[a-z]{1,4}", fullmatch=True), max_size=3, unique=True))
            props = {p: draw(param_schema()) for p in pnames}
            req = [p for p in pnames if draw(st.booleans())]
            tools.append(tool(n, f"d{d}", props, req))
        domains.append(Domain(f"d{d}", tuple(tools)))
    cat = Catalog("random", tuple(domains))
    validate_catalog(cat)
    return cat


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cat=small_catalog(), step=st.sampled_from([
    {"op": "split"}, {"op": "split", "method": "one_enum"}, {"op": "split", "method": "ladder", "ratio": 1.5},
    {"op": "split", "method": "interval"}, {"op": "split", "interval": True, "max_per_tool": 8}]))
def test_property_roundtrip_random_catalogs(cat: Catalog, step: dict[str, Any]) -> None:
    codec = build_codec(cat, spec(step))
    assert assert_roundtrip(cat, codec) > 0


def test_split_of_a_union_dispatcher_keeps_the_matching_alternative() -> None:
    """Splitting a union-encoded merge by its discriminator folds ``operation`` into the name:
    each split tool keeps only its own alternative, without the folded argument, and every
    action still round-trips (found by the composition property test)."""
    from tests.support.catalogs import mini_catalog
    from toolbias.variants.verify import verify_codec

    catalog = mini_catalog()
    codec = build_codec(catalog, VariantSpec("union_split", ({"op": "merge", "encoding": "union"}, {"op": "split"})))
    for t in codec.tools:
        branches = t.parameters["oneOf"]
        assert len(branches) == 1
        assert "operation" not in branches[0]["properties"]
        assert "operation" not in branches[0].get("required", [])
    result = verify_codec(codec, catalog)
    assert result.ok, result.examples


@pytest.fixture(scope="module")
def tss() -> Catalog:
    return toolschemaspace_catalog()
