"""Self-contained parameter schemas: ``$defs`` references written in place.

Tools generated from pydantic models (tau2-bench's, most agent frameworks') describe
nested arguments as ``{"$ref": "#/$defs/Model"}``; toolbias's operators and checks work on
self-contained schemas, so such a schema is inlined before it is loaded or rewritten.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import CatalogError

#: the deepest chain of references followed (a recursive model has no inline form)
MAX_DEPTH = 32
#: the most schema nodes one parameter schema may expand to (definitions that share
#: sub-definitions level after level grow exponentially when written in place)
MAX_NODES = 100_000
#: the deepest nesting of objects and lists a parameter schema may have: deeper ones (a hostile or
#: broken tool list, a few hundred levels) would exhaust Python's recursion in every schema walk
MAX_NESTING = 100


def check_nesting(schema: Any, where: str | None = None) -> None:
    """Refuse ``schema`` if its objects and lists nest deeper than :data:`MAX_NESTING` (checked
    without recursion, before any recursive walk of it)."""
    stack: list[tuple[Any, int]] = [(schema, 1)]
    while stack:
        node, level = stack.pop()
        if level > MAX_NESTING:
            raise CatalogError(f"the schema nests objects and lists deeper than {MAX_NESTING} levels",
                               where=where, fix="give the tool a flatter parameter schema")
        children = node.values() if isinstance(node, dict) else node
        stack.extend((c, level + 1) for c in children if isinstance(c, (dict, list)))


def inline_refs(schema: Any) -> Any:
    """``schema`` with its local ``$ref`` references replaced by the definitions they name
    and its ``$defs`` / ``definitions`` removed; ``X | dict`` alternatives become ``X`` and
    ``X | None`` properties a type list (see :func:`_optional_properties`)."""
    check_nesting(schema)
    return _inline(schema, None, 0, [MAX_NODES])


def _inline(schema: Any, defs: Mapping[str, Any] | None, depth: int, budget: list[int]) -> Any:
    if depth > MAX_DEPTH:
        raise CatalogError(f"schema references nest deeper than {MAX_DEPTH} levels (recursive model?)",
                           fix="give the tool a schema without recursive references")
    if isinstance(schema, (dict, list)):
        budget[0] -= 1
        if budget[0] < 0:
            raise CatalogError(f"schema references expand to more than {MAX_NODES:,} schema nodes when written "
                               "in place", fix="give the tool a flatter schema (fewer shared nested definitions)")
    if isinstance(schema, dict):
        if defs is None:
            defs = schema.get("$defs") or schema.get("definitions") or {}
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.split("/")[-1] in defs:
            target = _inline(defs[ref.split("/")[-1]], defs, depth + 1, budget)
            extra = {k: _inline(v, defs, depth, budget) for k, v in schema.items() if k != "$ref"}
            return {**target, **extra}
        out = {k: _inline(v, defs, depth, budget) for k, v in schema.items() if k not in ("$defs", "definitions")}
        return _optional_properties(_typed_alternative(out))
    if isinstance(schema, list):
        return [_inline(v, defs, depth, budget) for v in schema]
    return schema


def _typed_alternative(schema: dict[str, Any]) -> dict[str, Any]:
    """``anyOf: [<a model>, {"type": "object", "additionalProperties": true}]`` (tau2's
    ``FlightInfo | dict`` arguments) as the model's schema: the typed alternative is the one
    the gold uses and the one a model can be shown."""
    alternatives = schema.get("anyOf")
    if not isinstance(alternatives, list) or len(alternatives) != 2:
        return schema
    loose = [a for a in alternatives if a == {"additionalProperties": True, "type": "object"}]
    typed = [a for a in alternatives if a not in loose and isinstance(a, dict) and a.get("properties")]
    if len(loose) != 1 or len(typed) != 1:
        return schema
    rest = {k: v for k, v in schema.items() if k != "anyOf"}
    return {**typed[0], **rest}


def _optional_properties(schema: dict[str, Any]) -> dict[str, Any]:
    """Properties written ``anyOf: [X, {"type": "null"}]`` (pydantic's ``Optional[X]``) in a form
    toolbias rewrites: ``X`` with ``null`` added to its type list. An optional enum (not
    required) becomes ``X`` alone: its null is its absence, and an enum list stays one type. A
    required nullable enum keeps its ``anyOf``, which loading then refuses by name."""
    props = schema.get("properties")
    if not isinstance(props, dict):
        return schema
    required: list[Any] = schema["required"] if isinstance(schema.get("required"), list) else []
    out = {}
    for name, prop in props.items():
        other = _nullable_alternative(prop)
        if other is None:
            out[name] = prop
            continue
        rest = {k: v for k, v in prop.items() if k != "anyOf"}
        if "enum" in other:
            out[name] = prop if name in required else {**other, **rest}
            continue
        types = other["type"] if isinstance(other["type"], list) else [other["type"]]
        out[name] = {**other, **rest, "type": [*types, "null"] if "null" not in types else types}
    return {**schema, "properties": out}


def _nullable_alternative(prop: Any) -> dict[str, Any] | None:
    """X of ``{"anyOf": [X, {"type": "null"}]}`` when X names its type; None otherwise."""
    alternatives = prop.get("anyOf") if isinstance(prop, dict) else None
    if not isinstance(alternatives, list) or len(alternatives) != 2 or {"type": "null"} not in alternatives:
        return None
    other = alternatives[1 - alternatives.index({"type": "null"})]
    if not isinstance(other, dict) or not isinstance(other.get("type"), (str, list)) or "anyOf" in other:
        return None
    return other

