"""Live MCP servers as catalogs: ``--catalog mcp-config:FILE.json``.

The file is the standard MCP client configuration, ``{"mcpServers": {"NAME": {"command", "args",
"env", "cwd"}}}`` (stdio servers) or ``{"NAME": {"url": ...}}`` (streamable HTTP), with two
toolbias extensions: ``"setup"`` (commands that build the fresh working directory) and ``"state"``
(where the server keeps its state: :mod:`toolbias.integrations.mcp_pool`). Each server is a
domain of the catalog; its tools are listed through the official ``mcp`` SDK (extra ``mcp``), every
page of ``tools/list`` (``nextCursor``) read. A server that is missing, crashes or hangs is refused
with what/where/fix (each step under a timeout), never a hung command.

:class:`McpEnvironment` (environment kind ``mcp``, the catalog's ``meta["environment"]``) runs an
episode's decoded native calls on the real server, leased from the server's pool from a fresh
state and given back by ``check()`` at the episode's end. A server that fails is the episode's
infrastructure error naming it (calls under ``CALL_TIMEOUT_S``). Tasks come from ``--task-file``;
a task's ``check_calls`` are compared after the agent's calls and after its gold calls replayed
on a fresh server (:meth:`McpEnvironment.evaluate`).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..catalog.formats import read_tool
from ..catalog.model import Catalog, Domain, NativeAction, Task, Tool
from ..catalog.openai_format import read_json
from ..errors import CatalogError, MissingExtraError
from ..study.env import EpisodeEnvironment
from .mcp_pool import Lease, Live, fresh_workdir, pool_for, server_state

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
        server_state(server, where)
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


async def open_session(stack: Any, server: Mapping[str, Any], message_handler: Any = None) -> Any:
    """An MCP client session (not yet initialised) to ``server``, over streamable HTTP by its
    ``url``, else over stdio to its command; closed with ``stack``. ``message_handler`` receives the
    server's notifications (``notifications/tools/list_changed`` ...)."""
    from mcp import ClientSession, StdioServerParameters

    if server.get("url"):
        from mcp.client.streamable_http import streamable_http_client

        streams = await stack.enter_async_context(streamable_http_client(server["url"]))
    else:
        from mcp.client.stdio import stdio_client

        params = StdioServerParameters(command=server["command"], args=server["args"],
                                       env=server["env"] or None, cwd=server.get("cwd"))
        streams = await stack.enter_async_context(stdio_client(params, errlog=_errlog(stack)))
    kwargs = {"message_handler": message_handler} if message_handler is not None else {}
    return await stack.enter_async_context(ClientSession(streams[0], streams[1], **kwargs))


async def list_all_tools(session: Any) -> list[dict[str, Any]]:
    """Every ``tools/list`` entry of an initialised client session (every page), as MCP JSON."""
    from mcp import types

    tools: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        page = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
        tools.extend(t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in page.tools)
        cursor = getattr(page, "next_cursor", None) or getattr(page, "nextCursor", None)  # SDK 2.x: next_cursor
        if not cursor:
            return tools


def _errlog(stack: Any) -> Any:
    """Where a stdio server's own stderr goes (the SDK hands it to the subprocess, which needs a file
    descriptor): ours when it is a real file, else the process's original stderr (a captured or
    notebook ``sys.stderr`` has none), else nowhere."""
    import os
    import sys

    for stream in (sys.stderr, sys.__stderr__):
        try:
            if stream is not None:
                stream.fileno()
                return stream
        except (AttributeError, OSError, ValueError):
            continue
    return stack.enter_context(open(os.devnull, "w", encoding="utf-8"))


async def _list_tools(server: Mapping[str, Any]) -> list[dict[str, Any]]:
    from contextlib import AsyncExitStack

    async with AsyncExitStack() as stack:
        session = await open_session(stack, server)
        await session.initialize()
        return await list_all_tools(session)


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


