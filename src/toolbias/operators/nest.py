"""Nest arguments into objects, and its inverse, flatten.

``{"op": "nest", ...}``:

* ``method="pack"`` (default; the paper's *nested args*): a tool's arguments after the
  first ``keep`` (default 1) go into one object argument ``into`` (default ``options``)
  when there are at least ``min_pack`` (default 2) of them: ``set_window(position,
  state, speed)`` becomes ``set_window(position, options={state, speed})``.
* ``method="groups"``: ``groups={"tool" | "domain::tool" | "*": {"object": [args]}}``
  groups by a given mapping (``"*"``: every tool that has all of an object's
  arguments; a tool's own entry replaces ``"*"``).

An object is required when any of its members is; an optional object left out means
none of its members is given.

``{"op": "flatten", "sep": "__"}``: object arguments become flat keys ``outer__inner``
(recursively), e.g. BFCL's ``budget: {min, max}`` -> ``budget__min``, ``budget__max``.
An object is flattened when the flat keys say unambiguously whether it is present:
it is required (all the way up), or it has a required member. Open objects
(``additionalProperties``) and optional objects with only optional members stay whole.

Lenient repair (both): flat arguments where nested are expected, nested where flat
are expected, a mixture of the two, or dotted keys (``budget.min``), when every key
has one place and no two values conflict.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..catalog.model import Tool
from ..errors import VariantError
from .base import Call, Forward, Layer, Reject, RejectionKind, Step, outer_tool
from .rename import ToolIndex

NEST_INSTRUCTION = ("Some arguments are grouped into nested objects. Put each argument inside the object that "
                    "the tool's parameter schema defines for it.")
FLATTEN_INSTRUCTION = ("Nested object arguments are flattened: pass each field of an object as its own top-level "
                       "argument, named as in the tool's parameter schema (object, '__', field).")


def _int(params: Mapping[str, Any], key: str, default: int, minimum: int, where: str) -> int:
    v = params.get(key, default)
    if not isinstance(v, int) or isinstance(v, bool) or v < minimum:
        raise VariantError(f"'{key}' must be an integer >= {minimum}, got {v!r}", where=where)
    return v


P = TypeVar("P")


def _plan_of(index: ToolIndex, plans: Mapping[str, P], domain: str, name: str) -> P | None:
    """The plan of the inner tool a call name stands for (as the codec resolves names), if any."""
    t = index.find(domain, name)
    return plans.get(t.uid) if t is not None else None


@dataclass
class _NestPlan:
    groups: dict[str, list[str]]                      # object -> members, in parameter order
    member_of: dict[str, str] = field(default_factory=dict)
    inner_order: tuple[str, ...] = ()
    outer_order: tuple[str, ...] = ()
    required_groups: frozenset[str] = frozenset()


class Nest(Layer):
    op = "nest"
    PARAMS = ("method", "into", "keep", "min_pack", "groups")
    instruction = NEST_INSTRUCTION

    METHODS = ("pack", "groups")

    def __init__(self, inner: Sequence[Tool], params: Mapping[str, Any]) -> None:
        super().__init__(inner, params)
        method = self.chosen_method(params)
        self._index = ToolIndex(self.inner)
        self._plans: dict[str, _NestPlan] = {}  # tool uid (same at both levels) -> plan
        chosen = self._pack(params) if method == "pack" else self._groups(params)
        tools = []
        for t in self.inner:
            groups = chosen.get(t.uid)
            if not groups:
                tools.append(t)
                continue
            plan, schema = self._nest_tool(t, groups)
            self._plans[t.uid] = plan
            tools.append(outer_tool(t, parameters=schema))
        self.tools = tuple(tools)

    def _pack(self, params: Mapping[str, Any]) -> dict[str, dict[str, list[str]]]:
        into = str(params.get("into", "options"))
        keep = _int(params, "keep", 1, 0, "nest step")
        min_pack = _int(params, "min_pack", 2, 1, "nest step")
        if not into:
            raise VariantError("'into' must be a non-empty argument name", where="nest step")
        out: dict[str, dict[str, list[str]]] = {}
        for t in self.inner:
            names = list(t.properties)
            members = names[keep:]
            if len(members) < min_pack:
                continue
            name, i = into, 2
            while name in names[:keep]:
                name, i = f"{into}_{i}", i + 1
            out[t.uid] = {name: members}
        return out

    def _groups(self, params: Mapping[str, Any]) -> dict[str, dict[str, list[str]]]:
        raw = params.get("groups")
        if not isinstance(raw, Mapping) or not raw:
            raise VariantError("method 'groups' needs 'groups': {tool: {object: [arguments]}}", where="nest step",
                               fix='e.g. {"op": "nest", "method": "groups", "groups": {"*": {"options": ["state", "speed"]}}}')
        for key, spec in raw.items():
            if not isinstance(spec, Mapping) or not all(isinstance(m, list) and m for m in spec.values()):
                raise VariantError(f"groups for '{key}' must map object names to non-empty argument lists",
                                   where="nest step")
        out: dict[str, dict[str, list[str]]] = {}
        used: set[str] = set()
        for t in self.inner:
            key = t.uid if t.uid in raw else t.name if t.name in raw else None
            explicit = key is not None
            spec = raw[key] if key is not None else raw.get("*")
            if spec is None:
                continue
            if key is not None:
                used.add(key)
            groups: dict[str, list[str]] = {}
            taken: set[str] = set()
            for obj, members in spec.items():
                if any(m not in t.properties for m in members):
                    if explicit:
                        missing = [m for m in members if m not in t.properties]
                        raise VariantError(f"'{t.name}' has no argument(s) {', '.join(map(repr, missing))}",
                                           where="nest step (groups)", fix=f"its arguments: {', '.join(t.properties)}")
                    continue
                if taken & set(members) or len(set(members)) != len(members):
                    raise VariantError(f"an argument of '{t.name}' is in two groups", where="nest step (groups)")
                taken |= set(members)
                groups[str(obj)] = [p for p in t.properties if p in members]
            rest = [p for p in t.properties if p not in taken]
            clash = [g for g in groups if g in rest or not g]
            if clash:
                raise VariantError(f"object name(s) {', '.join(map(repr, clash))} clash with arguments of '{t.name}'",
                                   where="nest step (groups)", fix="choose other object names")
            if groups:
                out[t.uid] = groups
        unknown = [k for k in raw if k != "*" and k not in used]
        if unknown:
            raise VariantError(f"'groups' names unknown tool(s): {', '.join(unknown)}", where="nest step")
        return out

    @staticmethod
    def _nest_tool(t: Tool, groups: Mapping[str, list[str]]) -> tuple[_NestPlan, dict[str, Any]]:
        member_of = {m: g for g, ms in groups.items() for m in ms}
        req = set(t.required)
        props: dict[str, Any] = {}
        for p, s in t.properties.items():
            g = member_of.get(p)
            if g is None:
                props[p] = s
            elif g not in props:
                members = groups[g]
                props[g] = {
                    "type": "object",
                    "description": f"Arguments {', '.join(members)}.",
                    "properties": {m: t.properties[m] for m in members},
                    "required": [m for m in members if m in req],
                }
        required_groups = frozenset(g for g, ms in groups.items() if any(m in req for m in ms))
        required = [p for p in props if (p in groups and p in required_groups) or (p not in groups and p in req)]
        schema = {k: v for k, v in t.parameters.items() if k not in ("properties", "required")}
        schema["properties"] = props
        schema["required"] = required
        plan = _NestPlan(dict(groups), member_of, tuple(t.properties), tuple(props), required_groups)
        return plan, schema

    # -- codec interface ------------------------------------------------------------------
    def encode(self, call: Call, domain: str, state: Any) -> list[Call]:
        plan = _plan_of(self._index, self._plans, domain, call.name)
        if plan is None:
            return [call]
        return [Call(call.name, self._nested(plan, call.arguments))]

    @staticmethod
    def _nested(plan: _NestPlan, flat: Mapping[str, Any]) -> dict[str, Any]:
        top: dict[str, Any] = {}
        for k, v in flat.items():
            g = plan.member_of.get(k)
            if g is None:
                top[k] = v
            else:
                top.setdefault(g, {})[k] = v
        for g in plan.required_groups:
            top.setdefault(g, {})
        return {k: top[k] for k in plan.outer_order if k in top} | {k: v for k, v in top.items()
                                                                    if k not in plan.outer_order}

    def decode(self, call: Call, tool: Tool, state: Any) -> Step:
        plan = self._plans.get(tool.uid)
        if plan is None:
            return Forward((call,))
        flat: dict[str, Any] = {}
        for k, v in call.arguments.items():
            if k in plan.groups and isinstance(v, Mapping):
                flat.update(v)
            else:
                flat[k] = v
        args = {k: flat[k] for k in plan.inner_order if k in flat}
        return Forward((Call(call.name, args),))

    def repair(self, call: Call, domain: str) -> Call | None:
        plan = _plan_of(self._index, self._plans, domain, call.name)
        if plan is None:
            return None
        flat: dict[str, Any] = {}
        for k, v in call.arguments.items():
            items = v.items() if k in plan.groups and isinstance(v, Mapping) else [(k, v)]
            for kk, vv in items:
                if kk in plan.groups or kk not in plan.inner_order or (kk in flat and flat[kk] != vv):
                    return None
                flat[kk] = vv
        return Call(call.name, self._nested(plan, flat))


# -- flatten ------------------------------------------------------------------------------------


def _flattenable(schema: Any) -> bool:
    return (isinstance(schema, Mapping) and schema.get("type") == "object"
            and isinstance(schema.get("properties"), Mapping) and bool(schema["properties"])
            and schema.get("additionalProperties", False) is False)


@dataclass
class _Node:
    always: bool                       # present whenever the call is (required all the way up)
    required: list[str]                # required member keys
    flat_prefix: str                   # e.g. "budget__"


@dataclass
class _FlatPlan:
    leaves: dict[str, tuple[str, ...]] = field(default_factory=dict)    # flat key -> path
    leaf_of: dict[tuple[str, ...], str] = field(default_factory=dict)   # path -> flat key
    nodes: dict[tuple[str, ...], _Node] = field(default_factory=dict)   # flattened objects, parents first
    inner_order: tuple[str, ...] = ()


class Flatten(Layer):
    op = "flatten"
    PARAMS = ("sep",)
    instruction = FLATTEN_INSTRUCTION

    def __init__(self, inner: Sequence[Tool], params: Mapping[str, Any]) -> None:
        super().__init__(inner, params)
        self.sep = str(params.get("sep", "__"))
        if not self.sep:
            raise VariantError("'sep' must be a non-empty string", where="flatten step")
        self._index = ToolIndex(self.inner)
        self._plans: dict[str, _FlatPlan] = {}
        tools = []
        for t in self.inner:
            if not any(_flattenable(s) for s in t.properties.values()):
                tools.append(t)
                continue
            plan = _FlatPlan(inner_order=tuple(t.properties))
            taken: set[str] = set(t.properties)  # top-level arguments keep their names
            required: list[str] = []
            props = self._walk(t.properties, set(t.required), (), "", True, plan, taken, required)
            if not plan.nodes:
                tools.append(t)
                continue
            schema = {k: v for k, v in t.parameters.items() if k not in ("properties", "required")}
            schema["properties"] = props
            schema["required"] = required
            self._plans[t.uid] = plan
            tools.append(outer_tool(t, parameters=schema))
        self.tools = tuple(tools)

    def _walk(self, props: Mapping[str, Any], required: set[str], path: tuple[str, ...], prefix: str, always: bool,
              plan: _FlatPlan, taken: set[str], req_out: list[str]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for p, s in props.items():
            here = (*path, p)
            is_req = p in required
            if _flattenable(s) and ((always and is_req) or bool(s.get("required"))):
                child_always = always and is_req
                sub_req = [r for r in s.get("required") or [] if r in s["properties"]]
                plan.nodes[here] = _Node(child_always, sub_req, prefix + p + self.sep)
                out.update(self._walk(s["properties"], set(sub_req), here, prefix + p + self.sep, child_always,
                                      plan, taken, req_out))
                continue
            name, i = prefix + p, 2
            while path and name in taken:
                name, i = f"{prefix}{p}_{i}", i + 1
            taken.add(name)
            plan.leaves[name] = here
            plan.leaf_of[here] = name
            out[name] = s
            if always and is_req:
                req_out.append(name)
        return out

    # -- codec interface ------------------------------------------------------------------
    def encode(self, call: Call, domain: str, state: Any) -> list[Call]:
        plan = _plan_of(self._index, self._plans, domain, call.name)
        if plan is None:
            return [call]
        out: dict[str, Any] = {}
        try:
            self._flat(plan, call.arguments, (), out)
        except KeyError:
            return [call]
        return [Call(call.name, out)]

    @staticmethod
    def _flat(plan: _FlatPlan, value: Mapping[str, Any], path: tuple[str, ...], out: dict[str, Any]) -> None:
        for k, v in value.items():
            here = (*path, k)
            if here in plan.nodes and isinstance(v, Mapping):
                Flatten._flat(plan, v, here, out)
            elif here in plan.leaf_of:
                out[plan.leaf_of[here]] = v
            elif not path:
                out[k] = v  # unknown top-level key: left for the schema to reject
            else:
                raise KeyError(k)

    def decode(self, call: Call, tool: Tool, state: Any) -> Step:
        plan = self._plans.get(tool.uid)
        if plan is None:
            return Forward((call,))
        native: dict[str, Any] = {}
        for k, v in call.arguments.items():
            path = plan.leaves.get(k)
            if path is None:
                native[k] = v
                continue
            d = native
            for seg in path[:-1]:
                d = d.setdefault(seg, {})
            d[path[-1]] = v
        for path, node in plan.nodes.items():  # parents first: objects that are always there
            if node.always:
                d = native
                for seg in path:
                    d = d.setdefault(seg, {})
        for path, node in plan.nodes.items():
            obj: Any = native
            for seg in path[:-1]:
                obj = obj.get(seg) if isinstance(obj, dict) else None
            if not isinstance(obj, dict):
                continue
            member = obj.get(path[-1])
            if isinstance(member, dict):
                missing = [r for r in node.required if r not in member]
                if missing:
                    names = [plan.leaf_of.get((*path, r), node.flat_prefix + r + self.sep + "*") for r in missing]
                    return Reject(RejectionKind.INVALID_ARGUMENTS,
                                  f"Invalid arguments for '{call.name}': {', '.join(map(repr, names))} required when "
                                  f"any '{node.flat_prefix}*' argument is given")
        args = {k: native[k] for k in plan.inner_order if k in native}
        return Forward((Call(call.name, args),))

    def repair(self, call: Call, domain: str) -> Call | None:
        plan = _plan_of(self._index, self._plans, domain, call.name)
        if plan is None:
            return None
        native: dict[str, Any] = {}
        for k, v in call.arguments.items():
            path = plan.leaves.get(k)
            if path is None and "." in k and tuple(k.split(".")) in plan.leaf_of:
                path = tuple(k.split("."))
            if path is None and (k,) in plan.nodes and isinstance(v, Mapping):
                value: Any = v
                path = (k,)
            elif path is None:
                return None
            else:
                value = v
            if not _merge_at(native, path, value):
                return None
        out: dict[str, Any] = {}
        try:
            self._flat(plan, native, (), out)
        except KeyError:
            return None
        return Call(call.name, out)


def _merge_at(root: dict[str, Any], path: tuple[str, ...], value: Any) -> bool:
    """Put ``value`` at ``path`` in ``root``, merging objects; False on a conflicting value."""
    d = root
    for seg in path[:-1]:
        nxt = d.setdefault(seg, {})
        if not isinstance(nxt, dict):
            return False
        d = nxt
    key = path[-1]
    if key not in d:
        d[key] = dict(value) if isinstance(value, Mapping) else value
        return True
    if isinstance(d[key], dict) and isinstance(value, Mapping):
        return all(_merge_at(d[key], (k,), v) for k, v in value.items())
    return bool(d[key] == value)
