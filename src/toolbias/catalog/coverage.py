"""Coverage actions: for a native tool, actions whose arguments cover every enum value (of array
items and nested properties too), both booleans, defaults, every type of a type list and the
numeric boundaries (minimum, maximum, midpoint, each side of a cut point).
Verification round-trips them through a variant; importers find where a tool went with them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..base.canonical import canonical_json
from .model import NativeAction, Tool
from .validation import value_error

#: strings used for free-text arguments: a plain one and one with separators an operator might parse
STRING_SAMPLES = ("example", "Main St. #5 / ü::x")


def _numbers(schema: Mapping[str, Any], integer: bool, cuts: Iterable[float]) -> list[Any]:
    lo: Any = schema.get("minimum")
    hi: Any = schema.get("maximum")
    if isinstance(schema.get("exclusiveMinimum"), (int, float)):
        lo = schema["exclusiveMinimum"] + (1 if integer else 0.5)
    if isinstance(schema.get("exclusiveMaximum"), (int, float)):
        hi = schema["exclusiveMaximum"] - (1 if integer else 0.5)
    step = 1 if integer else 0.5
    values: list[float] = []
    if lo is not None:
        values.append(lo)
    if hi is not None:
        values.append(hi)
    if lo is not None and hi is not None:
        values.append((lo + hi) // 2 if integer else (lo + hi) / 2)
    if lo is None and hi is None:
        values.extend([0, 1] if integer else [0.0, 2.5])
    elif lo is None:
        values.append(hi - 10)
    elif hi is None:
        values.append(lo + 10)
    for c in cuts:  # a cut at a bound is no cut: its sides are the bound and the range
        if (lo is None or c > lo) and (hi is None or c < hi):
            values.extend([c - step, c, c + step])
    out: list[Any] = []
    for v in values:
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            continue
        if integer:
            if isinstance(v, float) and not v.is_integer():
                continue
            v = int(v)
        else:
            v = float(v)
        if v not in out:
            out.append(v)
    return out or [lo if lo is not None else 0]


def sample_values(schema: Mapping[str, Any], cuts: Iterable[float] = ()) -> list[Any]:
    """Values valid for ``schema`` that cover it: every enum value (also of array items and
    nested properties), both booleans, the numeric boundaries and cut points, the default,
    every type of a type list; arrays of each item sample, objects whose rows rotate through
    their properties' samples (and one with the required properties only). Every value is
    checked against the schema (``value_error``); the first is the plainest."""
    found = _candidates(schema, tuple(cuts))
    out: list[Any] = []
    seen: set[str] = set()
    for v in found:
        key = _exact_key(v)
        if key not in seen and value_error(schema, v, "value") is None:
            seen.add(key)
            out.append(v)
    return out or found[:1]


def _exact_key(v: Any) -> str:
    """Canonical JSON that keeps ``1``, ``1.0`` and ``true`` apart."""
    return canonical_json([type(v).__name__, v if not isinstance(v, (dict, list)) else
                           [_exact_key(x) for x in v] if isinstance(v, list) else
                           {k: _exact_key(x) for k, x in v.items()}])


def _candidates(schema: Mapping[str, Any], cuts: tuple[float, ...]) -> list[Any]:
    if not isinstance(schema, Mapping):
        return ["example"]
    if "const" in schema:
        return [schema["const"]]
    default = [schema["default"]] if "default" in schema else []
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return list(schema["enum"]) + default
    t = schema.get("type")
    if isinstance(t, list):  # every type of the list, null last
        out: list[Any] = []
        for x in sorted(t, key=lambda x: x == "null"):
            out.extend(_candidates({**schema, "type": x}, cuts))
        return out + default
    if t == "boolean":
        return [True, False] + default
    if t in ("integer", "number"):
        return _numbers(schema, t == "integer", cuts) + default
    if t == "array":
        return _arrays(schema, cuts) + default
    if t == "object" or "properties" in schema:
        return _objects(schema) + default
    if t == "null":
        return [None]
    if t == "string" or t is None:
        return _strings(schema) + default
    return ["example"] + default


def _strings(schema: Mapping[str, Any]) -> list[Any]:
    if schema.get("format") == "date":
        return ["2024-05-01"]
    if schema.get("format") == "date-time":
        return ["2024-05-01T10:30:00Z"]
    n = int(schema.get("minLength", 0) or 0)
    hi = schema.get("maxLength")
    out = [s if len(s) >= n else s + "x" * (n - len(s)) for s in STRING_SAMPLES]
    if hi is not None:
        out = [s[: int(hi)] for s in out]
    return out


def _arrays(schema: Mapping[str, Any], cuts: tuple[float, ...]) -> list[Any]:
    """One array per item sample (so every item enum value appears), of the smallest allowed
    length; the empty array last when it is allowed."""
    items = schema.get("items")
    samples = sample_values(items, cuts) if isinstance(items, Mapping) and items else ["example"]
    lo = int(schema.get("minItems", 0) or 0)
    hi = schema.get("maxItems")
    n = max(lo, 1) if hi is None else min(max(lo, 1), int(hi))
    if n == 0:
        return [[]]
    out = [[samples[(i + k) % len(samples)] for k in range(n)] for i in range(len(samples))]
    if lo == 0:
        out.append([])
    return out


def _objects(schema: Mapping[str, Any]) -> list[Any]:
    """Rows that rotate through every property's samples (all present), then the required
    properties only."""
    props: Mapping[str, Any] = schema.get("properties") or {}
    if not props:
        return [{}]
    samples = {k: sample_values(v) for k, v in props.items()}
    rows = max(len(v) for v in samples.values())
    out: list[Any] = [{k: vals[i % len(vals)] for k, vals in samples.items()} for i in range(rows)]
    required = [k for k in (schema.get("required") or []) if k in props]
    if len(required) < len(props):
        out.append({k: samples[k][0] for k in required})
    return out


def coverage_actions(tool: Tool, cuts: Mapping[str, Sequence[float]] | None = None,
                     values: Mapping[str, Sequence[Any]] | None = None) -> list[NativeAction]:
    """Actions of ``tool`` in which every sample value of every argument appears at least once:
    one with only required arguments, then rows that rotate through each argument's values
    with every argument present. ``values`` replaces the samples of some arguments (the values
    a variant can express at all, such as a resolver's fixed table)."""
    cuts = cuts or {}
    values = values or {}
    props = tool.properties
    samples = {p: list(values[p]) if values.get(p) else sample_values(s, cuts.get(p, ())) for p, s in props.items()}
    required = [p for p in tool.required if p in props]
    actions = [NativeAction(tool.domain, tool.name, {p: samples[p][0] for p in required})]
    seen = {actions[0].key()}
    rows = max((len(v) for v in samples.values()), default=0)
    for k in range(rows):
        a = NativeAction(tool.domain, tool.name, {p: vals[k % len(vals)] for p, vals in samples.items()})
        key = a.key()
        if key not in seen:
            seen.add(key)
            actions.append(a)
    return actions


__all__ = ["STRING_SAMPLES", "coverage_actions", "sample_values"]
