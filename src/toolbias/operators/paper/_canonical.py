"""The artifact's canonical form of an OpenAI tool (its ``schema_adapter._canonicalize`` and
``_to_openai``), which its proxy and its tau2 adapter build every variant from: ``$ref``/``allOf``/
``anyOf`` flattened, and a string argument whose description names a closed set of values given that
set as its ``enum``; and a variant tool sent back in OpenAI form without ``optional`` markers."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

_OPEN_SET = re.compile(r"\betc\b|\.\.\.|e\.g\.|such as|for example|for instance", re.I)
_QUOTED = re.compile(r"""["']([^"']+)["']""")
_POSSIBLE_VALUES = re.compile(r"possible values[^.]*", re.I)
_OPTIONS = re.compile(r"options?\b[^:.]{0,15}:\s*([^.]+)", re.I)
_PARENTHESES = re.compile(r"\(([^)]*)\)")
_LISTED = re.compile(r"/|,|\bor\b|\band\b", re.I)
_ALTERNATIVES = re.compile(r"/|\bor\b", re.I)
_ALNUM = re.compile(r"[A-Za-z0-9]")


def _words(text: str) -> list[str]:
    """Short single-word items of a ``a, b or c`` / ``a/b`` list."""
    items = (piece.strip().strip("'\"").strip() for piece in _LISTED.split(text))
    return [w for w in items if w and len(w) <= 20 and " " not in w]


def _closed_set(items: Sequence[str]) -> list[str] | None:
    """Two or more distinct values, each with a letter or digit and at most 30 characters; else None."""
    values: list[str] = []
    for raw in items:
        v = raw.strip().strip("'\"").strip()
        if not v:
            continue
        if len(v) > 30 or not _ALNUM.search(v):
            return None
        if v not in values:
            values.append(v)
    return values if len(values) >= 2 else None


def prose_enum(schema: Mapping[str, Any]) -> list[str] | None:
    """The closed value set a string argument's description names (``possible values 'a', 'b'``,
    ``options: a, b``, ``(a/b)``), or None where it names none or leaves the set open (``e.g.``)."""
    if schema.get("type") != "string" or "enum" in schema:
        return None
    text = str(schema.get("description", ""))
    if _OPEN_SET.search(text):
        return None
    found = _POSSIBLE_VALUES.search(text)
    if found and (values := _closed_set(_QUOTED.findall(found.group(0)))):
        return values
    found = _OPTIONS.search(text)
    if found and (values := _closed_set(_words(found.group(1)))):
        return values
    for inside in _PARENTHESES.findall(text):
        values = _closed_set(_QUOTED.findall(inside))
        if values:
            return values
        if _ALTERNATIVES.search(inside) and (values := _closed_set(_words(inside))):
            return values
    return None


def _flatten(schema: Any, defs: Mapping[str, Any]) -> Any:
    """One argument's schema with ``$ref`` (into ``$defs``) inlined, ``allOf`` merged and ``anyOf``
    read as its first branch that is not null; keys written on the argument itself win."""
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    ref = out.pop("$ref", None)
    if ref and ref.startswith("#/$defs/"):
        out = {**defs.get(ref.split("/")[-1], {}), **out}
    if "allOf" in out:
        merged: dict[str, Any] = {}
        for part in out.pop("allOf"):
            merged.update(_flatten(part, defs))
        out = {**merged, **out}
    if "anyOf" in out:
        branches = [b for b in out.pop("anyOf") if not (isinstance(b, dict) and b.get("type") == "null")]
        if branches:
            out = {**_flatten(branches[0], defs), **out}
    return out


def canonical(tool: Mapping[str, Any]) -> dict[str, Any]:
    """A request's tool (``{"type": "function", "function": {...}}`` or the function itself) in the
    artifact's canonical form: name, description, and parameters with only type, properties
    (flattened, prose value sets lifted into ``enum``) and required."""
    fn = tool.get("function", tool)
    params = fn.get("parameters") or {}
    defs = params.get("$defs", {}) or {}
    props = {}
    for name, schema in (params.get("properties") or {}).items():
        flat = _flatten(schema, defs)
        values = prose_enum(flat) if isinstance(flat, dict) else None
        props[name] = {**flat, "enum": values} if values else flat
    return {"name": fn["name"], "description": fn.get("description", "") or "",
            "parameters": {"type": "object", "properties": props, "required": list(params.get("required", []) or [])}}


def openai_tool(shape: Mapping[str, Any]) -> dict[str, Any]:
    """A variant tool as the proxy sends it: ``optional`` markers dropped from its arguments."""
    params = shape["parameters"]
    props = {p: {k: v for k, v in s.items() if k != "optional"} for p, s in params.get("properties", {}).items()}
    return {"type": "function", "function": {
        "name": shape["name"], "description": shape.get("description", ""),
        "parameters": {"type": "object", "properties": props, "required": list(params.get("required", []))}}}


__all__ = ["canonical", "openai_tool", "prose_enum"]
