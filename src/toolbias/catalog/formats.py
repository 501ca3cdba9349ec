"""One reader (and writer) for tool lists in every format agents use today.

:func:`read_tools` takes parsed JSON in any of these forms and gives :class:`~.model.Tool` values,
every parameter kept, or raises :class:`~toolbias.errors.CatalogError` naming what, where and the fix:

- OpenAI chat tools ``{"type": "function", "function": {"name", "description", "parameters"}}``;
- OpenAI Responses tools ``{"type": "function", "name", "description", "parameters"}``;
- Anthropic tools ``{"name", "description", "input_schema"}`` (``"type": "custom"`` optional);
- Gemini function declarations ``{"name", "description", "parameters"}`` with OpenAPI types
  (``"STRING"``, ``nullable``) or ``"parametersJsonSchema"``, bare or wrapped in
  ``{"functionDeclarations": [...]}`` / ``{"tools": [{"functionDeclarations": [...]}]}``;
- MCP ``tools/list`` results ``{"tools": [{"name", "title", "description", "inputSchema",
  "outputSchema", "annotations"}], "nextCursor"}``: one page, or every page of a paginated dump
  (a list of result pages or JSON-RPC responses, chained by ``nextCursor``);
- bare lists of any of these and JSON-RPC envelopes ``{"jsonrpc", "id", "result": ...}``.

A tool list is refused when it is empty, when a description is not a string, when a tool has a
``type`` that is no function (a hosted tool: web search, computer use, bash), when a schema sits
under a key no format defines, and when a paginated dump is cut short. :func:`write_tools` writes
tools in each format; reading what it wrote gives the same tools (``FORMATS`` lists the names).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import CatalogError
from .model import Tool, json_copy
from .refs import check_nesting, inline_refs

_VERBS = re.compile(
    r"^(set|get|start|stop|toggle|enable|disable|add|remove|delete|create|update|list|open|close|"
    r"lock|unlock|play|pause|arm|disarm|run|cancel|schedule|adjust|activate|deactivate|turn|check|"
    r"reset|clear|select|change|show|send|find|search|book|query|fetch|make|move|load|save|configure)_"
)


def infer_class(name: str) -> str:
    """A tool's class from its name when the catalog gives none: ``set_window_state`` -> ``window``."""
    base = name.split(".")[-1]
    stripped = _VERBS.sub("", base)
    return (stripped.split("_")[0] or base).lower()

#: the formats :func:`write_tools` writes (``toolbias shape --format``)
FORMATS = ("openai", "responses", "anthropic", "gemini", "mcp")

EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}, "required": []}
#: keys under which each format keeps a tool's parameter schema
_SCHEMA_KEYS = ("parameters", "input_schema", "inputSchema", "parametersJsonSchema", "parameters_json_schema")
#: keys a tool entry may carry beside its name, description and schema that hold no parameter
_KNOWN_KEYS = frozenset({
    "type", "function", "name", "description", "class", "effect", "uid", "group", "strict", "title",
    "outputSchema", "annotations", "_meta", "icons", "cache_control", "response", "responseJsonSchema",
    "behavior", "input_examples", *_SCHEMA_KEYS})
#: Gemini (OpenAPI 3.0 subset) keys that JSON Schema spells otherwise
_OPENAPI_ONLY = ("nullable", "example", "propertyOrdering", "property_ordering")
_FIX_LIST = ('write a list of tools, e.g. [{"type": "function", "function": {"name": ..., "parameters": ...}}], '
             'an MCP tools/list result {"tools": [...]} or Gemini {"functionDeclarations": [...]}')


def read_tools(data: Any, domain: str = "default", source: str = "<tools>") -> list[Tool]:
    """Every tool of ``data`` (any format above), in order; refuses an empty list."""
    entries = _entries(data, source)
    tools = [read_tool(entry, domain, where, gemini=gemini) for entry, where, gemini in entries]
    if not tools:
        raise CatalogError("the tool list is empty", where=source, fix="give at least one tool")
    return tools


#: keys of a tool-list container (not domain names)
_CONTAINER_KEYS = frozenset({"tools", "functionDeclarations", "function_declarations", "result", "jsonrpc", "error",
                             "id", "nextCursor"})


