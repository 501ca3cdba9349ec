"""Coverage actions: for a native tool, actions whose arguments cover every enum value, both
booleans and the numeric boundaries (minimum, maximum, midpoint, each side of a cut point).
Verification round-trips them through a variant; importers find where a tool went with them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .model import NativeAction, Tool

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
    """Values valid for ``schema`` covering its enum, booleans and numeric boundaries."""
    if "const" in schema:
        return [schema["const"]]
    if "enum" in schema:
        return list(schema["enum"])
    t = schema.get("type")
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), t[0] if t else None)
    if t == "boolean":
        return [True, False]
    if t in ("integer", "number"):
        return _numbers(schema, t == "integer", cuts)
    if t == "array":
        item = schema.get("items") if isinstance(schema.get("items"), Mapping) else {}
        first = sample_values(item)[0] if item else "example"
        n = max(int(schema.get("minItems", 1) or 0), 1)
        if schema.get("maxItems") is not None:
            n = min(n, int(schema["maxItems"]))
        return [[first] * n]
    if t == "object" or "properties" in schema:
        props: Mapping[str, Any] = schema.get("properties") or {}
        return [{k: sample_values(v)[0] for k, v in props.items()}]
    if t == "null":
        return [None]
    if t == "string" or t is None:
        n = int(schema.get("minLength", 0) or 0)
        hi = schema.get("maxLength")
        if schema.get("format") == "date":
            return ["2024-05-01"]
        out = [s if len(s) >= n else s + "x" * (n - len(s)) for s in STRING_SAMPLES]
        if hi is not None:
            out = [s[: int(hi)] for s in out]
        return list(dict.fromkeys(out))
    return ["example"]


def coverage_actions(tool: Tool, cuts: Mapping[str, Sequence[float]] | None = None) -> list[NativeAction]:
    """Actions of ``tool`` in which every sample value of every argument appears at least once:
    one with only required arguments, then rows that rotate through each argument's values
    with every argument present."""
    cuts = cuts or {}
    props = tool.properties
    samples = {p: sample_values(s, cuts.get(p, ())) for p, s in props.items()}
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