class _Server(Live):
    """One live server process and its client session, owned by a thread of its own (the SDK's
    transports must be entered and left in one task): ``call`` sends it a request and waits."""

    def __init__(self, server: Mapping[str, Any]) -> None:
        self.loop = asyncio.new_event_loop()
        self.ready: Any = None
        self.queue: Any = None
        self.server = server
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.ready = asyncio.run_coroutine_threadsafe(self._make_queue(), self.loop).result(START_TIMEOUT_S)
        self.main = asyncio.run_coroutine_threadsafe(self._serve(), self.loop)
        started = asyncio.run_coroutine_threadsafe(self._wait_started(), self.loop)
        try:
            started.result(START_TIMEOUT_S)
        except BaseException:
            self.close()
            raise

    async def _make_queue(self) -> bool:
        self.queue = asyncio.Queue()
        self.up = asyncio.Event()
        self.failure: BaseException | None = None
        return True

    async def _wait_started(self) -> None:
        await self.up.wait()
        if self.failure is not None:
            raise self.failure

    async def _serve(self) -> None:
        from contextlib import AsyncExitStack

        try:
            async with AsyncExitStack() as stack:
                session = await open_session(stack, self.server)
                await asyncio.wait_for(session.initialize(), START_TIMEOUT_S)
                self.up.set()
                while True:
                    item = await self.queue.get()
                    if item is None:
                        return
                    name, args, fut = item
                    try:
                        result = await asyncio.wait_for(session.call_tool(name, args), CALL_TIMEOUT_S)
                        fut.set_result(result)
                    except BaseException as exc:  # noqa: BLE001 - handed to the caller
                        fut.set_exception(exc)
        except BaseException as exc:  # noqa: BLE001
            self.failure = exc
            self.up.set()

    def call(self, name: str, arguments: Mapping[str, Any]) -> Any:
        async def ask() -> Any:
            fut = self.loop.create_future()
            await self.queue.put((name, dict(arguments), fut))
            return await fut

        return asyncio.run_coroutine_threadsafe(ask(), self.loop).result(CALL_TIMEOUT_S + 5)

    def close(self) -> None:
        try:
            asyncio.run_coroutine_threadsafe(self.queue.put(None), self.loop).result(5)
            self.main.result(10)
        except Exception:  # noqa: BLE001 - the server is gone either way
            pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


def _result_text(result: Any) -> str:
    return "\n".join(getattr(c, "text", "") or json.dumps(c.model_dump(mode="json")) for c in result.content)


class McpEnvironment(EpisodeEnvironment):
    """One episode on a live MCP server (see the module doc)."""

    #: a task's gold replay is kept per process: its episodes are best played in one worker
    memoises_per_task = True

    @classmethod
    def for_task(cls, catalog: Catalog, task: Task, user_model: Any = None) -> McpEnvironment:
        return cls(catalog, task)

    def __init__(self, catalog: Catalog, task: Any) -> None:
        self.catalog = catalog
        self.domain = task.domain
        self.log: list[NativeAction] = []
        self.error: str | None = None
        server = dict((catalog.meta.get("mcp_servers") or {}).get(task.domain) or {})
        server.setdefault("env", {})
        server.update(_env_of(catalog, task.domain))
        self.task = task
        self.checks: list[str] | None = None
        self.server_name = task.domain
        self._lease: Lease | None = None
        self._spec = server

    @property
    def workdir(self) -> str | None:
        """The episode's working directory (a fresh copy), once its server is up."""
        return self._lease.workdir if self._lease is not None else None

    def _live(self) -> Live:
        if self._lease is None:
            pool = pool_for(self._spec, _Server, where=f"{self.catalog.name}: mcpServers.{self.domain}")
            self._lease = pool.lease()
            self._pool = pool
        return self._lease.server

    def execute(self, action: NativeAction, *, trusted: bool = False) -> dict[str, Any]:
        if action.domain != self.domain:
            return {"ok": False, "error": f"tool '{action.tool}' belongs to domain '{action.domain}'"}
        if self.error is not None:
            return {"ok": False, "error": self.error, "infrastructure": True}
        try:
            result = self._live().call(action.tool, action.arguments)
        except Exception as exc:  # noqa: BLE001 - a server that fails: the episode's infrastructure
            self.error = (f"MCP server '{self.server_name}' failed: {type(exc).__name__}: {exc}"
                          if str(exc) else f"MCP server '{self.server_name}' failed: {type(exc).__name__}")
            return {"ok": False, "error": self.error, "infrastructure": True}
        text = _result_text(result)
        if getattr(result, "is_error", None):  # SDK 2.x (toolbias[mcp] needs mcp>=2.3)
            return {"ok": False, "error": text}
        self.log.append(action)
        return {"ok": True, "tool": action.tool, "content": text}

    def tool_text(self, results: list[dict[str, Any]]) -> str:
        """The server's own words (its text content, or the error)."""
        parts = [str(r.get("content") if r.get("ok") else "Error: " + str(r.get("error"))) for r in results]
        return parts[0] if len(parts) == 1 else json.dumps(parts, ensure_ascii=False)

    def close(self) -> None:
        """Give the episode's server back to its pool (reused from a fresh state where the
        configuration's ``state`` allows it; closed when it failed)."""
        if self._lease is not None:
            lease, self._lease = self._lease, None
            self._pool.give_back(lease, healthy=self.error is None)

    def check_results(self) -> list[str]:
        """The results of the task's check calls in the server's present state."""
        out = []
        for c in self.task.meta.get("check_calls") or []:
            r = self.execute(NativeAction(self.domain, c["name"], dict(c.get("arguments") or {})))
            out.append(str(r.get("content") if r.get("ok") else "Error: " + str(r.get("error"))))
        return out

    def check(self) -> dict[str, Any] | None:
        """The episode ended: run the task's check calls (if any), stop its server and remove its
        working copy. No verdict here: :meth:`evaluate` compares with the gold's replay."""
        try:
            if self.task.meta.get("check_calls") and self.error is None:
                self.checks = self.check_results()
        finally:
            self.close()
        return None

    def evaluate(self, record: Any) -> dict[str, Any] | None:
        """With check calls: success is the gold rule and the check calls' results equal after the
        agent's calls and after the gold calls replayed on a fresh server. A server that failed makes
        the episode an infrastructure error (the record's termination), not a model failure."""
        from ..study.episode import Termination

        if self.error is not None:
            record.termination, record.infra_error = Termination.INFRA_ERROR, self.error
            return None
        if not self.task.meta.get("check_calls") or self.checks is None:
            return None
        from ..study.success import succeeded

        expected, gold_error = _gold_checks(self.catalog, self.task)
        if gold_error is not None:  # the gold's replay failed on its server: nothing to compare with
            record.termination, record.infra_error = Termination.INFRA_ERROR, f"gold replay: {gold_error}"
            return None
        same = expected == self.checks
        matched = succeeded(list(record.executed), list(record.gold), record.accept, record.match)
        return {"reward": 1.0 if (same and matched) else 0.0, "evaluator": "mcp", "calls_match": matched,
                "checks_equal": same,
                **({} if same else {"expected": expected[:3], "found": self.checks[:3]})}


