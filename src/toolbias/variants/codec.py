"""The codec: the single source of truth for a variant.

Built from a catalog and a variant spec, it holds the schema the model sees,
``encode`` (native actions -> variant calls, for the oracle and training data) and
stateful decoding sessions (variant calls -> native actions, protocol replies or
rejections) under ``strict`` or ``lenient`` schema control.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from enum import Enum
from typing import Any, NamedTuple

import jsonschema

from ..catalog.model import JSON_SCALARS, Catalog, NativeAction, Tool, canonical_json, json_copy
from ..catalog.validation import arguments_error, compile_arguments_check, tool_arguments_check
from ..operators.base import ALL_DOMAINS, Call, Flag, Forward, Layer, Reject, RejectionKind, Reply

#: tool-call arguments nested deeper than this are a parse error: real schemas nest a few
#: levels, and deeper values would exhaust the recursion limit when copied, validated or stored
MAX_ARGUMENT_DEPTH = 64

#: ``json.dumps(value, ensure_ascii=False)``, without building an encoder per message
_TO_JSON = json.JSONEncoder(ensure_ascii=False).encode


def too_deep(value: Any, limit: int = MAX_ARGUMENT_DEPTH) -> bool:
    """True if a JSON value nests objects/arrays more than ``limit`` levels (iterative: never
    recurses; only containers are pushed, so flat arguments cost one pass over their values)."""
    if not isinstance(value, (dict, list, tuple, Mapping)):
        return False
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        if depth > limit:
            return True
        for child in (v.values() if isinstance(v, (dict, Mapping)) else v):
            if isinstance(child, (dict, list, tuple)):
                stack.append((child, depth + 1))
    return False


class Control(str, Enum):
    """Schema control: what happens to an off-schema call."""

    STRICT = "strict"    # reject with an explanation; the agent may retry
    LENIENT = "lenient"  # execute the native action it unambiguously decodes to


class Outcome(str, Enum):
    NATIVE = "native"
    REPLY = "reply"
    REJECTION = "rejection"


class Decoded(NamedTuple):
    """How one variant call decoded. Never an exception: rejections are values.

    An immutable value (a named tuple: the codec makes one or two per call, and a frozen
    dataclass costs several times more to construct)."""

    call: Call
    outcome: Outcome
    actions: tuple[NativeAction, ...] = ()
    #: a protocol reply; for a rejection, the error object its layer worded (the paper surfaces), if any
    reply: Mapping[str, Any] | None = None
    rejection_kind: RejectionKind | None = None
    message: str = ""
    flags: tuple[Flag, ...] = ()
    routes: tuple[str, ...] = ()
    route_classes: tuple[str, ...] = ()
    lenient: str | None = None  # the repair lenient control applied, if any

    def protocol_text(self) -> str | None:
        """The text the model reads for a call the codec answers itself (``Error: ...`` for a
        rejection, the protocol's JSON reply), or None for a native call: its executed results
        answer it. Episodes and the proxy both word their tool messages with this."""
        if self.outcome is Outcome.REJECTION:
            return f"Error: {self.message}"
        if self.outcome is Outcome.REPLY:
            return _TO_JSON(self.reply)
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "call": self.call.to_dict(),
            "outcome": self.outcome.value,
            "actions": [a.to_dict() for a in self.actions],
            "reply": dict(self.reply) if self.reply is not None else None,
            "rejection_kind": self.rejection_kind.value if self.rejection_kind else None,
            "message": self.message,
            "flags": [f.to_dict() for f in self.flags],
            "routes": list(self.routes),
            "route_classes": list(self.route_classes),
            "lenient": self.lenient,
        }


def _closed(schema: Any) -> Any:
    """Copy of a schema where objects with listed properties refuse unknown keys.

    Only for validation: the schema the model sees is unchanged."""
    if isinstance(schema, dict):
        out = {k: _closed(v) for k, v in schema.items()}
        if "properties" in out and "additionalProperties" not in out:
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_closed(v) for v in schema]
    return schema


def _flat_one_of(schema: Mapping[str, Any]) -> bool:
    """A top-level ``oneOf`` of plain object alternatives (the merge operator's union
    encoding): the fast checker decides it exactly, branch by branch."""
    branches = schema.get("oneOf")
    rest = {k: v for k, v in schema.items() if k != "oneOf"}
    return (isinstance(branches, list) and bool(branches) and "oneOf" not in json.dumps(rest)
            and all(isinstance(b, dict) and b.get("type") == "object" and "oneOf" not in json.dumps(b)
                    for b in branches))


class _OneOf:
    """jsonschema's verdict on a :func:`_flat_one_of` schema (the rest of the schema holds
    and exactly one alternative does), decided with the fast checker. Alternatives whose
    single-value enum (a discriminator such as ``operation``) the arguments contradict fail
    without a full check; a failure names the alternative the discriminator picked."""

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.rest = {k: v for k, v in schema.items() if k != "oneOf"}
        self.branches = list(schema["oneOf"])
        pins = [{k: s["enum"][0] for k, s in (b.get("properties") or {}).items()
                 if isinstance(s, Mapping) and isinstance(s.get("enum"), list) and len(s["enum"]) == 1}
                for b in self.branches]
        shared = set.intersection(*(set(p) for p in pins)) if pins else set()
        strings = sorted(k for k in shared if all(isinstance(p[k], str) for p in pins))
        #: a key every alternative pins to a string (a discriminator), and value -> alternatives
        self.key = strings[0] if strings else None
        self.by_value: dict[str, list[int]] = {}
        if self.key is not None:
            for i, p in enumerate(pins):
                self.by_value.setdefault(p[self.key], []).append(i)
        self.rest_ok = compile_arguments_check(self.rest)
        self.branch_ok = [compile_arguments_check(b) for b in self.branches]

    def error(self, args: Mapping[str, Any]) -> str | None:
        if not self.rest_ok(args):
            err = arguments_error(self.rest, args)
            return err.message if err is not None else "arguments do not fit the schema"
        if self.key is not None and self.key in args:
            # every other alternative pins the key to another string: its enum fails
            value = args[self.key]
            picked = self.by_value.get(value, []) if isinstance(value, str) else []
            candidates = [(i, True) for i in picked]
        else:
            candidates = [(i, False) for i in range(len(self.branches))]
        fits, named = 0, None
        for i, discriminated in candidates:
            if self.branch_ok[i](args):
                fits += 1
            elif discriminated and named is None:
                e = arguments_error(self.branches[i], args)
                named = f"{self.branches[i].get('title') or 'the matching alternative'}: {e.message if e else '?'}"
        if fits == 1:
            return None
        if fits:
            return f"arguments match {fits} alternatives of the schema; exactly one must match"
        return named or f"arguments match none of the {len(self.branches)} alternatives of the schema"


_Predicate = Callable[[Mapping[str, Any]], bool]
_Explain = Callable[[Mapping[str, Any]], str]


def _schema_checks(tool: Tool) -> tuple[_Predicate, _Explain]:
    """jsonschema's verdict on ``tool``'s parameters as a fast predicate, and the message for
    arguments it refuses (built only then)."""
    params = tool.parameters
    if "oneOf" not in json.dumps(params):  # the supported subset: the compiled checker decides it
        def explain(args: Mapping[str, Any]) -> str:
            err = arguments_error(params, args)
            return err.message if err is not None else "arguments do not fit the schema"
        return tool_arguments_check(tool), explain  # the same compiled check validate_action uses
    if _flat_one_of(params):
        one_of = _OneOf(params)
        return (lambda args: one_of.error(args) is None), (lambda args: one_of.error(args) or "?")
    validator = jsonschema.Draft202012Validator(_closed(params))

    def explain_any(args: Mapping[str, Any]) -> str:
        error = jsonschema.exceptions.best_match(validator.iter_errors(dict(args)))
        if error is None:
            return "?"
        path = ".".join(str(p) for p in error.absolute_path)
        return f"{path + ': ' if path else ''}{error.message}"
    return (lambda args: validator.is_valid(dict(args))), explain_any


def check_arguments(tool: Tool, args: Mapping[str, Any]) -> str | None:
    """None if ``args`` fit ``tool``'s schema, else a message naming the problem. The checks
    are built once per tool (tools are immutable; native tools are shared by every codec)."""
    checks = tool.__dict__.get("_schema_checks")
    if checks is None:
        checks = _schema_checks(tool)
        object.__setattr__(tool, "_schema_checks", checks)
    if checks[0](args):
        return None
    message: str = checks[1](args)
    return message


_ANNOTATIONS = frozenset({"description", "title", "examples"})


def _validation_form(schema: Any) -> Any:
    """A schema without annotation keywords (they never change a verdict); property names
    stay, so a parameter called ``description`` is kept."""
    if isinstance(schema, list):
        return [_validation_form(s) for s in schema]
    if not isinstance(schema, Mapping):
        return schema
    out: dict[str, Any] = {}
    for k, v in schema.items():
        if k in _ANNOTATIONS:
            continue
        if k == "properties" and isinstance(v, Mapping):
            out[k] = {name: _validation_form(sub) for name, sub in v.items()}
        elif k in ("items", "oneOf", "anyOf", "allOf", "additionalProperties", "not"):
            out[k] = _validation_form(v)
        else:
            out[k] = v
    return out


def validation_key(tool: Tool) -> str:
    """Equal for two tools exactly when their parameters validate the same way, up to
    annotations and key order (cached per tool: tools are immutable)."""
    key = tool.__dict__.get("_validation_key")
    if key is None:
        key = canonical_json(_validation_form(tool.parameters))
        object.__setattr__(tool, "_validation_key", key)
    result: str = key
    return result


class _Level:
    """Tools of one level of the stack, indexed by domain and name."""

    def __init__(self, tools: Sequence[Tool]) -> None:
        self.tools = tuple(tools)
        self.by_name: dict[tuple[str, str], Tool] = {}
        for t in tools:
            self.by_name[(t.domain, t.name)] = t

    def lookup(self, domain: str, name: str) -> Tool | None:
        """A tool visible in ``domain``; a ``"dom::name"`` uid names a tool of another domain
        (catalog-scope layers forward such uids so equal names in two domains stay apart)."""
        if "::" in name:
            d, _, n = name.partition("::")
            return self.by_name.get((d, n))
        return self.by_name.get((domain, name)) or self.by_name.get((ALL_DOMAINS, name))

    def visible(self, domain: str) -> list[Tool]:
        return [t for t in self.tools if t.domain in (domain, ALL_DOMAINS)]


class Codec:
    """A variant bound to a catalog: schema, encoder and decoding sessions."""

    def __init__(self, catalog: Catalog, layers: Sequence[Layer], name: str = "native") -> None:
        self.catalog = catalog
        self.layers = tuple(layers)
        self.name = name
        native = [t for d in catalog.domains for t in d.tools]
        self._levels = [_Level(native)] + [_Level(layer.tools) for layer in self.layers]
        self._schemas: dict[str, list[dict[str, Any]]] = {}

    # -- schema ---------------------------------------------------------------
    @property
    def tools(self) -> tuple[Tool, ...]:
        return self._levels[-1].tools

    def tools_for(self, domain: str) -> list[Tool]:
        """The variant tools an agent working in ``domain`` sees, in order."""
        return self._levels[-1].visible(domain)

    def schema(self, domain: str) -> list[dict[str, Any]]:
        """OpenAI tool list for ``domain`` (deterministic, JSON-serialisable).

        Built once per domain and shared: callers must not mutate it."""
        cached = self._schemas.get(domain)
        if cached is None:
            cached = self._schemas[domain] = [t.to_openai() for t in self.tools_for(domain)]
        return cached

    def function_count(self) -> int:
        return len(self.tools)

    def instructions(self) -> list[str]:
        return [layer.instruction for layer in self.layers if layer.instruction]

    # -- encoding -------------------------------------------------------------
    def encode(self, actions: Iterable[NativeAction]) -> list[Call]:
        """Variant calls (protocol calls included) that a fresh session decodes to ``actions``."""
        states = [layer.new_encode_state() for layer in self.layers]
        out: list[Call] = []
        for action in actions:
            calls = [Call(action.tool, dict(action.arguments))]
            domain = action.domain
            for layer, state in zip(self.layers, states, strict=True):
                calls = layer.encode(calls[0], domain, state) if len(calls) == 1 else \
                    [c2 for c in calls for c2 in layer.encode(c, domain, state)]
            out.extend(calls)
        return out

    def session(self, domain: str, control: Control | str = Control.STRICT) -> Session:
        return Session(self, domain, control if control.__class__ is Control else Control(control))


class Session:
    """Stateful decoding of one episode's calls in one domain."""

    def __init__(self, codec: Codec, domain: str, control: Control) -> None:
        self.codec = codec
        self.domain = domain
        self.control = control
        self.states = [layer.new_state() for layer in codec.layers]

    def decode(self, call: Call) -> Decoded:
        """Decode one variant call. Never raises on model output."""
        if not isinstance(call.arguments, Mapping):
            return Decoded(call, Outcome.REJECTION, rejection_kind=RejectionKind.PARSE_ERROR,
                           message=f"arguments of '{call.name}' must be a JSON object")
        if not _flat(call.arguments) and too_deep(call.arguments):
            return Decoded(call, Outcome.REJECTION, rejection_kind=RejectionKind.PARSE_ERROR,
                           message=f"arguments of '{call.name}' nest deeper than {MAX_ARGUMENT_DEPTH} levels")
        return self._decode_at(len(self.codec.layers), call, call)

    def _reject(self, origin: Call, kind: RejectionKind, message: str, flags: tuple[Flag, ...] = (),
                routes: tuple[str, ...] = (), classes: tuple[str, ...] = (),
                reply: Mapping[str, Any] | None = None) -> Decoded:
        return Decoded(origin, Outcome.REJECTION, reply=reply, rejection_kind=kind, message=message, flags=flags,
                       routes=routes, route_classes=classes)

    def _decode_at(self, level: int, call: Call, origin: Call, passed: tuple[Tool, Any] | None = None) -> Decoded:
        """``passed``: the tool and arguments object the level above validated and forwarded;
        when the same object reaches a tool with the same validation schema, the verdict is known."""
        codec = self.codec
        lvl = codec._levels[level]
        tool = lvl.lookup(self.domain, call.name)
        problem: tuple[RejectionKind, str] | None = None
        if tool is None:
            names = ", ".join(t.name for t in lvl.visible(self.domain))
            problem = (RejectionKind.UNKNOWN_TOOL, f"Unknown tool '{call.name}'. Available tools: {names}.")
        elif passed is not None and passed[1] is call.arguments and validation_key(passed[0]) == validation_key(tool):
            pass
        elif level > 0 and not codec.layers[level - 1].validates:
            pass  # the layer checks its calls itself
        else:
            err = check_arguments(tool, call.arguments)
            if err is not None:
                problem = (RejectionKind.INVALID_ARGUMENTS, f"Invalid arguments for '{call.name}': {err}")
        if problem is not None:
            if self.control is Control.LENIENT:
                repaired = self._lenient(level, call, origin)
                if repaired is not None:
                    return repaired
            return self._reject(origin, *problem)
        assert tool is not None
        if level == 0:
            action = NativeAction(self.domain if tool.domain == ALL_DOMAINS else tool.domain, tool.name,
                                  json_copy(call.arguments))
            if action.domain != self.domain:
                return self._reject(origin, RejectionKind.INVALID_ACTION,
                                    f"'{call.name}' acts on domain '{action.domain}', not '{self.domain}'.")
            return Decoded(origin, Outcome.NATIVE, actions=(action,))
        layer = codec.layers[level - 1]
        step = layer.decode(call, tool, self.states[level - 1])
        if isinstance(step, Reply):
            return Decoded(origin, Outcome.REPLY, reply=step.payload, flags=step.flags)
        if isinstance(step, Reject):
            if self.control is Control.LENIENT and step.kind is RejectionKind.INVALID_ARGUMENTS:
                repaired = self._lenient(level, call, origin)  # schema-valid but off-form (merge: other ops' keys)
                if repaired is not None:
                    return repaired
            if self.control is Control.LENIENT and step.kind is RejectionKind.PROTOCOL:
                meant = layer.lenient_decode(call, tool, self.states[level - 1], self.domain)
                if meant is not None:  # protocol misuse that still names one native action
                    d = self._forward(level, meant, origin, (tool, call.arguments))
                    if d.outcome is Outcome.NATIVE:
                        return _with_lenient(d, f"{layer.op}: executed protocol misuse as the action it names")
            return self._reject(origin, step.kind, step.message, step.flags, reply=step.reply)
        assert isinstance(step, Forward)
        return self._forward(level, step, origin, (tool, call.arguments))

    def _forward(self, level: int, step: Forward, origin: Call, passed: tuple[Tool, Any]) -> Decoded:
        routes: tuple[str, ...] = (step.route,) if step.route else ()
        classes = step.classes
        if len(step.calls) == 1:  # the usual case: the inner outcome is the outcome, plus this route
            d = self._decode_at(level - 1, step.calls[0], origin, passed)
            if routes or classes or step.flags:  # (built directly: NamedTuple._replace costs twice as much)
                d = Decoded(d.call, d.outcome, d.actions, d.reply, d.rejection_kind, d.message, step.flags + d.flags,
                            routes + d.routes, classes + d.route_classes, d.lenient)
            return d
        actions: list[NativeAction] = []
        flags: list[Flag] = list(step.flags)
        lenient: str | None = None
        for inner in step.calls:
            d = self._decode_at(level - 1, inner, origin, passed)
            routes += d.routes
            classes += d.route_classes
            flags.extend(d.flags)
            lenient = lenient or d.lenient
            if d.outcome is not Outcome.NATIVE:
                # a rejection (or reply) part-way executes nothing: earlier inner actions are dropped
                return Decoded(origin, d.outcome, actions=(), reply=d.reply,
                               rejection_kind=d.rejection_kind, message=d.message, flags=tuple(flags),
                               routes=routes, route_classes=classes, lenient=lenient)
            actions.extend(d.actions)
        return Decoded(origin, Outcome.NATIVE, actions=tuple(actions), flags=tuple(flags), routes=routes,
                       route_classes=classes, lenient=lenient)

    def _lenient(self, level: int, call: Call, origin: Call) -> Decoded | None:
        """Accept an off-schema call that unambiguously means one thing: a layer's own
        repair, or a call in the form of a lower level (e.g. a native tool name)."""
        layer = self.codec.layers[level - 1] if level > 0 else None
        if layer is not None:
            repaired = layer.repair(call, self.domain)
            if repaired is not None and repaired != call:
                lvl = self.codec._levels[level]
                tool = lvl.lookup(self.domain, repaired.name)
                if tool is not None and check_arguments(tool, repaired.arguments) is None:
                    d = self._decode_at(level, repaired, origin)
                    if d.outcome is not Outcome.REJECTION:
                        return _with_lenient(d, f"{layer.op}: repaired to {repaired.name}")
        for lower in range(level - 1, -1, -1):
            lvl = self.codec._levels[lower]
            tool = lvl.lookup(self.domain, call.name)
            if tool is not None and check_arguments(tool, call.arguments) is None:
                d = self._decode_at(lower, call, origin)
                if d.outcome is Outcome.NATIVE:
                    form = "native" if lower == 0 else f"level {lower} ({self.codec.layers[lower - 1].op})"
                    return _with_lenient(d, f"accepted {form} form of '{call.name}'")
        return None

    def finish(self) -> list[Flag]:
        """Flags raised at episode end (e.g. uncommitted transactions)."""
        flags: list[Flag] = []
        for layer, state in zip(self.codec.layers, self.states, strict=True):
            flags.extend(layer.finish(state))
        return flags


def _flat(args: Mapping[str, Any]) -> bool:
    """No value is an object or array (then no depth check is needed)."""
    for v in args.values():
        if type(v) not in JSON_SCALARS:
            return False
    return True


def _with_lenient(d: Decoded, note: str) -> Decoded:
    return d._replace(lenient=note)


__all__ = ["MAX_ARGUMENT_DEPTH", "Codec", "Control", "Decoded", "Outcome", "Session", "too_deep"]
