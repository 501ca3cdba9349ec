"""Checks for catalogs (can toolbias load and rewrite them?) and native actions.

Catalog problems raise :class:`CatalogError` naming the tool and parameter.
Action problems are returned as :class:`ActionError` values: a bad model call is
data, never an exception.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from ..errors import CatalogError
from .model import EFFECT_KINDS, Catalog, NativeAction, Tool

#: Schema keywords an operator can rewrite. Anything else is refused by name.
SUPPORTED_KEYWORDS = frozenset(
    {
        "type", "description", "enum", "properties", "required", "items", "minimum", "maximum",
        "exclusiveMinimum", "exclusiveMaximum", "default", "title", "additionalProperties",
        "minItems", "maxItems", "format", "pattern", "minLength", "maxLength", "examples", "const",
    }
)
UNSUPPORTED_HINT = {
    "$ref": "inline the referenced schema",
    "allOf": "merge the sub-schemas into one object",
    "anyOf": "pick one type or use an enum",
    "oneOf": "pick one type or use an enum",
    "not": "state the allowed values positively (enum or range)",
    "patternProperties": "list the properties explicitly",
    "if": "express the condition with separate tools",
    "dependentRequired": "make the parameters always required or split the tool",
    "$defs": "inline the definitions",
    "definitions": "inline the definitions",
}

JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
    "null": (type(None),),
}


def check_schema(schema: Any, where: str) -> None:
    """Raise CatalogError if a parameter schema uses constructs toolbias cannot rewrite."""
    if not isinstance(schema, Mapping):
        raise CatalogError(f"schema must be an object, got {type(schema).__name__}", where=where,
                           fix="write the parameter schema as a JSON object")
    for key in schema:
        if key in UNSUPPORTED_HINT:
            raise CatalogError(f"uses the JSON-Schema construct '{key}', which toolbias cannot rewrite",
                               where=where, fix=UNSUPPORTED_HINT[key])
    types = schema.get("type")
    for t in types if isinstance(types, list) else [types] if types else []:
        if t not in JSON_TYPES:
            raise CatalogError(f"unknown JSON type '{t}'", where=where,
                               fix=f"use one of {', '.join(JSON_TYPES)}")
    enum = schema.get("enum")
    if enum is not None:
        if not isinstance(enum, list) or not enum:
            raise CatalogError("enum must be a non-empty list", where=where,
                               fix="list the allowed values (\"enum\": [\"a\", \"b\"]) or remove 'enum'")
        kinds = {_json_kind(v) for v in enum}
        if len(kinds) > 1:
            raise CatalogError(f"enum mixes value types ({', '.join(sorted(kinds))}): {enum!r}", where=where,
                               fix="make every enum value the same type (e.g. all strings)")
    props = schema.get("properties")
    if props is not None:
        if not isinstance(props, Mapping):
            raise CatalogError("'properties' must be an object", where=where,
                               fix="write 'properties' as an object of parameter name -> schema")
        for name, sub in props.items():
            check_schema(sub, f"{where}.{name}")
        required = schema.get("required", [])
        if not isinstance(required, list):
            raise CatalogError("'required' must be a list of property names", where=where,
                               fix="write 'required' as a list of names from 'properties'")
        missing = [r for r in required if r not in props]
        if missing:
            raise CatalogError(f"required parameter(s) {', '.join(map(repr, missing))} not in properties",
                               where=where, fix="add them to 'properties' or remove them from 'required'")
    elif schema.get("required"):
        raise CatalogError(f"required parameter(s) {schema['required']!r} but no properties", where=where,
                           fix="add a 'properties' object")
    if "items" in schema:
        check_schema(schema["items"], f"{where}[]")


def _json_kind(v: Any) -> str:
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    return type(v).__name__


def validate_catalog(catalog: Catalog) -> None:
    """Raise CatalogError on the first problem: duplicate names, bad schemas."""
    seen_domains: set[str] = set()
    for domain in catalog.domains:
        if domain.name in seen_domains:
            raise CatalogError(f"duplicate domain '{domain.name}'", where=catalog.name,
                               fix="give every domain its own name")
        seen_domains.add(domain.name)
        names: set[str] = set()
        for tool in domain.tools:
            where = f"{catalog.name}: tool '{tool.name}' (domain {domain.name})"
            if not tool.name or not isinstance(tool.name, str):
                raise CatalogError("tool without a name", where=f"{catalog.name}: domain {domain.name}",
                                   fix="give every tool a non-empty string 'name'")
            if tool.name in names:
                raise CatalogError(f"duplicate tool name '{tool.name}' in domain '{domain.name}'",
                                   where=catalog.name, fix="rename one of the two tools")
            names.add(tool.name)
            params = tool.parameters
            if params.get("type", "object") != "object":
                raise CatalogError("parameters must be a JSON-Schema object (type 'object')", where=where,
                                   fix="write the parameters as {\"type\": \"object\", \"properties\": {...}}; "
                                       "wrap a single value in a property")
            check_schema(params, where + " parameters")
            check_effect(tool, where)
    validate_tasks(catalog)


def check_effect(tool: Tool, where: str) -> None:
    """Raise CatalogError if a tool's state ``effect`` is one the engine cannot run."""
    effect = tool.effect
    if effect is None:
        return
    shape = 'write {"kind": "set", "target": ["<required parameter>"]}, or leave "effect" out'
    if not isinstance(effect, Mapping):
        raise CatalogError(f"'effect' must be an object, got {type(effect).__name__}", where=where, fix=shape)
    kind = effect.get("kind", "set")
    if kind not in EFFECT_KINDS:
        raise CatalogError(f"unknown effect kind {kind!r}", where=where, fix=f"use one of: {', '.join(EFFECT_KINDS)}")
    target = effect.get("target") or []
    if not isinstance(target, list) or not all(isinstance(t, str) for t in target):
        raise CatalogError("effect 'target' must be a list of parameter names", where=where, fix=shape)
    loose = [t for t in target if t not in tool.required]
    if loose:
        raise CatalogError(f"effect target(s) {', '.join(map(repr, loose))} are not required parameters of the tool",
                           where=where, fix="name only required parameters in 'target' (they identify the object)")
    if "list" in effect and not isinstance(effect["list"], str):
        raise CatalogError("effect 'list' must be an attribute name (a string)", where=where, fix=shape)


