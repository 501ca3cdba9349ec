"""Live MCP servers as catalogs: ``--catalog mcp-config:FILE.json``.

The file is the standard MCP client configuration, ``{"mcpServers": {"NAME": {"command", "args",
"env", "cwd"}}}`` (stdio servers) or ``{"NAME": {"url": ...}}`` (streamable HTTP). Each server is a
domain of the catalog; its tools are listed through the official ``mcp`` SDK (extra ``mcp``), every
page of ``tools/list`` (``nextCursor``) read. A server that is missing, crashes or hangs is refused
with what/where/fix (each step under a timeout), never a hung command.

Not done yet: episodes executed on the live server (the catalog names no environment, so
``toolbias run`` on it refuses with "has no tasks").
"""

from __future__ import annotations

import asyncio
import shutil
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..catalog.formats import read_tool
from ..catalog.model import Catalog, Domain, Tool
from ..catalog.openai_format import read_json
from ..errors import CatalogError, MissingExtraError

#: seconds a server may take to start and answer, and to answer one request
START_TIMEOUT_S = 30.0
CALL_TIMEOUT_S = 30.0


def import_mcp() -> Any:
    """The ``mcp`` SDK, or the "install toolbias[mcp]" error."""
    try:
        import mcp
    except ImportError:
        raise MissingExtraError("mcp", "mcp", "live MCP servers (mcp-config:FILE)") from None
    return mcp


def read_config(path: str | Path) -> dict[str, dict[str, Any]]:
    """The servers of a client configuration file, by name (checked: each has a command or a url)."""
    p = Path(path)
    data = read_json(p)
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict) or not servers:
        raise CatalogError("expected an MCP client configuration with a non-empty 'mcpServers' object",
                           where=str(p), fix='write {"mcpServers": {"NAME": {"command": ..., "args": [...]}}}')
    out: dict[str, dict[str, Any]] = {}
    for name, server in servers.items():
        where = f"{p}: mcpServers.{name}"
        if not isinstance(server, dict) or not (isinstance(server.get("command"), str) or isinstance(server.get("url"), str)):
            raise CatalogError("a server needs a 'command' (stdio) or a 'url' (streamable HTTP)", where=where,
                               fix='write {"command": "mcp-server-time", "args": []} or {"url": "http://..."}')
        args = server.get("args", [])
        env = server.get("env", {})
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise CatalogError("'args' must be a list of strings", where=where)
        if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
            raise CatalogError("'env' must be an object of strings", where=where)
        cwd = server.get("cwd")
        if cwd is not None:
            cwd = str((p.parent / str(cwd)).resolve())
        out[str(name)] = {**server, "args": list(args), "env": dict(env), "cwd": cwd}
    return out


def _run(coro: Any, timeout: float) -> Any:
    """Run ``coro`` to completion in a thread of its own (callers may be inside an event loop)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(asyncio.wait_for(coro, timeout))
        except BaseException as exc:  # noqa: BLE001 - handed back to the caller's thread
            box["error"] = exc

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(timeout + 5)
    if t.is_alive():
        raise TimeoutError(f"no answer in {timeout:.0f} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


async def _list_tools(server: Mapping[str, Any]) -> list[dict[str, Any]]:
    from contextlib import AsyncExitStack

    from mcp import ClientSession, StdioServerParameters

    async with AsyncExitStack() as stack:
        if server.get("url"):
            from mcp.client.streamable_http import streamable_http_client

            streams = await stack.enter_async_context(streamable_http_client(server["url"]))
        else:
            from mcp.client.stdio import stdio_client

            params = StdioServerParameters(command=server["command"], args=server["args"],
                                           env=server["env"] or None, cwd=server.get("cwd"))
            streams = await stack.enter_async_context(stdio_client(params))
        session = await stack.enter_async_context(ClientSession(streams[0], streams[1]))
        await session.initialize()
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            from mcp import types

            page = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
            tools.extend(t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in page.tools)
            cursor = page.next_cursor if hasattr(page, "next_cursor") else page.nextCursor
            if not cursor:
                return tools


def list_server_tools(name: str, server: Mapping[str, Any], where: str) -> list[dict[str, Any]]:
    """The server's ``tools/list`` entries (every page), as MCP JSON; refused when it cannot be reached."""
    import_mcp()
    if not server.get("url") and shutil.which(server["command"]) is None:
        raise CatalogError(f"the command '{server['command']}' of MCP server '{name}' is not installed",
                           where=where, fix="install the server (e.g. pip install mcp-server-time) or fix 'command'")
    try:
        return list(_run(_list_tools(server), START_TIMEOUT_S))
    except (TimeoutError, asyncio.TimeoutError):
        raise CatalogError(f"MCP server '{name}' did not list its tools within {START_TIMEOUT_S:.0f} s",
                           where=where, fix="check that the server starts on its own (run its command)") from None
    except Exception as exc:  # the server crashed or refused: its own words
        raise CatalogError(f"MCP server '{name}' failed while listing its tools: {type(exc).__name__}: {exc}",
                           where=where, fix="check that the server starts on its own (run its command)") from None


def load_mcp_config(arg: str) -> Catalog:
    """``mcp-config:FILE.json``: one domain per server, its live tools."""
    servers = read_config(arg)
    domains: list[Domain] = []
    for name, server in servers.items():
        where = f"{arg}: mcpServers.{name}"
        entries = list_server_tools(name, server, where)
        if not entries:
            raise CatalogError(f"MCP server '{name}' lists no tools", where=where)
        tools: list[Tool] = [read_tool(e, name, f"{where} tool {i}") for i, e in enumerate(entries)]
        domains.append(Domain(name=name, tools=tuple(tools), title=name))
    return Catalog(name=f"mcp-config:{arg}", domains=tuple(domains),
                   meta={"mcp_servers": {n: {k: v for k, v in s.items() if k != "env"} for n, s in servers.items()}})


__all__ = ["CALL_TIMEOUT_S", "START_TIMEOUT_S", "import_mcp", "list_server_tools", "load_mcp_config", "read_config"]
