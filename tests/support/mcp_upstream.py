"""A small MCP server for the MCP proxy's tests, built on the ``mcp`` SDK: run as a script over stdio.

Its tools: ``echo`` (gives its text back, as text and as structured content), ``add_tool`` (adds a
tool ``shout`` and sends ``notifications/tools/list_changed``: real servers here never change their
tools), ``crash`` (the process exits at once: an upstream that dies during a session) and ``hang``
(never answers)."""

from __future__ import annotations

import os
from typing import Any

import anyio
from mcp import types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.stdio import stdio_server

_TEXT = {"type": "object", "properties": {"text": {"type": "string", "description": "What to say."}},
         "required": ["text"]}
TOOLS: list[dict[str, Any]] = [
    {"name": "echo", "description": "Say the text back.", "inputSchema": _TEXT,
     "annotations": {"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False}},
    {"name": "add_tool", "description": "Add the tool 'shout'.", "inputSchema": {"type": "object", "properties": {}},
     "annotations": {"readOnlyHint": False, "destructiveHint": False, "openWorldHint": False}},
    {"name": "crash", "description": "Stop the server at once.", "inputSchema": {"type": "object", "properties": {}}},
    {"name": "hang", "description": "Never answer.", "inputSchema": {"type": "object", "properties": {}}},
]
SHOUT = {"name": "shout", "description": "Say the text back in capitals.", "inputSchema": _TEXT}


def main() -> None:
    tools = list(TOOLS)

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult.model_validate({"tools": tools})

    async def call_tool(ctx: Any, params: Any) -> types.CallToolResult:
        args = params.arguments or {}
        if params.name == "crash":
            os._exit(3)
        if params.name == "hang":
            await anyio.sleep_forever()
        if params.name == "add_tool":
            if SHOUT not in tools:
                tools.append(SHOUT)
            await ctx.session.send_tool_list_changed()
            return types.CallToolResult.model_validate({"content": [{"type": "text", "text": "added shout"}]})
        if params.name in ("echo", "shout"):
            text = str(args.get("text", ""))
            text = text.upper() if params.name == "shout" else text
            return types.CallToolResult.model_validate({"content": [{"type": "text", "text": text}],
                                                        "structuredContent": {"said": text}})
        return types.CallToolResult.model_validate({"content": [{"type": "text", "text": f"no tool {params.name}"}],
                                                    "isError": True})

    server: Server[Any] = Server("toolbias-test-upstream", on_list_tools=list_tools, on_call_tool=call_tool)

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options(NotificationOptions(tools_changed=True)))

    anyio.run(run)


if __name__ == "__main__":
    main()
