"""Property test: verify's sample generator and every operator handle real-world JSON schema.

Random catalogs whose parameters include arrays of enumerated strings, arrays of objects,
nested objects with their own required lists, item enums, defaults, type lists and optional
parameters; every registered variant and every operator's default step must verify on each."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolbias.catalog.model import Catalog, Domain, Tool
from toolbias.catalog.validation import validate_catalog, value_error
from toolbias.operators import OPERATORS
from toolbias.variants import VariantSpec, registry
from toolbias.variants.verify import coverage_actions, sample_values, verify_variant

WORDS = ["alpha", "beta", "gamma", "delta", "north", "south", "red", "blue", "low", "high", "on", "off"]
words = st.sampled_from(WORDS)
described = st.fixed_dictionaries({}, optional={"description": st.sampled_from(["a value", "the target"])})


def _with(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    return {**base, **extra}


@st.composite
def strings(draw: st.DrawFn) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string", **draw(described)}
    if draw(st.booleans()):
        schema["enum"] = draw(st.lists(words, min_size=1, max_size=4, unique=True))
        if draw(st.booleans()):
            schema["default"] = draw(st.sampled_from(schema["enum"]))
    return schema


@st.composite
def numbers(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["integer", "number"]))
    schema: dict[str, Any] = {"type": kind, **draw(described)}
    if draw(st.booleans()):
        lo = draw(st.integers(-50, 50))
        schema["minimum"] = lo
        if draw(st.booleans()):
            schema["maximum"] = lo + draw(st.integers(1, 100))
        if draw(st.booleans()):
            schema["default"] = lo
    return schema


leaves = st.one_of(strings(), numbers(), st.just({"type": "boolean"}),
                   st.just({"type": ["string", "null"]}), st.just({}))  # {}: BFCL's "any"


@st.composite
def objects(draw: st.DrawFn, inner: st.SearchStrategy[dict[str, Any]]) -> dict[str, Any]:
    names = draw(st.lists(st.sampled_from(["mode", "level", "zone", "tags", "when", "unit"]), min_size=1,
                          max_size=3, unique=True))
    props = {n: draw(inner) for n in names}
    schema: dict[str, Any] = {"type": "object", "properties": props, **draw(described)}
    required = [n for n in names if draw(st.booleans())]
    if required:
        schema["required"] = required
    return schema


@st.composite
def arrays(draw: st.DrawFn, inner: st.SearchStrategy[dict[str, Any]]) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "array", "items": draw(inner), **draw(described)}
    if draw(st.booleans()):
        schema["minItems"] = draw(st.integers(1, 2))
    return schema


values = st.recursive(leaves, lambda inner: st.one_of(arrays(inner), objects(inner)), max_leaves=4)


@st.composite
def catalogs(draw: st.DrawFn) -> Catalog:
    domains = []
    for d in range(draw(st.integers(1, 2))):
        tools = []
        for i in range(draw(st.integers(1, 3))):
            params = draw(objects(values))
            params.pop("description", None)
            cls = draw(st.sampled_from(["light", "door", "fan"]))
            tools.append(Tool(f"set_{cls}_{i}", f"tool {i}", params, domain=f"d{d}", cls=cls))
        domains.append(Domain(f"d{d}", tuple(tools)))
    return Catalog("hypothesis", tuple(domains))


SPECS = list(registry().values()) + [VariantSpec(f"{op}_default", ({"op": op},)) for op in sorted(OPERATORS)]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values)
def test_sample_values_are_valid_and_cover_enums(schema: dict[str, Any]) -> None:
    samples = sample_values(schema)
    assert samples and all(value_error(schema, v, "x") is None for v in samples)
    for enum in _enums(schema):  # every enum value, at any depth, appears in some sample
        for e in enum:
            assert any(_contains(v, e) for v in samples), (e, samples)


def _enums(schema: Any) -> list[list[Any]]:
    if not isinstance(schema, dict):
        return []
    found = [schema["enum"]] if isinstance(schema.get("enum"), list) else []
    for sub in list((schema.get("properties") or {}).values()) + [schema.get("items")]:
        found += _enums(sub)
    return found


def _contains(value: Any, target: Any) -> bool:
    if value == target and type(value) is type(target):
        return True
    if isinstance(value, dict):
        return any(_contains(v, target) for v in value.values())
    if isinstance(value, list):
        return any(_contains(v, target) for v in value)
    return False


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(catalogs())
def test_every_variant_verifies_on_real_world_schema_shapes(catalog: Catalog) -> None:
    validate_catalog(catalog)
    for tool in catalog.tools:
        assert all(not tool.required or set(tool.required) <= set(a.arguments) for a in coverage_actions(tool))
    cache: dict[Any, Any] = {}
    for spec in SPECS:
        result = verify_variant(catalog, spec, probes=1, cache=cache)
        assert result.ok, (spec.name, result.examples[:2], [t.parameters for t in catalog.tools])
