"""The tool shapes of the schema-bias paper's artifact, as plain JSON objects.

Each function returns a tool as the artifact shows it: ``{"name", "description",
"parameters"}`` with every key, description text and property order as there, so a
rendered catalog is JSON-equal to the artifact's (``benchmarks/synthetic/data/schemas``).
Written from the artifact's documented behaviour and its rendered files; nothing here is
imported from it.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Mapping, Sequence
from typing import Any

JSON = Any
Shape = dict[str, Any]

#: the description of a dispatcher's ``operation`` argument
OPERATION_TEXT = "Which operation to perform."
_NON_ALNUM = re.compile(r"[^0-9A-Za-z]+")


def shape(name: str, description: str, parameters: Mapping[str, JSON]) -> Shape:
    return {"name": name, "description": description, "parameters": parameters}


def props_of(tool: Mapping[str, JSON]) -> dict[str, JSON]:
    props: dict[str, JSON] = tool["parameters"].get("properties", {}) or {}
    return props


def required_of(tool: Mapping[str, JSON]) -> list[str]:
    return list(tool["parameters"].get("required", []) or [])


def enumerable(schema: Mapping[str, JSON]) -> bool:
    return "enum" in schema or schema.get("type") == "boolean"


def values_of(schema: Mapping[str, JSON]) -> list[JSON]:
    """An enumerable argument's values: its enum, or both booleans."""
    if "enum" in schema:
        return list(schema["enum"])
    return [True, False] if schema.get("type") == "boolean" else []


def suffix_token(value: JSON) -> str:
    """A value as a name suffix: booleans lower-case, runs of other characters one ``_``,
    lower-cased; ``x`` when nothing is left."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return _NON_ALNUM.sub("_", str(value)).strip("_").lower() or "x"


def handle(tool: str, param: str, value: JSON) -> str:
    """The opaque handle of a referenced value: ``h_`` and 8 hex digits of a SHA-1."""
    return "h_" + hashlib.sha1(f"{tool}::{param}::{value}".encode()).hexdigest()[:8]


def opaque_name(domain: str, tool: str) -> str:
    """The artifact's opaque rename rule (``s_obf``): ``fn_`` and 6 hex digits of a SHA-1."""
    return "fn_" + hashlib.sha1(f"{domain}:{tool}".encode()).hexdigest()[:6]


# -- merge: one dispatcher over several operations ---------------------------------------

def _operations(members: Sequence[Mapping[str, JSON]]) -> tuple[list[str], str]:
    names = [str(m["name"]) for m in members]
    return names, ", ".join(names)


def flat_dispatcher(members: Sequence[Mapping[str, JSON]], name: str) -> Shape:
    """``operation`` plus every member argument as ``<op>::<arg>`` (marked ``optional``)."""
    names, listing = _operations(members)
    props: dict[str, JSON] = {"operation": {"type": "string", "enum": names, "description": OPERATION_TEXT}}
    for m in members:
        for p, s in props_of(m).items():
            copy = dict(s)
            copy["optional"] = True
            copy["description"] = f"[{m['name']}] " + s.get("description", "")
            props[f"{m['name']}::{p}"] = copy
    text = (f"Dispatch entry point handling ONLY these {len(names)} operations: {listing}. "
            "Pick `operation`, then supply that operation's namespaced arguments.")
    return shape(name, text, {"type": "object", "properties": props, "required": ["operation"]})


def nested_dispatcher(members: Sequence[Mapping[str, JSON]], name: str) -> Shape:
    """``operation`` plus one ``arguments`` object holding every member argument name once."""
    names, listing = _operations(members)
    shared: dict[str, JSON] = {}
    for m in members:
        for p, s in props_of(m).items():
            if p not in shared:
                copy = dict(s)
                copy["description"] = f"[{m['name']}] " + s.get("description", "")
                shared[p] = copy
    text = (f"Dispatch entry point handling ONLY these {len(names)} operations: {listing}. Set `operation`, "
            "then put that operation's own arguments inside `arguments`. Do not namespace argument names and "
            "do not include arguments for any other operation.")
    arguments = {"type": "object",
                 "description": "Arguments for the selected operation only, using that operation's original "
                                "parameter names.",
                 "properties": shared, "additionalProperties": False}
    return shape(name, text, {"type": "object",
                              "properties": {"operation": {"type": "string", "enum": names,
                                                           "description": OPERATION_TEXT},
                                             "arguments": arguments},
                              "required": ["operation", "arguments"]})


