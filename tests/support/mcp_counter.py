"""A stdio MCP server that keeps state in its memory, for tests of how toolbias makes an episode's
server fresh: ``bump`` adds one to a counter the process holds and answers its new value;
``crash`` ends the process without an answer (a server that dies mid-episode).

Run it as ``python tests/support/mcp_counter.py`` (an ``mcp-config`` entry's command). Written
with the ``mcp`` SDK's own server class, as real servers are."""

from __future__ import annotations

import asyncio
import os


def main() -> None:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("counter")
    count = {"n": 0}

    @server.tool(name="bump", description="Add one to the counter and return its value.")
    def bump() -> str:
        count["n"] += 1
        return str(count["n"])

    @server.tool(name="crash", description="End the server process at once.")
    def crash() -> str:
        os._exit(3)

    asyncio.run(server.run_stdio_async())


if __name__ == "__main__":
    main()
