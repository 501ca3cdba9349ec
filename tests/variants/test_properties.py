"""Property tests: every operator (and compositions) over random catalogs and random actions.

Generic over ``toolbias.operators.OPERATORS``: whatever operators are installed when the
tests run are covered, each with its default parameters plus the extra methods listed in
``METHODS`` that its current version accepts.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.support.catalogs import mini_catalog
from toolbias import Call, Catalog, VariantError, VariantSpec, build_codec, validate_action, validate_catalog
from toolbias.catalog.model import Domain, NativeAction, Tool
from toolbias.operators import OPERATORS
from toolbias.variants.codec import Codec, Outcome

#: extra methods per operator (kept only if the installed operator builds them)
METHODS: dict[str, list[dict[str, Any]]] = {
    "merge": [{"groups": "class"}, {"encoding": "nested"}, {"encoding": "union"}, {"encoding": "mixed"},
              {"scope": "catalog", "groups": "class"}, {"groups": "random", "group_size": 2, "seed": 1},
              {"groups": "class", "ratio": 0.5}],
    "split": [{"method": "interval"}, {"method": "one_enum"}, {"method": "ladder", "ratio": 1.5}],
    "rename": [{"method": "opaque"}, {"scope": "catalog"}],
    "reorder": [{"seed": 7}],
    "transaction": [{"writes": "single"}],
    "reference": [{"select": "enum"}],
}


def _buildable(op: str, params: Mapping[str, Any]) -> bool:
    try:
        build_codec(mini_catalog(), VariantSpec("probe", ({"op": op, **params},)))
    except VariantError:
        return False
    return True


STEPS: list[dict[str, Any]] = [{"op": op} for op in sorted(OPERATORS)]
STEPS += [{"op": op, **p} for op, ps in METHODS.items() if op in OPERATORS for p in ps if _buildable(op, p)]
STEP_IDS = [",".join(f"{k}={v}" for k, v in s.items()) for s in STEPS]
PROTOCOL = {op for op, cls in OPERATORS.items() if getattr(cls, "protocol", False)}
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                          HealthCheck.data_too_large])

# -- random catalogs -----------------------------------------------------------------------

#: names that collide with what operators add (dispatchers, protocol tools) on purpose
NAME_POOL = ["set_window", "set_seat", "get_status", "play", "begin", "commit", "execute", "get_tool_schema",
             "resolve_mode", "write_play", "set_light", "open", "x", "f_00", "set_window__front"]
CLASS_POOL = ["window", "seat", "media", "light", ""]
PARAM_POOL = ["mode", "level", "target", "speed", "name", "on", "value", "handle", "operation", "options", "p_0"]
WORD = st.text(alphabet=string.ascii_lowercase + "_", min_size=1, max_size=6).filter(lambda s: s.strip("_") != "")


@st.composite
def param_schema(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["enum", "string", "integer", "number", "boolean", "int_enum"]))
    if kind == "enum":
        return {"type": "string", "enum": draw(st.lists(WORD, min_size=1, max_size=4, unique=True))}
    if kind == "int_enum":
        return {"type": "integer", "enum": draw(st.lists(st.integers(-3, 40), min_size=1, max_size=4, unique=True))}
    if kind == "integer":
        lo = draw(st.integers(-50, 50))
        return {"type": "integer", "minimum": lo, "maximum": lo + draw(st.integers(1, 200))}
    if kind == "number":
        lo = draw(st.integers(-10, 10))
        return {"type": "number", "minimum": lo, "maximum": lo + draw(st.integers(1, 100))}
    if kind == "boolean":
        return {"type": "boolean"}
    return {"type": "string", "description": "free text"}


@st.composite
def tool(draw: st.DrawFn, name: str, domain: str) -> Tool:
    names = draw(st.lists(st.sampled_from(PARAM_POOL), max_size=4, unique=True))
    props = {p: draw(param_schema()) for p in names}
    required = [p for p in names if draw(st.booleans()) or draw(st.booleans())]
    cls = draw(st.sampled_from(CLASS_POOL))
    effect = {"kind": "set", "target": [required[0]]} if required and draw(st.booleans()) else None
    return Tool(name, f"{name.replace('_', ' ')} tool", {"type": "object", "properties": props,
                                                          "required": required},
                domain=domain, cls=cls, effect=effect)


@st.composite
def catalogs(draw: st.DrawFn) -> Catalog:
    domains = []
    for d in draw(st.lists(st.sampled_from(["home", "car", "tv"]), min_size=1, max_size=3, unique=True)):
        names = draw(st.lists(st.sampled_from(NAME_POOL), min_size=1, max_size=5, unique=True))
        domains.append(Domain(d, tuple(draw(tool(n, d)) for n in names)))
    cat = Catalog("random", tuple(domains))
    validate_catalog(cat)
    return cat


def value_for(draw: st.DrawFn, schema: Mapping[str, Any]) -> Any:
    if "enum" in schema:
        return draw(st.sampled_from(schema["enum"]))
    t = schema.get("type")
    if t == "boolean":
        return draw(st.booleans())
    if t == "integer":
        return draw(st.integers(schema["minimum"], schema["maximum"]))
    if t == "number":
        return draw(st.one_of(st.integers(schema["minimum"], schema["maximum"]),
                              st.floats(schema["minimum"], schema["maximum"], allow_nan=False)))
    return draw(st.text(max_size=8))


@st.composite
def action_for(draw: st.DrawFn, t: Tool) -> NativeAction:
    args = {}
    for p, s in t.properties.items():
        if p in t.required or draw(st.booleans()):
            args[p] = value_for(draw, s)
    return NativeAction(t.domain, t.name, args)


@st.composite
def episode(draw: st.DrawFn) -> tuple[Catalog, str, list[NativeAction]]:
    cat = draw(catalogs())
    d = draw(st.sampled_from(cat.domains))
    tools = draw(st.lists(st.sampled_from(d.tools), min_size=1, max_size=4))
    return cat, d.name, [draw(action_for(t)) for t in tools]


# -- the properties ------------------------------------------------------------------------

def check_round_trip(codec: Codec, domain: str, actions: list[NativeAction]) -> None:
    for a in actions:
        assert validate_action(codec.catalog, a) is None
    calls = codec.encode(actions)
    runs = []
    for _ in range(2):  # two fresh sessions: decoding is deterministic
        s = codec.session(domain)
        decoded = [s.decode(c) for c in calls]
        runs.append(([d.to_dict() for d in decoded], [f.to_dict() for f in s.finish()]))
        rejected = [d for d in decoded if d.outcome is Outcome.REJECTION]
        assert not rejected, rejected[0].message
        got = [a for d in decoded for a in d.actions]
        assert [a.key() for a in got] == [a.key() for a in actions]
        assert s.finish() == []
    assert runs[0] == runs[1]


def _build(cat: Catalog, steps: list[dict[str, Any]]) -> Codec:
    return build_codec(cat, VariantSpec("+".join(str(s["op"]) for s in steps), tuple(steps)))


@pytest.mark.parametrize("step", STEPS, ids=STEP_IDS)
@SETTINGS
@given(data=episode())
def test_every_operator_round_trips_random_actions(step: dict[str, Any],
                                                   data: tuple[Catalog, str, list[NativeAction]]) -> None:
    cat, domain, actions = data
    check_round_trip(_build(cat, [step]), domain, actions)


@pytest.mark.parametrize("step", STEPS, ids=STEP_IDS)
@SETTINGS
@given(data=episode(), junk=st.data())
def test_every_operator_accepts_only_native_actions(step: dict[str, Any],
                                                    data: tuple[Catalog, str, list[NativeAction]],
                                                    junk: st.DataObject) -> None:
    """Perturbed and random calls: never an exception, never an invalid native action, and a
    rejection never carries actions."""
    cat, domain, actions = data
    codec = _build(cat, [step])
    calls = codec.encode(actions)
    names = [t.name for t in codec.tools_for(domain)] + [t.name for t in cat.domain(domain).tools]
    for _ in range(6):
        i = junk.draw(st.integers(0, len(calls) - 1))
        base = calls[i]
        args = dict(base.arguments)
        choice = junk.draw(st.sampled_from(["drop", "value", "name", "extra", "swap"]))
        if choice == "drop" and args:
            args.pop(junk.draw(st.sampled_from(sorted(args))))
        elif choice == "value" and args:
            key = junk.draw(st.sampled_from(sorted(args)))
            args[key] = junk.draw(st.one_of(st.integers(-10**6, 10**6), st.text(max_size=5), st.booleans(),
                                            st.none(), st.lists(st.integers(), max_size=2)))
        elif choice == "extra":
            args[junk.draw(WORD)] = junk.draw(st.integers())
        elif choice == "swap":
            args = dict(calls[junk.draw(st.integers(0, len(calls) - 1))].arguments)
        name = junk.draw(st.sampled_from(names)) if choice == "name" else base.name
        seq = list(calls[:i]) + [Call(name, args)] + list(calls[i + 1:])
        for control in ("strict", "lenient"):
            s = codec.session(domain, control)
            for call in seq:
                d = s.decode(call)
                if d.outcome is not Outcome.NATIVE:
                    assert not d.actions, (d.outcome, d.call)
                for a in d.actions:
                    assert a.domain == domain
                    assert validate_action(cat, a) is None, (a, d.call)
            s.finish()


PAIRS = [(a, b) for a in STEPS if a["op"] not in PROTOCOL for b in STEPS if a is not b]


@settings(SETTINGS, max_examples=80)
@given(data=episode(), pair=st.sampled_from(PAIRS) if PAIRS else st.nothing())
def test_compositions_round_trip(pair: tuple[dict[str, Any], dict[str, Any]],
                                 data: tuple[Catalog, str, list[NativeAction]]) -> None:
    """Two steps stacked (a protocol only on top); a composition an operator refuses is fine."""
    cat, domain, actions = data
    try:
        codec = _build(cat, list(pair))
    except VariantError:
        assume(False)
        return
    check_round_trip(codec, domain, actions)


@SETTINGS
@given(data=episode(), protocol=st.sampled_from(sorted(PROTOCOL)) if PROTOCOL else st.nothing())
def test_protocol_over_two_single_call_operators(protocol: str,
                                                 data: tuple[Catalog, str, list[NativeAction]]) -> None:
    cat, domain, actions = data
    below = [s for s in ({"op": "merge"}, {"op": "split"}, {"op": "rename"}, {"op": "nest"}, {"op": "strip"})
             if s["op"] in OPERATORS][:2]
    try:
        codec = _build(cat, [*below, {"op": protocol}])
    except VariantError:
        assume(False)
        return
    check_round_trip(codec, domain, actions)