def read_domains(data: Any, domain: str = "default", source: str = "<tools>") -> list[Tool]:
    """Like :func:`read_tools`, and also ``{domain: tool list}`` (what ``toolbias shape`` writes for a
    catalog of several domains, in any format): each key a domain of its own."""
    if isinstance(data, dict) and data and not (_CONTAINER_KEYS & set(data)) and \
            all(isinstance(v, (list, dict)) for v in data.values()):
        return [t for name, tools in data.items() for t in read_tools(tools, str(name), f"{source} {name!r}")]
    return read_tools(data, domain, source)


def read_tool(entry: Any, domain: str, where: str, cls: str | None = None, *, gemini: bool = False) -> Tool:
    """One tool in any format (see the module docstring). ``gemini``: it came from a
    ``functionDeclarations`` list, so its ``parameters`` are OpenAPI schemas."""
    if not isinstance(entry, dict):
        raise CatalogError(f"a tool must be a JSON object, got {type(entry).__name__}", where=where,
                           fix='write {"type": "function", "function": {"name": ..., "parameters": ...}}')
    kind = entry.get("type")
    if kind is not None and kind not in ("function", "custom"):
        raise CatalogError(f"tool of unknown type {kind!r} (not a function the model calls with arguments)",
                           where=_named(where, entry),
                           fix="keep only function tools: OpenAI {\"type\": \"function\"}, Anthropic tools with "
                               "input_schema, MCP tools, Gemini function declarations")
    if "function" in entry:
        fn = entry["function"]
        if not isinstance(fn, dict):
            raise CatalogError("'function' must be an object", where=where,
                               fix='write "function": {"name": ..., "description": ..., "parameters": ...}')
        extra = {k: entry[k] for k in ("class", "effect") if k in entry}
        fn = {**extra, **fn}
    elif kind == "custom" and "input_schema" not in entry:
        raise CatalogError("tool of type 'custom' without an 'input_schema' (an OpenAI custom tool takes free "
                           "text, not arguments)", where=_named(where, entry),
                           fix="give it as a function tool with a JSON-Schema 'parameters'")
    else:
        fn = entry
    name = fn.get("name")
    if not isinstance(name, str) or not name:
        raise CatalogError("tool has no 'name'", where=where, fix="add a non-empty string 'name'")
    where = f"{where} ({name})"
    desc = fn.get("description")
    if desc is None:
        desc = ""
    if not isinstance(desc, str):
        raise CatalogError(f"'description' must be a string, got {type(desc).__name__}", where=where,
                           fix="write the description as one JSON string")
    params = _schema(fn, where, gemini)
    title = fn.get("title")
    if title is not None and not isinstance(title, str):
        raise CatalogError(f"'title' must be a string, got {type(title).__name__}", where=where,
                           fix="write the title as one JSON string, or leave it out")
    output = fn.get("outputSchema")
    annotations = fn.get("annotations")
    for key, value in (("outputSchema", output), ("annotations", annotations)):
        if value is not None and not isinstance(value, dict):
            raise CatalogError(f"'{key}' must be a JSON object, got {type(value).__name__}", where=where,
                               fix=f"write '{key}' as an object, or leave it out")
    tool_cls = cls or fn.get("class") or entry.get("class")
    if not tool_cls:
        tool_cls = infer_class(name)
    return Tool(name=name, description=desc, parameters=params, domain=domain, cls=str(tool_cls),
                effect=fn.get("effect"), title=title, output_schema=json_copy(output) if output else None,
                annotations=json_copy(annotations) if annotations else None)


def _named(where: str, entry: Mapping[str, Any]) -> str:
    name = entry.get("name")
    return f"{where} ({name})" if isinstance(name, str) and name else where


def _schema(fn: Mapping[str, Any], where: str, gemini: bool) -> dict[str, Any]:
    """The parameter schema under whichever key the format uses, as self-contained JSON Schema."""
    present = [k for k in _SCHEMA_KEYS if fn.get(k) is not None]
    for key, value in fn.items():
        if key not in _KNOWN_KEYS and isinstance(value, dict) and ("properties" in value or "type" in value):
            raise CatalogError(f"'{key}' looks like a parameter schema, but no tool format keeps one there",
                               where=where, fix=f"put the schema under one of: {', '.join(_SCHEMA_KEYS)}")
    if len(present) > 1 and any(fn[k] != fn[present[0]] for k in present[1:]):
        raise CatalogError(f"two different parameter schemas ({' and '.join(repr(k) for k in present)})",
                           where=where, fix="keep one schema per tool")
    if not present:
        return json_copy(EMPTY_SCHEMA)
    key = present[0]
    params = fn[key]
    if not isinstance(params, dict):
        raise CatalogError(f"'{key}' must be a JSON-Schema object, got {type(params).__name__}", where=where,
                           fix=f'write "{key}": {{"type": "object", "properties": {{...}}}}')
    check_nesting(params, where)  # before any recursive walk: a few hundred levels exhaust the stack
    if key == "parameters" and (gemini or _has_openapi_types(params)):
        params = from_openapi(params, f"{where} parameters")
    try:  # pydantic-made schemas ($defs references, Optional fields) in the form operators rewrite
        return inline_refs(json_copy(params))
    except CatalogError as exc:
        raise CatalogError(exc.what, where=where, fix=exc.fix) from None