def validate_tasks(catalog: Catalog) -> None:
    """Raise CatalogError for a task whose gold no native action can match (an unknown tool,
    arguments off the tool's schema) or whose id repeats: such tasks could never succeed, or
    would share one episode key."""
    seen: set[str] = set()
    domains = [d.name for d in catalog.domains]
    for task in catalog.tasks:
        source = task.meta.get("source") if isinstance(task.meta, Mapping) else None
        where = f"{catalog.name}: task '{task.id}'" + (f" (in {source})" if source else "")
        if task.id in seen:
            raise CatalogError(f"duplicate task id '{task.id}'", where=where, fix="give every task a unique id")
        seen.add(task.id)
        for i, action in enumerate(task.gold, 1):
            if action.domain not in domains:
                raise CatalogError(f"gold call {i} names the unknown domain '{action.domain}'", where=where,
                                   fix=f"use one of: {', '.join(domains)}")
            err = validate_action(catalog, action)
            if err is not None:
                raise CatalogError(f"gold call {i} ({action.tool}) is not a valid native action: {err.message}",
                                   where=where, fix="correct the gold call to the tool's schema, or drop the task")


class ActionErrorKind(str, Enum):
    UNKNOWN_TOOL = "unknown_tool"
    MISSING_ARGUMENT = "missing_argument"
    EXTRA_ARGUMENT = "extra_argument"
    WRONG_TYPE = "wrong_type"
    NOT_IN_ENUM = "not_in_enum"
    OUT_OF_RANGE = "out_of_range"


@dataclass(frozen=True)
class ActionError:
    """Why a native action is invalid: a value the caller can show to the model."""

    kind: ActionErrorKind
    message: str
    argument: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "message": self.message, "argument": self.argument}