_GOLD_CHECKS: dict[str, tuple[list[str], str | None]] = {}


def _gold_checks(catalog: Catalog, task: Task) -> tuple[list[str], str | None]:
    """The task's check calls' results after its gold calls replayed on a fresh server, and the
    server's failure if it failed; kept for the process (a task's gold replays the same on every
    fresh server: its episodes under every variant compare with one replay)."""
    key = json.dumps([catalog.name, task.domain, task.id, [[a.tool, a.arguments] for a in task.gold],
                      task.meta.get("check_calls")], sort_keys=True, default=str)
    if key not in _GOLD_CHECKS:
        env = McpEnvironment(catalog, task)
        try:
            for a in task.gold:
                env.execute(a)
            expected = env.check_results()
        finally:
            env.close()
        if env.error is not None:
            return expected, env.error  # an infrastructure failure is not kept
        _GOLD_CHECKS[key] = (expected, None)
    return _GOLD_CHECKS[key]


def _env_of(catalog: Catalog, domain: str) -> dict[str, Any]:
    """The server's ``env`` (kept out of the catalog's stored meta) re-read from the config file."""
    path = catalog.name.partition(":")[2]
    try:
        return {"env": read_config(path)[domain]["env"]}
    except (CatalogError, KeyError):
        return {}


def load_mcp_config(arg: str) -> Catalog:
    """``mcp-config:FILE.json``: one domain per server, its live tools."""
    servers = read_config(arg)
    domains: list[Domain] = []
    for name, server in servers.items():
        where = f"{arg}: mcpServers.{name}"
        listing = dict(server)
        workdir = fresh_workdir(server) if server.get("setup") else None  # as episodes run
        if workdir:
            listing["cwd"] = workdir
        try:
            entries = list_server_tools(name, listing, where)
        finally:
            if workdir:
                shutil.rmtree(workdir, ignore_errors=True)
        if not entries:
            raise CatalogError(f"MCP server '{name}' lists no tools", where=where)
        tools: list[Tool] = [read_tool(e, name, f"{where} tool {i}") for i, e in enumerate(entries)]
        domains.append(Domain(name=name, tools=tuple(tools), title=name))
    return Catalog(name=f"mcp-config:{arg}", domains=tuple(domains),
                   meta={"environment": "mcp", "mcp_servers": {n: {k: v for k, v in s.items() if k != "env"} for n, s in servers.items()}})


__all__ = ["CALL_TIMEOUT_S", "McpEnvironment", "START_TIMEOUT_S", "import_mcp", "list_all_tools", "list_server_tools",
           "load_mcp_config", "open_session", "read_config"]
