"""The MCP proxy's variant, apart from any transport: tools from a tools/list, reached tools, hints."""

from __future__ import annotations

from typing import Any

import pytest

from toolbias.errors import CatalogError
from toolbias.proxy.mcp_variant import HINT_DEFAULTS, McpConversation, build_mcp_variant, combine_annotations
from toolbias.variants import resolve_variant

_PATH = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
ENTRIES: list[dict[str, Any]] = [
    {"name": "read_file", "title": "Read a file", "description": "Read a file.", "inputSchema": _PATH,
     "outputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
     "annotations": {"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False}},
    {"name": "delete_file", "description": "Delete a file.", "inputSchema": _PATH,
     "annotations": {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True, "openWorldHint": False}},
    {"name": "touch_file", "description": "Create an empty file.", "inputSchema": _PATH,
     "annotations": {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": True,
                     "openWorldHint": False}},
]


def test_hints_combine_conservatively() -> None:
    read = {"readOnlyHint": True, "destructiveHint": True, "idempotentHint": True, "openWorldHint": False}
    write = {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False, "openWorldHint": False}
    assert combine_annotations([read, read]) == {"readOnlyHint": True, "destructiveHint": False,
                                                 "idempotentHint": True, "openWorldHint": False}
    assert combine_annotations([read, write]) == {"readOnlyHint": False, "destructiveHint": False,
                                                  "idempotentHint": False, "openWorldHint": False}
    # a member that says nothing takes the specification's defaults: it may destroy, reach out, repeat effects
    assert combine_annotations([read, None]) == {"readOnlyHint": False, "destructiveHint": True,
                                                 "idempotentHint": False, "openWorldHint": True}
    assert combine_annotations([None, None]) is None and combine_annotations([]) is None
    assert combine_annotations([{}]) == HINT_DEFAULTS


def test_kept_tools_keep_what_the_server_said_and_merged_tools_combine() -> None:
    native = build_mcp_variant(ENTRIES, resolve_variant("native"))
    assert [t["name"] for t in native.tools] == ["read_file", "delete_file", "touch_file"]
    assert native.tools[0]["title"] == "Read a file" and "outputSchema" in native.tools[0]
    assert native.tools[1]["annotations"] == ENTRIES[1]["annotations"]
    merged = build_mcp_variant(ENTRIES, resolve_variant("fully_merged"))
    (tool,) = merged.tools
    assert merged.reached[tool["name"]] == ("read_file", "delete_file", "touch_file")
    assert "outputSchema" not in tool and "title" not in tool
    assert tool["annotations"] == {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True,
                                   "openWorldHint": False}


def test_protocol_tools_reach_nothing_and_claim_nothing() -> None:
    discovery = build_mcp_variant(ENTRIES, resolve_variant("schema_discovery"))
    by_name = {t["name"]: t for t in discovery.tools}
    assert discovery.reached["list_methods"] == () and "annotations" not in by_name["list_methods"]
    assert discovery.reached["invoke"] == ("read_file", "delete_file", "touch_file")


def test_a_session_answers_protocol_calls_and_rejections_itself() -> None:
    conv = McpConversation(build_mcp_variant(ENTRIES, resolve_variant("schema_discovery")))
    _, listed = conv.decode("list_methods", {"class": "live"})
    assert not isinstance(listed, list) and not listed.is_error and "read_file" in listed.text
    _, wrong = conv.decode("read_file", {"path": "a"})
    assert not isinstance(wrong, list) and wrong.is_error and wrong.text.startswith("Error: Unknown tool 'read_file'")
    log = conv.log
    assert (log.turns, log.replies, log.rejections, log.native_calls) == (2, 1, 1, 0)


def test_an_unreadable_tool_list_is_refused() -> None:
    with pytest.raises(CatalogError):
        build_mcp_variant([{"name": "x", "description": 3}], resolve_variant("native"))
    with pytest.raises(CatalogError):
        build_mcp_variant([], resolve_variant("native"))
