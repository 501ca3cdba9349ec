"""Reference resolution: an argument is passed as a reference id from a resolver call.

For each wrapped tool one argument (its *referenced* argument) no longer takes a
value but a reference id ``ref_xxxxxxxx``. Only ``resolve_<argument>(value)``
returns such ids; the id is a short hash of (scope, resolver, value), so it is
deterministic and ``encode`` is exact through a fresh session, but an id counts
only once a resolver returned it in the current session. A call with an id never
returned, or an id resolved for another argument, is rejected with
:attr:`FlagKind.BAD_REFERENCE`.

Which argument: ``params`` maps tool names (or ``domain::name`` uids) to the
argument to reference; tools not named fall back to ``select``:

* ``"auto"`` (default): the instance argument the tool's state ``effect`` targets,
  else its first required enum argument, else its first required string argument
  (the paper's artifact references free-string entity names such as events and
  contacts); merged dispatchers (an ``operation`` discriminator) are left alone;
* ``"enum"``: the first enum argument (required ones first);
* ``"none"``: only the tools named in ``params``.

One resolver serves every tool of a scope that references an argument of that
name when their value schemas agree (string enums are united); a tool whose
schema disagrees gets its own ``resolve_<tool>_<argument>``. Values are never
restricted beyond the native schema (a fixed directory of values, as in the
artifact's ``values`` lists, would make some native actions unreachable).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..catalog.model import Tool, canonical_json
from ..catalog.validation import value_error
from ..errors import VariantError
from .base import Call, Flag, FlagKind, Forward, Layer, Reject, RejectionKind, Reply, Step
from .transaction import InnerIndex, Namer, check_params, object_schema, scopes, select_tools

_SCALARS = ("string", "integer", "number", "boolean")
_NOISE = ("description", "title", "examples", "default")


def _bare(schema: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in schema.items() if k not in _NOISE}


def _is_scalar(schema: Mapping[str, Any]) -> bool:
    t = schema.get("type")
    return ("enum" in schema or t in _SCALARS) and "properties" not in schema


def is_discriminator(tool: Tool, param: str) -> bool:
    """True when ``param`` picks which other arguments apply (a merged dispatcher's
    ``operation``: its values prefix flat ``<op>::<arg>`` keys, name nested objects, or
    select a ``oneOf`` branch). Such an argument is no instance to refer to."""
    values = {str(v) for v in tool.properties.get(param, {}).get("enum", [])}
    if not values:
        return False
    if any(k in values or k.split("::")[0] in values for k in tool.properties if k != param):
        return True
    return any(key in tool.parameters for key in ("oneOf", "anyOf"))


def auto_param(tool: Tool, select: str) -> str | None:
    """The argument ``select`` picks for ``tool`` (see the module doc), or None."""
    if any(is_discriminator(tool, p) for p in tool.required):
        return None  # a dispatcher: its operations' arguments are not its own to refer to
    props = tool.properties
    order = list(tool.required) + [p for p in props if p not in tool.required]
    if select == "auto" and tool.effect:
        for target in tool.effect.get("target") or []:
            if target in props and _is_scalar(props[target]):
                return str(target)
    for p in order if select == "enum" else tool.required:
        if "enum" in props.get(p, {}) and _is_scalar(props[p]):
            return p
    if select == "auto":
        for p in tool.required:
            sub = props.get(p, {})
            if sub.get("type") == "string" and _is_scalar(sub):
                return p
    return None


@dataclass
class _Resolver:
    tool: Tool                 # the outer resolve_* tool
    param: str                 # argument name it resolves
    schema: dict[str, Any]     # value schema (bare)
    users: list[str] = field(default_factory=list)  # uids of inner tools that reference through it


@dataclass
class _RefState:
    #: reference id -> (resolver uid, value)
    refs: dict[str, tuple[str, Any]] = field(default_factory=dict)


def ref_id(scope: str, key: str, value: Any) -> str:
    return "ref_" + hashlib.sha256(canonical_json([scope, key, value]).encode()).hexdigest()[:8]


class Reference(Layer):
    """An argument becomes a reference id obtained from ``resolve_<argument>(value)``.

    Params: ``params`` ({tool: argument}), ``select`` (``auto``/``enum``/``none``),
    ``tools`` (``"all"`` or the tools ``select`` may apply to).
    """

    op = "reference"
    protocol: ClassVar[bool] = True
    instruction = ("Some arguments take a reference id instead of a value. First call the matching "
                   "resolve_<argument> tool with the value you mean, then pass the ref_... id it returns as "
                   "that argument. Only ids returned in this conversation are valid.")

    def __init__(self, inner: Sequence[Tool], params: Mapping[str, Any]) -> None:
        super().__init__(inner, params)
        check_params(self, ("params", "select", "tools"))
        select = str(self.params.get("select", "auto"))
        if select not in ("auto", "enum", "none"):
            raise VariantError(f"select must be 'auto', 'enum' or 'none', got {select!r}", where="operator 'reference'")
        explicit = self.params.get("params") or {}
        if not isinstance(explicit, Mapping):
            raise VariantError("'params' must map tool names to the argument to reference",
                               where="operator 'reference'", fix='write {"params": {"set_window": "position"}}')
        allowed = select_tools(self, self.inner)
        self._index = InnerIndex(self.inner)
        chosen: dict[str, str] = {}  # inner uid -> referenced argument
        used: set[str] = set()
        for t in self.inner:
            p = explicit.get(t.uid, explicit.get(t.name))
            if p is not None:
                used.update(k for k in (t.uid, t.name) if k in explicit)
                if p not in t.properties:
                    raise VariantError(f"tool '{t.name}' has no argument '{p}' to reference",
                                       where="operator 'reference'", fix=f"use one of: {', '.join(t.properties)}")
                chosen[t.uid] = str(p)
            elif select != "none" and t.uid in allowed:
                q = auto_param(t, select)
                if q is not None:
                    chosen[t.uid] = q
        unknown = sorted(set(map(str, explicit)) - used)
        if unknown:
            raise VariantError(f"'params' names unknown tool(s): {', '.join(unknown[:10])}",
                               where="operator 'reference'")
        self.referenced = chosen
        self._param_schema = {t.uid: dict(t.properties[chosen[t.uid]]) for t in self.inner if t.uid in chosen}
        namer = Namer()
        for t in self.inner:
            namer.claim(t.name, t.domain)  # every inner name stays
        # resolvers per scope: group referencing tools by argument name and value schema
        self._resolvers: dict[str, _Resolver] = {}          # resolver uid -> resolver
        self._resolver_of: dict[str, _Resolver] = {}        # inner uid -> resolver
        by_scope: dict[str, list[_Resolver]] = {}
        for scope in scopes(self.inner):
            groups: dict[str, list[Tool]] = {}
            for t in self.inner:
                if t.domain == scope and t.uid in chosen:
                    groups.setdefault(chosen[t.uid], []).append(t)
            made: list[_Resolver] = []
            for param, tools in groups.items():
                for schema, members in _value_schemas(param, tools):
                    base = f"resolve_{param}" if len(members) == len(tools) else f"resolve_{members[0].name}_{param}"
                    name = namer.claim(base, scope)
                    what = f"'{param}'" + ("" if len(members) == len(tools)
                                           else f" (as {', '.join(m.name for m in members)} take it)")
                    value_schema = dict(schema)
                    value_schema["description"] = f"The {param} value to refer to."
                    rtool = Tool(name, f"Return the reference id (ref_...) for a {what} value. Pass that id, "
                                       f"not the value, wherever {what} is asked for.",
                                 object_schema({"value": value_schema}, ["value"]), domain=scope, cls="reference")
                    r = _Resolver(rtool, param, schema, [m.uid for m in members])
                    self._resolvers[rtool.uid] = r
                    for m in members:
                        self._resolver_of[m.uid] = r
                    made.append(r)
            by_scope[scope] = made
        out: list[Tool] = []
        emitted: set[str] = set()
        for t in self.inner:
            if t.domain not in emitted:
                emitted.add(t.domain)
                out.extend(r.tool for r in by_scope.get(t.domain, []))
            if t.uid not in chosen:
                out.append(t)
                continue
            p, r = chosen[t.uid], self._resolver_of[t.uid]
            props = dict(t.properties)
            props[p] = {"type": "string",
                        "description": f"Reference id for {p} (ref_...), returned by {r.tool.name}."}
            params_ = dict(t.parameters)
            params_["properties"] = props
            out.append(Tool(t.name, t.description, params_, domain=t.domain, cls=t.cls, effect=t.effect))
        self.tools = tuple(out)

    # -- encoding -------------------------------------------------------------------
    def new_encode_state(self) -> Any:
        return _RefState()

    def encode(self, call: Call, domain: str, state: Any) -> list[Call]:
        inner = self._index.lookup(domain, call.name)
        if inner is None or inner.uid not in self.referenced:
            return [call]
        p = self.referenced[inner.uid]
        if p not in call.arguments:
            return [call]
        r = self._resolver_of[inner.uid]
        value = call.arguments[p]
        rid = ref_id(r.tool.domain, r.tool.name, value)
        out: list[Call] = []
        if rid not in state.refs:
            state.refs[rid] = (r.tool.uid, value)
            out.append(Call(r.tool.name, {"value": value}))
        args = dict(call.arguments)
        args[p] = rid
        out.append(Call(call.name, args))
        return out

    # -- decoding -------------------------------------------------------------------
    def new_state(self) -> Any:
        return _RefState()

    def decode(self, call: Call, tool: Tool, state: Any) -> Step:
        r = self._resolvers.get(tool.uid)
        if r is not None:
            value = call.arguments["value"]
            rid = ref_id(tool.domain, tool.name, value)
            state.refs[rid] = (tool.uid, value)
            return Reply({"reference": rid, "argument": r.param, "value": value})
        p = self.referenced.get(tool.uid)
        if p is None or p not in call.arguments:
            return Forward((call,))
        resolver = self._resolver_of[tool.uid]
        rid = call.arguments[p]
        entry = state.refs.get(rid) if isinstance(rid, str) else None
        if entry is None or entry[0] != resolver.tool.uid:
            why = ("was not returned by any resolver in this conversation" if entry is None
                   else f"refers to a value of another argument ({self._resolvers[entry[0]].tool.name})")
            return Reject(RejectionKind.PROTOCOL,
                          f"'{p}' of '{call.name}' takes a reference id, and {rid!r} {why}. Call "
                          f"{resolver.tool.name}(value=...) with the {p} you mean and pass the ref_... id it returns.",
                          (Flag(FlagKind.BAD_REFERENCE, f"{call.name}.{p}: {rid!r}"),))
        err = value_error(tool_schema := self._param_schema[tool.uid], entry[1], p)
        if err is not None:
            allowed = f" (allowed: {', '.join(map(repr, tool_schema['enum']))})" if "enum" in tool_schema else ""
            return Reject(RejectionKind.PROTOCOL,
                          f"{rid!r} refers to {entry[1]!r}, which '{call.name}' does not accept as {p}{allowed}. "
                          f"Resolve an accepted value with {resolver.tool.name}(value=...).",
                          (Flag(FlagKind.BAD_REFERENCE, f"{call.name}.{p}: {rid!r} -> {entry[1]!r}"),))
        args = dict(call.arguments)
        args[p] = entry[1]
        return Forward((Call(call.name, args),))


def _value_schemas(param: str, tools: list[Tool]) -> list[tuple[dict[str, Any], list[Tool]]]:
    """Value schemas for a referenced argument: one shared schema (string enums united) when
    the tools agree, else one per distinct schema."""
    bare = [_bare(t.properties[param]) for t in tools]
    if all(canonical_json(b) == canonical_json(bare[0]) for b in bare):
        return [(bare[0], tools)]
    if all(set(b) == {"type", "enum"} and b["type"] == "string" for b in bare):
        united: dict[Any, None] = {}
        for b in bare:
            united.update(dict.fromkeys(b["enum"]))
        return [({"type": "string", "enum": list(united)}, tools)]
    out: list[tuple[dict[str, Any], list[Tool]]] = []
    for b, t in zip(bare, tools, strict=True):
        for schema, members in out:
            if canonical_json(schema) == canonical_json(b):
                members.append(t)
                break
        else:
            out.append((b, [t]))
    return out
