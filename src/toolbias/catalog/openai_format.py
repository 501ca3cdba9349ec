"""Reading and writing OpenAI function-calling tool lists.

Reading goes through :mod:`.formats`, the one reader of every tool format (OpenAI chat and
Responses, Anthropic, Gemini, MCP); JSON errors name file and line.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ..base import jsonfile
from ..errors import CatalogError
from .formats import read_tool, read_tools
from .model import Tool


def read_json(path: Path) -> Any:
    """Load JSON; a missing, unreadable or malformed file is a CatalogError with file and line."""
    return jsonfile.read_json(path, error=CatalogError)


def read_jsonl(path: Path) -> list[Any]:
    """Load JSON Lines; errors name file and line."""
    return jsonfile.read_jsonl(path, error=CatalogError)


def parse_tool(entry: Any, domain: str, where: str, cls: str | None = None) -> Tool:
    """One tool in any format :mod:`.formats` reads (OpenAI chat or Responses, Anthropic, Gemini, MCP)."""
    return read_tool(entry, domain, where, cls)


def parse_tools(data: Any, domain: str = "default", source: str = "<tools>") -> list[Tool]:
    """Tools from a tool list in any format :mod:`.formats` reads (every page of an MCP dump, JSON-RPC
    envelopes, Gemini ``functionDeclarations``); an empty list is refused."""
    return read_tools(data, domain, source)


def dump_tools(tools: Iterable[Tool] | Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI-format list (``{"type": "function", "function": ...}``)."""
    out = []
    for t in tools:
        out.append(t.to_openai() if isinstance(t, Tool) else t)
    return out