def value_error(schema: Mapping[str, Any], value: Any, path: str) -> ActionError | None:
    """Check one value against a (supported-subset) schema; None if it is valid."""
    types = schema.get("type")
    if types:
        allowed = types if isinstance(types, list) else [types]
        ok = False
        for t in allowed:
            py = JSON_TYPES.get(t, (object,))
            if isinstance(value, bool) and t not in ("boolean",):
                continue
            if t == "integer" and isinstance(value, float) and value.is_integer():
                ok = True
                break
            if isinstance(value, py):
                ok = True
                break
        if not ok:
            return ActionError(ActionErrorKind.WRONG_TYPE,
                               f"'{path}' must be {' or '.join(allowed)}, got {_json_kind(value)} {value!r}", path)
    enum = schema.get("enum")
    if enum is not None and value not in enum:
        shown = ", ".join(map(repr, enum[:20]))
        return ActionError(ActionErrorKind.NOT_IN_ENUM, f"'{path}' must be one of {shown}; got {value!r}", path)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        lo, hi = schema.get("minimum"), schema.get("maximum")
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            return ActionError(ActionErrorKind.OUT_OF_RANGE,
                               f"'{path}' must be between {lo} and {hi}; got {value!r}", path)
        xlo, xhi = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
        if isinstance(xlo, (int, float)) and not isinstance(xlo, bool) and value <= xlo:
            return ActionError(ActionErrorKind.OUT_OF_RANGE, f"'{path}' must be greater than {xlo}; got {value!r}", path)
        if isinstance(xhi, (int, float)) and not isinstance(xhi, bool) and value >= xhi:
            return ActionError(ActionErrorKind.OUT_OF_RANGE, f"'{path}' must be less than {xhi}; got {value!r}", path)
    if isinstance(value, dict) and "properties" in schema:
        return arguments_error(schema, value, prefix=f"{path}.")
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for i, item in enumerate(value):
            err = value_error(schema["items"], item, f"{path}[{i}]")
            if err:
                return err
    return None


def arguments_error(schema: Mapping[str, Any], args: Mapping[str, Any], prefix: str = "") -> ActionError | None:
    """Check an argument object against an object schema; None if valid."""
    props: Mapping[str, Any] = schema.get("properties", {}) or {}
    for name in schema.get("required", []) or []:
        if name not in args:
            return ActionError(ActionErrorKind.MISSING_ARGUMENT, f"missing required argument '{prefix}{name}'",
                               prefix + name)
    closed = schema.get("additionalProperties", False) is False
    for name, value in args.items():
        if name not in props:
            if closed:
                allowed = ", ".join(props) or "none"
                return ActionError(ActionErrorKind.EXTRA_ARGUMENT,
                                   f"unexpected argument '{prefix}{name}' (allowed: {allowed})", prefix + name)
            continue
        err = value_error(props[name], value, prefix + name)
        if err:
            return err
    return None


def validate_action(catalog: Catalog, action: NativeAction) -> ActionError | None:
    """Return why ``action`` is not a valid native action, or None if it is."""
    tool: Tool | None = catalog.tool(action.domain, action.tool)
    if tool is None:
        return ActionError(ActionErrorKind.UNKNOWN_TOOL,
                           f"unknown tool '{action.tool}' in domain '{action.domain}'")
    if not isinstance(action.arguments, Mapping):
        return ActionError(ActionErrorKind.WRONG_TYPE, "arguments must be an object")
    return tool_arguments_error(tool, action.arguments)


# -- compiled checks: the same verdicts as value_error / arguments_error, built once per
# schema, so the valid path (almost every call) costs a few dict lookups. Messages still
# come from the functions above, which run only when a compiled check says "invalid".

Check = Callable[[Any], bool]


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


_SINGLE_TYPE_CHECKS: dict[str, Check] = {
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer()),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "null": lambda v: v is None,
}


def _type_check(types: Any) -> Check | None:
    if not types:
        return None
    if isinstance(types, str) and types in _SINGLE_TYPE_CHECKS:
        return _SINGLE_TYPE_CHECKS[types]
    allowed = types if isinstance(types, list) else [types]

    def ok(v: Any) -> bool:
        for t in allowed:
            if isinstance(v, bool) and t != "boolean":
                continue
            if t == "integer" and isinstance(v, float) and v.is_integer():
                return True
            if isinstance(v, JSON_TYPES.get(t, (object,))):
                return True
        return False

    return ok


def _string_enum_check(schema: Mapping[str, Any]) -> Check | None:
    """For a string enum, membership alone decides: a member is a string, so the type check
    holds, and every other keyword constrains numbers, objects or arrays only."""
    enum = schema.get("enum")
    if schema.get("type", "string") != "string" or not isinstance(enum, list) or not enum \
            or not all(isinstance(m, str) for m in enum):
        return None
    members = frozenset(enum)

    def in_enum(v: Any) -> bool:
        return isinstance(v, str) and v in members

    return in_enum


