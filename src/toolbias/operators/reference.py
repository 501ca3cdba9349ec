"""Reference resolution: an argument is passed as a reference id from a resolver call.

For each wrapped tool one argument (its *referenced* argument) no longer takes a
value but a reference id ``ref_xxxxxxxx``. Only ``resolve_<argument>(value)``
returns such ids; the id is a short hash of (scope, resolver, value), so it is
deterministic and ``encode`` is exact through a fresh session, but an id counts
only once a resolver returned it in the current session. A call with an id never
returned, or an id resolved for another argument, is rejected with
:attr:`FlagKind.BAD_REFERENCE`.

Which argument: ``params`` maps tool names (or ``domain::name`` uids) to the
argument (or a list of arguments) to reference; tools not named fall back to ``select``:

* ``"auto"`` (default): the instance argument the tool's state ``effect`` targets,
  else its first required enum argument, else its first required string argument
  (the paper's artifact references free-string entity names such as events and
  contacts). A merged dispatcher's ``operation`` discriminator is never referenced:
  a flat dispatcher (``<op>::<arg>`` keys) gets one referenced key per operation
  (its first enum, else string argument); nested and union dispatchers are left alone;
* ``"enum"``: the first enum argument (required ones first);
* ``"free_text"``: every string argument without ``enum`` (never a discriminator);
* ``"none"``: only the tools named in ``params``.

Resolvers (step parameter ``method``):

* ``"per_function"`` -- the paper's construction (its ``indirect`` op, Figure 2's
  *reference resolution* row): one ``resolve_<f>__<arg>(query)`` per native function
  ``f`` and referenced argument, returning an opaque handle. With ``select:
  "free_text"`` every free-text argument (a string without ``enum``) is referenced, so
  domains without free strings get no resolver (the artifact: 168 -> 211 functions).
  ``origin`` maps a tool (name or uid) to the function named in its resolver, so tools an
  earlier step made of one native function (an enum split) share its resolver.
* ``"shared"`` (default, toolbias's own design) -- described next.

One resolver serves every tool of a scope that references an argument of that
name when their value schemas agree (string enums are united); a tool whose
schema disagrees gets its own ``resolve_<tool>_<argument>``. Values are never
restricted beyond the native schema (a fixed directory of values, as in the
artifact's ``values`` lists, would make some native actions unreachable).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..base.canonical import canonical_json, sha256_of
from ..base.names import NameAllocator
from ..catalog.model import Tool
from ..catalog.validation import value_error
from ..errors import VariantError
from .base import Call, Flag, FlagKind, Forward, Layer, Reject, RejectionKind, Reply, Step
from .transaction import InnerIndex, object_schema, scopes, select_tools

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


def _pick(props: Mapping[str, Any], required: Sequence[str], effect: Mapping[str, Any] | None,
          select: str) -> str | None:
    order = list(required) + [p for p in props if p not in required]
    if select == "auto" and effect:
        for target in effect.get("target") or []:
            if target in props and _is_scalar(props[target]):
                return str(target)
    for p in order if select == "enum" else required:
        if "enum" in props.get(p, {}) and _is_scalar(props[p]):
            return p
    if select == "auto":
        for p in required:
            sub = props.get(p, {})
            if sub.get("type") == "string" and _is_scalar(sub):
                return p
    return None


def auto_params(tool: Tool, select: str) -> list[str]:
    """The arguments ``select`` picks for ``tool`` (see the module doc): one for a plain tool;
    for a flat dispatcher one ``<op>::<arg>`` key per operation (its operations' arguments
    are optional there, so every key of an operation counts as a candidate)."""
    disc = [p for p in tool.required if is_discriminator(tool, p)]
    if not disc:
        q = _pick(tool.properties, tool.required, tool.effect, select)
        return [q] if q is not None else []
    out: list[str] = []
    for op in tool.properties[disc[0]].get("enum", []):
        keys = {k: v for k, v in tool.properties.items() if k.startswith(f"{op}::")}
        q = _pick(keys, list(keys), None, "enum" if select == "enum" else "auto")
        if q is not None:
            out.append(q)
    return out


def free_text_params(tool: Tool) -> list[str]:
    """Every free-text argument of ``tool``: a string without ``enum`` that is no discriminator
    (a flat dispatcher's ``<op>::<arg>`` keys count as the arguments they are)."""
    return [k for k, v in tool.properties.items()
            if isinstance(v, Mapping) and v.get("type") == "string" and "enum" not in v and "const" not in v
            and not is_discriminator(tool, k)]


def _arg_name(key: str) -> str:
    """``set_window::window`` -> ``window`` (a flat dispatcher key names its argument last)."""
    return key.split("::")[-1]


@dataclass
class _Resolver:
    tool: Tool                 # the outer resolve_* tool
    param: str                 # argument name it resolves
    schema: dict[str, Any]     # value schema (bare)


@dataclass
class _RefState:
    #: reference id -> (resolver uid, value)
    refs: dict[str, tuple[str, Any]] = field(default_factory=dict)


def ref_id(scope: str, key: str, value: Any) -> str:
    return "ref_" + sha256_of([scope, key, value], 8)


class Reference(Layer):
    """An argument becomes a reference id obtained from ``resolve_<argument>(value)``.

    Params: ``params`` ({tool: argument or [arguments]}), ``select`` (``auto``/``enum``/``none``),
    ``tools`` (``"all"`` or the tools ``select`` may apply to).
    """

    op = "reference"
    PARAMS = ("method", "params", "select", "tools", "origin")
    METHODS = ("shared", "per_function")
    LENIENT = ("a raw value where a reference is expected, and a reference returned for another argument, when "
               "the value it stands for fits the argument's schema")
    protocol: ClassVar[bool] = True
    instruction = ("Some arguments take a reference id instead of a value. First call the matching "
                   "resolve_<argument> tool with the value you mean, then pass the ref_... id it returns as "
                   "that argument. Only ids returned in this conversation are valid.")

    def __init__(self, inner: Sequence[Tool], params: Mapping[str, Any]) -> None:
        super().__init__(inner, params)
        self.method = self.chosen_method(self.params)
        per_function = self.method == "per_function"
        select = str(self.params.get("select", "free_text" if per_function else "auto"))
        if select not in ("auto", "enum", "free_text", "none"):
            raise VariantError(f"select must be 'auto', 'enum', 'free_text' or 'none', got {select!r}",
                               where="operator 'reference'")
        origin = self.params.get("origin") or {}
        if not isinstance(origin, Mapping):
            raise VariantError("'origin' must map tool names to the function their resolvers are named after",
                               where="operator 'reference'", fix='write {"origin": {"set_window_open": "set_window"}}')
        self.value_key = "query" if per_function else "value"
        if per_function:
            self.instruction = ("Some free-text arguments take an opaque handle instead of a value. First call "
                                "resolve_<operation>__<argument>(query) with the value you mean, then pass the "
                                "handle it returns as that argument. Only handles returned in this conversation "
                                "are valid.")
        explicit = self.params.get("params") or {}
        if not isinstance(explicit, Mapping):
            raise VariantError("'params' must map tool names to the argument to reference",
                               where="operator 'reference'", fix='write {"params": {"set_window": "position"}}')
        allowed = select_tools(self, self.inner)
        self._index = InnerIndex(self.inner)
        chosen: dict[str, list[str]] = {}  # inner uid -> referenced argument keys
        used: set[str] = set()
        for t in self.inner:
            p = explicit.get(t.uid, explicit.get(t.name))
            if p is not None:
                used.update(k for k in (t.uid, t.name) if k in explicit)
                keys = [str(x) for x in p] if isinstance(p, list) else [str(p)]
                for k in keys:
                    if k not in t.properties:
                        raise VariantError(f"tool '{t.name}' has no argument '{k}' to reference",
                                           where="operator 'reference'",
                                           fix=f"use one of: {', '.join(t.properties)}")
                if keys:
                    chosen[t.uid] = keys
            elif select == "free_text" and t.uid in allowed:
                picked = free_text_params(t)
                if picked:
                    chosen[t.uid] = picked
            elif select != "none" and t.uid in allowed:
                picked = auto_params(t, select)
                if picked:
                    chosen[t.uid] = picked
        unknown = sorted(set(map(str, explicit)) - used)
        if unknown:
            raise VariantError(f"'params' names unknown tool(s): {', '.join(unknown[:10])}",
                               where="operator 'reference'")
        self.referenced = chosen
        self._param_schema = {(t.uid, k): dict(t.properties[k]) for t in self.inner for k in chosen.get(t.uid, [])}
        names = NameAllocator()
        for t in self.inner:
            names.add(t.domain, t.name)  # every inner name stays
        # resolvers per scope: group referenced arguments by name and value schema
        self._resolvers: dict[str, _Resolver] = {}               # resolver uid -> resolver
        self._resolver_of: dict[tuple[str, str], _Resolver] = {}  # (inner uid, key) -> resolver
        by_scope: dict[str, list[_Resolver]] = {}
        for scope in scopes(self.inner):
            groups: dict[tuple[str, str], list[tuple[Tool, str]]] = {}
            for t in self.inner:
                if t.domain == scope:
                    for k in chosen.get(t.uid, []):
                        fn = str(origin.get(t.uid, origin.get(t.name, t.name))) if per_function else ""
                        groups.setdefault((fn, _arg_name(k)), []).append((t, k))
            made: list[_Resolver] = []
            for (fn, param), members in groups.items():
                for schema, part in _value_schemas(members):
                    shared = len(part) == len(members)
                    users = list(dict.fromkeys(t.name for t, _ in part))
                    if per_function:
                        base = f"resolve_{fn}__{param}"
                        desc = (f"Return an opaque handle for the {param} of {fn}, given its value as query. "
                                f"Pass the handle, not the value, as {param} of {fn}.")
                    else:
                        base = f"resolve_{param}" if shared else f"resolve_{part[0][0].name}_{param}"
                        what = f"'{param}'" + ("" if shared else f" (as {', '.join(users)} take it)")
                        desc = (f"Return the reference id (ref_...) for a {what} value. Pass that id, "
                                f"not the value, wherever {what} is asked for.")
                    name = names.add(scope, base)
                    value_schema = dict(schema)
                    value_schema["description"] = f"The {param} value to refer to."
                    rtool = Tool(name, desc, object_schema({self.value_key: value_schema}, [self.value_key]),
                                 domain=scope, cls="reference")
                    r = _Resolver(rtool, param, schema)
                    self._resolvers[rtool.uid] = r
                    for t, k in part:
                        self._resolver_of[(t.uid, k)] = r
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
            props = dict(t.properties)
            for k in chosen[t.uid]:
                r = self._resolver_of[(t.uid, k)]
                props[k] = {"type": "string",
                            "description": f"Opaque handle for {_arg_name(k)}, returned by {r.tool.name}."
                            if per_function else
                            f"Reference id for {_arg_name(k)} (ref_...), returned by {r.tool.name}."}
            params_ = dict(t.parameters)
            params_["properties"] = props
            out.append(Tool(t.name, t.description, params_, domain=t.domain, cls=t.cls, effect=t.effect))
        self.tools = tuple(out)

    def lenient_decode(self, call: Call, tool: Tool, state: Any, domain: str) -> Forward | None:
        keys = [k for k in self.referenced.get(tool.uid, []) if k in call.arguments]
        if not keys:
            return None
        args = dict(call.arguments)
        for k in keys:
            value = _lenient_value(state.refs, call.arguments[k])
            if value_error(self._param_schema[(tool.uid, k)], value, k) is not None:
                return None
            args[k] = value
        return Forward((Call(call.name, args),))

    # -- encoding -------------------------------------------------------------------
    def new_encode_state(self) -> Any:
        return _RefState()

    def encode(self, call: Call, domain: str, state: Any) -> list[Call]:
        inner = self._index.lookup(domain, call.name)
        keys = [k for k in self.referenced.get(inner.uid, []) if k in call.arguments] if inner is not None else []
        if inner is None or not keys:
            return [call]
        out: list[Call] = []
        args = dict(call.arguments)
        for k in keys:
            r = self._resolver_of[(inner.uid, k)]
            value = call.arguments[k]
            rid = ref_id(r.tool.domain, r.tool.name, value)
            if rid not in state.refs:
                state.refs[rid] = (r.tool.uid, value)
                out.append(Call(r.tool.name, {self.value_key: value}))
            args[k] = rid
        out.append(Call(call.name, args))
        return out

    # -- decoding -------------------------------------------------------------------
    def new_state(self) -> Any:
        return _RefState()

    def decode(self, call: Call, tool: Tool, state: Any) -> Step:
        r = self._resolvers.get(tool.uid)
        if r is not None:
            value = call.arguments[self.value_key]
            rid = ref_id(tool.domain, tool.name, value)
            state.refs[rid] = (tool.uid, value)
            if self.value_key == "query":
                return Reply({"handle": rid, "argument": r.param})
            return Reply({"reference": rid, "argument": r.param, "value": value})
        keys = [k for k in self.referenced.get(tool.uid, []) if k in call.arguments]
        if not keys:
            return Forward((call,))
        args = dict(call.arguments)
        for k in keys:
            resolver = self._resolver_of[(tool.uid, k)]
            rid = call.arguments[k]
            entry = state.refs.get(rid) if isinstance(rid, str) else None
            if entry is None or entry[0] != resolver.tool.uid:
                why = ("was not returned by any resolver in this conversation" if entry is None
                       else f"refers to a value of another argument ({self._resolvers[entry[0]].tool.name})")
                return Reject(RejectionKind.PROTOCOL,
                              f"'{k}' of '{call.name}' takes a reference id, and {rid!r} {why}. Call "
                              f"{resolver.tool.name}({self.value_key}=...) with the {_arg_name(k)} you mean and pass the "
                              f"ref_... id it returns.",
                              (Flag(FlagKind.BAD_REFERENCE, f"{call.name}.{k}: {rid!r}"),))
            schema = self._param_schema[(tool.uid, k)]
            err = value_error(schema, entry[1], k)
            if err is not None:
                allowed = f" (allowed: {', '.join(map(repr, schema['enum']))})" if "enum" in schema else ""
                return Reject(RejectionKind.PROTOCOL,
                              f"{rid!r} refers to {entry[1]!r}, which '{call.name}' does not accept as {k}{allowed}. "
                              f"Resolve an accepted value with {resolver.tool.name}({self.value_key}=...).",
                              (Flag(FlagKind.BAD_REFERENCE, f"{call.name}.{k}: {rid!r} -> {entry[1]!r}"),))
            args[k] = entry[1]
        return Forward((Call(call.name, args),))


def _lenient_value(refs: Mapping[str, tuple[str, Any]], given: Any) -> Any:
    """The value a referenced argument's content most plausibly means: the value of any
    reference returned in the session, else the content itself (a raw value)."""
    entry = refs.get(given) if isinstance(given, str) else None
    return entry[1] if entry is not None else given


def _value_schemas(members: list[tuple[Tool, str]]) -> list[tuple[dict[str, Any], list[tuple[Tool, str]]]]:
    """Value schemas for one referenced argument name: one shared schema (string enums
    united) when the tools agree, else one per distinct schema."""
    bare = [_bare(t.properties[k]) for t, k in members]
    if all(canonical_json(b) == canonical_json(bare[0]) for b in bare):
        return [(bare[0], members)]
    if all(set(b) == {"type", "enum"} and b["type"] == "string" for b in bare):
        united: dict[Any, None] = {}
        for b in bare:
            united.update(dict.fromkeys(b["enum"]))
        return [({"type": "string", "enum": list(united)}, members)]
    out: list[tuple[dict[str, Any], list[tuple[Tool, str]]]] = []
    for b, m in zip(bare, members, strict=True):
        for schema, part in out:
            if canonical_json(schema) == canonical_json(b):
                part.append(m)
                break
        else:
            out.append((b, [m]))
    return out