def _has_openapi_types(schema: Any) -> bool:
    """Any ``type`` spelt in capitals (``"OBJECT"``): Gemini's OpenAPI enum, no JSON-Schema type."""
    if isinstance(schema, list):
        return any(_has_openapi_types(v) for v in schema)
    if not isinstance(schema, dict):
        return False
    t = schema.get("type")
    if isinstance(t, str) and t != t.lower():
        return True
    props = schema.get("properties")
    if isinstance(props, dict) and any(_has_openapi_types(v) for v in props.values()):
        return True
    return any(_has_openapi_types(schema.get(k)) for k in ("items", "anyOf"))


def from_openapi(schema: Any, where: str) -> Any:
    """A Gemini (OpenAPI 3.0 subset) schema as JSON Schema: types in lower case, ``nullable`` as a
    ``"null"`` type, ``example`` as ``examples``, ``propertyOrdering`` as the order of ``properties``."""
    if isinstance(schema, list):
        return [from_openapi(v, f"{where}[{i}]") for i, v in enumerate(schema)]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _OPENAPI_ONLY:
            continue
        if key == "type" and isinstance(value, str):
            value = value.lower()
            if value == "type_unspecified":
                raise CatalogError("schema type TYPE_UNSPECIFIED", where=where, fix="name the parameter's type")
        elif key == "properties" and isinstance(value, dict):
            value = {k: from_openapi(v, f"{where}.{k}") for k, v in value.items()}
            order = schema.get("propertyOrdering", schema.get("property_ordering"))
            if isinstance(order, list) and set(order) <= set(value):
                value = {**{k: value[k] for k in order}, **value}
        elif key in ("items", "anyOf"):
            value = from_openapi(value, f"{where}.{key}")
        out[key] = value
    if "example" in schema:
        out["examples"] = [schema["example"]]
    if schema.get("nullable") is True and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out


# --------------------------------------------------------------------------- containers


def _entries(data: Any, source: str) -> list[tuple[Any, str, bool]]:
    """(tool entry, where, gemini) for every tool of ``data``, across pages and wrappers."""
    if isinstance(data, list) and data and all(_is_page(p) for p in data):
        return _pages(data, source)
    if isinstance(data, dict):
        page = _result(data, source)
        if isinstance(page.get("functionDeclarations", page.get("function_declarations")), list):
            return _declarations(page, source)
        tools = page.get("tools")
        if not isinstance(tools, list):
            raise CatalogError("expected a JSON list of tools (or an object with a 'tools' list)", where=source,
                               fix=_FIX_LIST)
        if page.get("nextCursor"):
            raise CatalogError(f"this is one page of a paginated tools/list (nextCursor {page['nextCursor']!r}); "
                               "the tools of the later pages are missing", where=source,
                               fix="save every page: a JSON list of the tools/list results (or JSON-RPC "
                                   "responses), in order")
        return _list(tools, f"{source} tools")
    if isinstance(data, list):
        return _list(data, source)
    raise CatalogError(f"expected a JSON list of tools, got {type(data).__name__}", where=source, fix=_FIX_LIST)


def _list(items: list[Any], where: str) -> list[tuple[Any, str, bool]]:
    out: list[tuple[Any, str, bool]] = []
    for i, item in enumerate(items):
        if isinstance(item, dict) and isinstance(item.get("functionDeclarations",
                                                          item.get("function_declarations")), list):
            out.extend(_declarations(item, f"{where}[{i}]"))
        else:
            out.append((item, f"{where}[{i}]", False))
    return out


def _declarations(wrapper: Mapping[str, Any], where: str) -> list[tuple[Any, str, bool]]:
    key = "functionDeclarations" if "functionDeclarations" in wrapper else "function_declarations"
    return [(d, f"{where}.{key}[{i}]", True) for i, d in enumerate(wrapper[key])]