def _number_range_check(schema: Mapping[str, Any]) -> Check | None:
    """``integer``/``number`` with inclusive bounds and nothing else to check: one function."""
    t = schema.get("type")
    if t not in ("integer", "number") or any(k in schema for k in ("enum", "const", "exclusiveMinimum",
                                                                    "exclusiveMaximum", "properties", "items")):
        return None
    lo, hi = schema.get("minimum"), schema.get("maximum")
    if not (lo is None or _is_number(lo)) or not (hi is None or _is_number(hi)):
        return None
    integer = t == "integer"

    def in_range(v: Any) -> bool:
        if isinstance(v, bool):
            return False
        if isinstance(v, int):
            pass
        elif isinstance(v, float):
            if integer and not v.is_integer():
                return False
        else:
            return False
        return not ((lo is not None and v < lo) or (hi is not None and v > hi))  # NaN passes, as there

    return in_range


def compile_value_check(schema: Mapping[str, Any]) -> Check:
    """A predicate with :func:`value_error`'s verdict (True = valid)."""
    special = _string_enum_check(schema) or _number_range_check(schema)
    if special is not None:
        return special
    checks: list[Check] = []
    type_ok = _type_check(schema.get("type"))
    if type_ok:
        checks.append(type_ok)
    enum = schema.get("enum")
    if enum is not None:
        try:
            members: Any = frozenset(enum)
        except TypeError:  # unhashable members: list membership, as value_error does
            members = list(enum)

        def in_enum(v: Any) -> bool:
            try:
                return v in members
            except TypeError:
                return v in list(enum)

        checks.append(in_enum)
    lo, hi = schema.get("minimum"), schema.get("maximum")
    xlo, xhi = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    xlo = xlo if _is_number(xlo) else None
    xhi = xhi if _is_number(xhi) else None
    if any(b is not None for b in (lo, hi, xlo, xhi)):
        def in_range(v: Any) -> bool:
            if not _is_number(v):
                return True
            return not ((lo is not None and v < lo) or (hi is not None and v > hi)
                        or (xlo is not None and v <= xlo) or (xhi is not None and v >= xhi))

        checks.append(in_range)
    if "properties" in schema:
        obj_ok = compile_arguments_check(schema)
        checks.append(lambda v: not isinstance(v, dict) or obj_ok(v))
    items = schema.get("items")
    if isinstance(items, Mapping):
        item_ok = compile_value_check(items)
        def items_ok(v: Any) -> bool:
            if isinstance(v, list):
                for i in v:
                    if not item_ok(i):
                        return False
            return True

        checks.append(items_ok)
    if not checks:
        return lambda v: True
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:
        first, second = checks
        return lambda v: first(v) and second(v)

    def every(v: Any) -> bool:
        for c in checks:
            if not c(v):
                return False
        return True

    return every


def compile_arguments_check(schema: Mapping[str, Any]) -> Callable[[Mapping[str, Any]], bool]:
    """A predicate with :func:`arguments_error`'s verdict (True = valid)."""
    props: Mapping[str, Any] = schema.get("properties", {}) or {}
    required = tuple(schema.get("required", []) or [])
    closed = schema.get("additionalProperties", False) is False
    value_checks = {name: compile_value_check(sub) for name, sub in props.items()}

    def ok(args: Mapping[str, Any]) -> bool:
        for name in required:
            if name not in args:
                return False
        for name, value in args.items():
            check = value_checks.get(name)
            if check is None:
                if closed:
                    return False
                continue
            if not check(value):
                return False
        return True

    return ok


def tool_arguments_check(tool: Tool) -> Callable[[Mapping[str, Any]], bool]:
    """:func:`compile_arguments_check` of a tool's parameters, compiled once per tool."""
    check: Callable[[Mapping[str, Any]], bool] | None = tool.__dict__.get("_arguments_check")
    if check is None:
        check = compile_arguments_check(tool.parameters)
        object.__setattr__(tool, "_arguments_check", check)  # tools are immutable: caching is safe
    return check


def tool_arguments_error(tool: Tool, args: Mapping[str, Any]) -> ActionError | None:
    """:func:`arguments_error` for a tool's parameters, with the check compiled once per tool."""
    if tool_arguments_check(tool)(args):
        return None
    return arguments_error(tool.parameters, args)