def union_dispatcher(members: Sequence[Mapping[str, JSON]], name: str) -> Shape:
    """One optional object per member operation (no ``operation``, no ``oneOf``)."""
    names, listing = _operations(members)
    props: dict[str, JSON] = {}
    for m in members:
        props[str(m["name"])] = {
            "type": "object",
            "description": (f"Arguments for `{m['name']}` only. Provide this object for this operation and omit "
                            f"every other operation object. {m.get('description', '')}").strip(),
            "properties": {k: dict(v) for k, v in props_of(m).items()},
            "required": required_of(m),
            "additionalProperties": False,
        }
    text = (f"Dispatch entry point handling ONLY these {len(names)} operations: {listing}. "
            "Provide exactly one operation object and leave the others unset.")
    return shape(name, text, {"type": "object", "properties": props, "required": []})


DISPATCHERS = {"flat": flat_dispatcher, "nested": nested_dispatcher, "union": union_dispatcher}


# -- split: values folded into names -----------------------------------------------------

def baked_tools(tool: Mapping[str, JSON], baked: Sequence[str]) -> list[tuple[Shape, dict[str, JSON]]]:
    """One tool per combination of the ``baked`` arguments' values (the last varies fastest),
    named ``<tool>__<arg>_<value>...``, with the fixed values it stands for. No ``baked``: the
    tool itself, its parameters rebuilt as ``{type, properties, required}``."""
    props = props_of(tool)
    rest = {p: dict(s) for p, s in props.items() if p not in baked}
    rest_required = [r for r in required_of(tool) if r not in baked]
    combos: list[tuple[JSON, ...]] = [()]
    for p in baked:
        combos = [c + (v,) for c in combos for v in values_of(props[p])]
    out = []
    for combo in combos:
        fixed = dict(zip(baked, combo, strict=True))
        name = str(tool["name"]) + "".join(f"__{p}_{suffix_token(v)}" for p, v in fixed.items())
        text = str(tool.get("description", ""))
        if baked:
            text = (text + " (fixed: " + ", ".join(f"{p}={v}" for p, v in fixed.items()) + ")").strip()
        out.append((shape(name, text, {"type": "object", "properties": dict(rest), "required": list(rest_required)}),
                    fixed))
    return out


Interval = tuple[str, float | None, float | None]


def intervals(cuts: Sequence[float], labels: Sequence[str] | None = None) -> list[Interval]:
    """Cut points as ``(label, lo, hi)`` ranges, ``lo`` inclusive and ``hi`` exclusive:
    ``lt_<c1>``, ``<c1>_to_<c2>``, ..., ``ge_<ck>`` unless ``labels`` name them."""
    edges: list[float | None] = [None, *sorted(cuts), None]
    out: list[Interval] = []
    for i, (lo, hi) in enumerate(zip(edges, edges[1:], strict=False)):
        if labels and i < len(labels):
            label = labels[i]
        elif lo is None:
            label = f"lt_{suffix_token(hi)}"
        elif hi is None:
            label = f"ge_{suffix_token(lo)}"
        else:
            label = f"{suffix_token(lo)}_to_{suffix_token(hi)}"
        out.append((label, lo, hi))
    return out