def _result(data: dict[str, Any], where: str) -> dict[str, Any]:
    """The result of a JSON-RPC response (or ``data`` itself); a JSON-RPC error is refused."""
    if "error" in data and ("jsonrpc" in data or "id" in data):
        err = data["error"]
        message = err.get("message") if isinstance(err, dict) else err
        raise CatalogError(f"the file holds a JSON-RPC error, not tools: {message}", where=where,
                           fix="save a successful tools/list response")
    if "result" in data and ("jsonrpc" in data or "id" in data or len(data) == 1):
        result = data["result"]
        if not isinstance(result, dict):
            raise CatalogError("the JSON-RPC 'result' must be an object with a 'tools' list", where=where,
                               fix=_FIX_LIST)
        return result
    return data


def _is_page(item: Any) -> bool:
    """A tools/list result page or JSON-RPC response (not a tool)."""
    if not isinstance(item, dict) or "name" in item or "function" in item:
        return False
    return "jsonrpc" in item or "result" in item or isinstance(item.get("tools"), list)


def _pages(pages: list[Any], source: str) -> list[tuple[Any, str, bool]]:
    out: list[tuple[Any, str, bool]] = []
    for p, raw in enumerate(pages):
        where = f"{source} page {p + 1}"
        page = _result(raw, where)
        tools = page.get("tools")
        if not isinstance(tools, list):
            raise CatalogError("a tools/list page without a 'tools' list", where=where, fix=_FIX_LIST)
        cursor = page.get("nextCursor")
        last = p == len(pages) - 1
        if last and cursor:
            raise CatalogError(f"the last page saved still has a nextCursor ({cursor!r}): the dump is cut short",
                               where=where, fix="save every page, up to the one without a nextCursor")
        if not last and not cursor:
            raise CatalogError(f"page {p + 1} has no nextCursor, yet {len(pages) - p - 1} more page(s) follow",
                               where=where, fix="save the pages of one tools/list walk, in order")
        out.extend(_list(tools, f"{where} tools"))
    return out


# --------------------------------------------------------------------------- writing


def _openai(t: Tool) -> dict[str, Any]:
    return t.to_openai()


def _responses(t: Tool) -> dict[str, Any]:
    return {"type": "function", "name": t.name, "description": t.description, "parameters": json_copy(t.parameters)}


def _anthropic(t: Tool) -> dict[str, Any]:
    return {"name": t.name, "description": t.description, "input_schema": json_copy(t.parameters)}


def _gemini(t: Tool) -> dict[str, Any]:
    return {"name": t.name, "description": t.description, "parametersJsonSchema": json_copy(t.parameters)}


def _mcp(t: Tool) -> dict[str, Any]:
    out: dict[str, Any] = {"name": t.name}
    if t.title is not None:
        out["title"] = t.title
    out["description"] = t.description
    out["inputSchema"] = json_copy(t.parameters)
    if t.output_schema is not None:
        out["outputSchema"] = json_copy(t.output_schema)
    if t.annotations is not None:
        out["annotations"] = json_copy(t.annotations)
    return out


_WRITERS: dict[str, Callable[[Tool], dict[str, Any]]] = {
    "openai": _openai, "responses": _responses, "anthropic": _anthropic, "gemini": _gemini, "mcp": _mcp}


def tool_entry(tool: Tool, fmt: str) -> dict[str, Any]:
    """One tool as ``fmt`` writes it."""
    return _writer(fmt)(tool)


def write_tools(tools: Sequence[Tool], fmt: str = "openai") -> Any:
    """``tools`` in ``fmt`` (one of :data:`FORMATS`): a list for openai, responses and anthropic
    (the request's ``tools``), ``[{"functionDeclarations": [...]}]`` for gemini (its ``tools``) and
    a ``tools/list`` result ``{"tools": [...]}`` for mcp."""
    writer = _writer(fmt)
    entries = [writer(t) for t in tools]
    if fmt == "gemini":
        return [{"functionDeclarations": entries}]
    if fmt == "mcp":
        return {"tools": entries}
    return entries


def _writer(fmt: str) -> Callable[[Tool], dict[str, Any]]:
    try:
        return _WRITERS[fmt]
    except KeyError:
        raise CatalogError(f"unknown tool format '{fmt}'", fix=f"use one of: {', '.join(FORMATS)}") from None


__all__ = ["EMPTY_SCHEMA", "FORMATS", "from_openapi", "read_domains", "read_tool", "read_tools", "tool_entry", "write_tools"]
