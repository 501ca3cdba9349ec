"""Reading and writing OpenAI function-calling tool lists.

Accepts ``[{"type": "function", "function": {...}}]`` and the bare
``[{"name", "description", "parameters"}]`` form; JSON errors name file and line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ..base import jsonfile
from ..errors import CatalogError
from .model import Tool
from .refs import inline_refs

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


def read_json(path: Path) -> Any:
    """Load JSON; a missing, unreadable or malformed file is a CatalogError with file and line."""
    return jsonfile.read_json(path, error=CatalogError)


def read_jsonl(path: Path) -> list[Any]:
    """Load JSON Lines; errors name file and line."""
    return jsonfile.read_jsonl(path, error=CatalogError)


def parse_tool(entry: Any, domain: str, where: str, cls: str | None = None) -> Tool:
    """One tool from either OpenAI form."""
    if not isinstance(entry, dict):
        raise CatalogError(f"a tool must be a JSON object, got {type(entry).__name__}", where=where,
                           fix='write {"type": "function", "function": {"name": ..., "parameters": ...}}')
    fn = entry.get("function") if entry.get("type") == "function" or "function" in entry else entry
    if not isinstance(fn, dict):
        raise CatalogError("'function' must be an object", where=where,
                           fix='write "function": {"name": ..., "description": ..., "parameters": ...}')
    name = fn.get("name")
    if not isinstance(name, str) or not name:
        raise CatalogError("tool has no 'name'", where=where, fix="add a non-empty string 'name'")
    params = fn.get("parameters") or {"type": "object", "properties": {}, "required": []}
    if not isinstance(params, dict):
        raise CatalogError("'parameters' must be a JSON-Schema object", where=f"{where} ({name})",
                           fix='write "parameters": {"type": "object", "properties": {...}}')
    try:  # pydantic-made schemas ($defs references, Optional fields) in the form operators rewrite
        params = inline_refs(params)
    except CatalogError as exc:
        raise CatalogError(exc.what, where=f"{where} ({name})", fix=exc.fix) from None
    desc = fn.get("description", "")
    tool_cls = cls or fn.get("class") or entry.get("class") or infer_class(name)
    return Tool(name=name, description=desc if isinstance(desc, str) else str(desc), parameters=params,
                domain=domain, cls=str(tool_cls), effect=fn.get("effect"))


def parse_tools(data: Any, domain: str = "default", source: str = "<tools>") -> list[Tool]:
    """Tools from a list in either OpenAI form (or ``{"tools": [...]}``)."""
    if isinstance(data, dict) and isinstance(data.get("tools"), list):
        data = data["tools"]
    if not isinstance(data, list):
        raise CatalogError("expected a JSON list of tools", where=source,
                           fix='write [{"type": "function", "function": {"name": ..., "parameters": ...}}]')
    return [parse_tool(e, domain, f"{source}[{i}]") for i, e in enumerate(data)]


def dump_tools(tools: Iterable[Tool] | Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI-format list (``{"type": "function", "function": ...}``)."""
    out = []
    for t in tools:
        out.append(t.to_openai() if isinstance(t, Tool) else t)
    return out