def in_interval(value: JSON, lo: float | None, hi: float | None) -> bool:
    """Whether ``value``, read as a number (``"80"`` counts), lies in ``[lo, hi)``."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return False
    return (lo is None or number >= lo) and (hi is None or number < hi)


def bound_text(value: float | None, missing: str) -> str:
    return missing if value is None else str(value)


def range_text(param: str, lo: float | None, hi: float | None) -> str:
    return f"{param} in [{bound_text(lo, '-inf')}, {bound_text(hi, 'inf')})"


# -- per-tool surface operators ------------------------------------------------------------

def packed(tool: Mapping[str, JSON], packs: Sequence[tuple[str, Sequence[str]]]) -> tuple[Shape, dict[str, list[str]]]:
    """``arg_lower``: each ``(into, params)`` moves those arguments into one object argument."""
    props = {k: dict(v) for k, v in props_of(tool).items()}
    required = required_of(tool)
    groups: dict[str, list[str]] = {}
    for into, params in packs:
        inner = {p: props.pop(p) for p in params if p in props}
        if not inner:
            continue
        inner_required = [p for p in params if p in required]
        required = [r for r in required if r not in inner]
        props[into] = {"type": "object", "properties": inner, "required": inner_required,
                       "description": f"Grouped arguments: {', '.join(inner)}."}
        if inner_required:
            required.append(into)
        groups[into] = list(inner)
    return shape(str(tool["name"]), str(tool.get("description", "")),
                 {"type": "object", "properties": props, "required": required}), groups


def resolver_tool(tool: str, param: str) -> Shape:
    return shape(f"resolve_{tool}__{param}",
                 f"Look up the {param} for `{tool}` by name/description and return an opaque handle. "
                 f"Call this FIRST, then pass the returned handle to `{tool}`.",
                 {"type": "object",
                  "properties": {"query": {"type": "string", "description": f"The {param} as mentioned by the user."}},
                  "required": ["query"]})


def referenced(tool: Mapping[str, JSON], params: Sequence[str]) -> tuple[Shape, dict[str, str]]:
    """``indirect``: each argument becomes ``<arg>_ref`` (appended last), a handle from its
    resolver; returns the tool and ``{ref argument: native argument}``."""
    props = {k: dict(v) for k, v in props_of(tool).items()}
    required = required_of(tool)
    refs: dict[str, str] = {}
    for p in params:
        if p not in props:
            continue
        ref = f"{p}_ref"
        props[ref] = {"type": "string",
                      "description": f"Opaque handle for {p}, returned by `resolve_{tool['name']}__{p}`. "
                                     f"Do NOT pass the raw {p} value."}
        del props[p]
        required = [ref if r == p else r for r in required]
        refs[ref] = p
    return shape(str(tool["name"]), str(tool.get("description", "")),
                 {"type": "object", "properties": props, "required": required}), refs


def stripped(tool: Mapping[str, JSON]) -> Shape:
    """``strip_desc``: no tool description, no argument descriptions (nested ones too)."""
    def clean(props: Mapping[str, JSON]) -> dict[str, JSON]:
        out = {}
        for k, v in props.items():
            v = {kk: vv for kk, vv in v.items() if kk != "description"}
            if v.get("properties"):
                v["properties"] = clean(v["properties"])
            out[k] = v
        return out
    params = dict(tool["parameters"])
    params["properties"] = clean(params.get("properties", {}) or {})
    return shape(str(tool["name"]), "", params)


def shuffled(tool: Mapping[str, JSON], seed: int) -> Shape:
    """``shuffle_params``: the properties in the order ``random.Random`` gives under the seed
    ``seed * 1000003 + sum of the name's code points``; ``required`` follows."""
    items = list(props_of(tool).items())
    random.Random(seed * 1000003 + sum(map(ord, str(tool["name"])))).shuffle(items)
    required = set(required_of(tool))
    params = dict(tool["parameters"])
    params["properties"] = dict(items)
    params["required"] = [p for p, _ in items if p in required]
    return shape(str(tool["name"]), str(tool.get("description", "")), params)


def transaction_tools(tool: Mapping[str, JSON]) -> list[tuple[Shape, str, str | None]]:
    """``curry``: ``begin_<f>``, one ``set_<f>__<arg>`` per argument, ``commit_<f>``; each with
    its role (``begin``/``set``/``commit``) and argument."""
    f = str(tool["name"])
    txn = {"type": "string", "description": f"Transaction id returned by `begin_{f}`."}
    out: list[tuple[Shape, str, str | None]] = [(shape(
        f"begin_{f}",
        f"Start a `{f}` transaction. Returns a transaction id. Then set each argument with the set_ functions "
        f"and finish with `commit_{f}`. {tool.get('description', '')}",
        {"type": "object", "properties": {}, "required": []}), "begin", None)]
    for p, s in props_of(tool).items():
        out.append((shape(f"set_{f}__{p}", f"Set `{p}` on an open `{f}` transaction. {s.get('description', '')}",
                          {"type": "object", "properties": {"txn_id": dict(txn), p: dict(s)},
                           "required": ["txn_id", p]}), "set", p))
    out.append((shape(f"commit_{f}", f"Commit the open `{f}` transaction. Nothing happens until this is called.",
                      {"type": "object", "properties": {"txn_id": dict(txn)}, "required": ["txn_id"]}),
                "commit", None))
    return out


def without_markers(tool: Mapping[str, JSON]) -> Shape:
    """The tool as the artifact's agentic runner sends it: top-level ``optional`` markers
    dropped and the parameters rebuilt as ``{type: object, properties, required}``."""
    params = tool["parameters"]
    props = {p: {k: v for k, v in s.items() if k != "optional"} for p, s in (params.get("properties") or {}).items()}
    return shape(str(tool["name"]), str(tool.get("description", "") or ""),
                 {"type": "object", "properties": props, "required": list(params.get("required", []) or [])})


__all__ = ["DISPATCHERS", "Interval", "Shape", "baked_tools", "enumerable", "flat_dispatcher", "handle",
           "in_interval", "intervals", "nested_dispatcher", "opaque_name", "packed", "props_of", "range_text",
           "referenced", "required_of", "resolver_tool", "shuffled", "stripped", "suffix_token",
           "transaction_tools", "union_dispatcher", "values_of", "without_markers"]
