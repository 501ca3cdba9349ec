"""``toolbias mcp-proxy``: an MCP server that serves a variant of another MCP server's tools.

    MCP client --(variant tools)--> mcp-proxy --(native calls)--> the real MCP server

Built on the official ``mcp`` SDK (extra ``mcp``). The upstream is one client session (over stdio
to a command, or streamable HTTP to a URL) in the proxy's own event loop; the proxy serves any
number of client sessions over stdio (the default) or streamable HTTP (``listen``). For each
client session (one per connection, its state in the SDK's per-connection state):

- ``tools/list`` gives the variant's tools (:mod:`toolbias.proxy.mcp_variant`: built from the
  upstream's ``tools/list``, every page, through the shared reader; verified);
- ``tools/call`` is decoded with the session's codec session: protocol calls (begin/set/commit,
  resolve, list_methods/invoke ...) are answered here, off-schema calls come back as ``isError``
  results worded ``Error: ...`` (the model can recover from them), native calls are forwarded to
  the upstream and its result returned as it gave it (content, structuredContent, isError);
- every session is a ``live`` row in the store (:class:`~toolbias.proxy.records.Recorder`, the
  HTTP proxy's writer), so ``toolbias report --store`` shows it beside the HTTP proxy's.

A ``notifications/tools/list_changed`` from the upstream rebuilds and re-verifies the variant and
notifies every client (a handshake-era connection directly, a 2026-era one through
``subscriptions/listen``). An upstream that is missing, crashes or hangs is a clear error (each
step under a timeout): at start-up the command fails with what/where/fix; during a session the
call comes back as an ``isError`` result naming the upstream.
"""

from __future__ import annotations

import os
import shutil
import sys
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit
from weakref import WeakKeyDictionary

from ..errors import ToolbiasError
from ..integrations.mcp_live import CALL_TIMEOUT_S, START_TIMEOUT_S, import_mcp, list_all_tools, open_session
from ..variants import resolve_variant
from ..variants.codec import Control
from .mcp_variant import Answer, McpConversation, McpVariant, build_mcp_variant
from .records import Recorder

#: the path a ``listen`` URL serves MCP on when it names none
DEFAULT_PATH = "/mcp"


@dataclass
class McpProxyConfig:
    """Everything ``toolbias mcp-proxy`` takes (each field has a CLI option)."""

    variant: str
    command: tuple[str, ...] = ()       # the upstream over stdio
    upstream_url: str | None = None     # the upstream over streamable HTTP
    control: Control = Control.STRICT
    instructions: bool = False          # give the variant's instruction as the server's instructions
    study: str | None = None            # store study name [default: mcp-proxy|<variant>]
    model: str = "mcp-client"           # the store's model column: who called the tools
    start_timeout: float = START_TIMEOUT_S
    call_timeout: float = CALL_TIMEOUT_S
    verify: bool = True


class UpstreamError(ToolbiasError):
    """The upstream MCP server is missing, crashed or did not answer in time."""


def _reason(exc: BaseException) -> str:
    """An exception's own words, from inside the exception groups task groups wrap it in."""
    while getattr(exc, "exceptions", None):  # an exception group (a builtin from Python 3.11)
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class Upstream:
    """The real MCP server: one client session, opened on the caller's exit stack."""

    def __init__(self, config: McpProxyConfig) -> None:
        if bool(config.command) == bool(config.upstream_url):
            raise ToolbiasError("name the upstream MCP server once: a command after '--' or --upstream-url",
                                fix="toolbias mcp-proxy --variant NAME -- mcp-server-git --repository .")
        self.config = config
        self.label = config.upstream_url or " ".join(config.command)
        self.session: Any = None
        self.name = "upstream"
        self._changed: Any = None

    def spec(self) -> dict[str, Any]:
        if self.config.upstream_url:
            return {"url": self.config.upstream_url}
        command = self.config.command
        if shutil.which(command[0]) is None:
            raise UpstreamError(f"the upstream command '{command[0]}' is not installed (not on PATH)",
                                where="the command after '--'",
                                fix="install the server (e.g. pip install mcp-server-git) or give its full path")
        # the upstream sees the proxy's environment (git identity, API keys ...): the proxy is transparent
        return {"command": command[0], "args": list(command[1:]), "env": dict(os.environ), "cwd": None}

    async def open(self, stack: AsyncExitStack) -> list[dict[str, Any]]:
        """Start (or reach) the upstream and list its tools; raises :class:`UpstreamError`."""
        import anyio

        self._changed, self.changes = anyio.create_memory_object_stream[bool](1)
        stack.push_async_callback(self._close_streams)
        spec = self.spec()
        try:
            # the transport's scopes outlive this step: they are entered outside the timeout's scope
            self.session = await open_session(stack, spec, message_handler=self._on_message)
            with anyio.fail_after(self.config.start_timeout):
                result = await self.session.initialize()
                info = getattr(result, "server_info", None)
                self.name = str(getattr(info, "name", "") or "upstream")
                return await list_all_tools(self.session)
        except TimeoutError:
            raise UpstreamError(f"the upstream MCP server '{self.label}' did not start and list its tools within "
                                f"{self.config.start_timeout:.0f} s", fix="check that the server starts on its own "
                                "(run its command) or raise --start-timeout") from None
        except UpstreamError:
            raise
        except Exception as exc:  # noqa: BLE001 - the server crashed or refused: its own words
            raise UpstreamError(f"the upstream MCP server '{self.label}' failed at start-up: {_reason(exc)}",
                                fix="check that the server starts on its own (run its command)") from None

    async def _close_streams(self) -> None:
        await self._changed.aclose()
        await self.changes.aclose()

    async def _on_message(self, message: Any) -> None:
        from mcp import types

        if isinstance(message, types.ToolListChangedNotification):
            import anyio

            try:
                self._changed.send_nowait(True)
            except (anyio.WouldBlock, anyio.ClosedResourceError):  # one pending rebuild covers it
                pass

    async def tools(self) -> list[dict[str, Any]]:
        import anyio

        with anyio.fail_after(self.config.start_timeout):
            return await list_all_tools(self.session)

    async def call(self, name: str, arguments: dict[str, Any]) -> Any:
        """The upstream's ``CallToolResult``; raises :class:`UpstreamError` when it cannot answer."""
        import anyio

        try:
            with anyio.fail_after(self.config.call_timeout):
                return await self.session.call_tool(name, arguments)
        except TimeoutError:
            raise UpstreamError(f"the upstream MCP server '{self.name}' did not answer '{name}' within "
                                f"{self.config.call_timeout:.0f} s") from None
        except Exception as exc:  # noqa: BLE001 - a crashed or refusing server: its own words
            raise UpstreamError(f"the upstream MCP server '{self.name}' failed on '{name}': {_reason(exc)}") from None


class McpVariantProxy:
    """The variant server: SDK handlers over an :class:`Upstream` (see the module doc)."""

    def __init__(self, config: McpProxyConfig, recorder: Recorder | None = None) -> None:
        import_mcp()
        self.config = config
        self.spec = resolve_variant(config.variant)
        self.upstream = Upstream(config)
        self.recorder = recorder
        self.variant: McpVariant | None = None
        self.rebuilds = 0
        #: connection -> its conversation (the SDK builds a session object per request; the
        #: connection lives as long as the client's)
        self._conversations: WeakKeyDictionary[Any, McpConversation] = WeakKeyDictionary()
        self._connections: WeakKeyDictionary[Any, bool] = WeakKeyDictionary()
        from mcp.server.subscriptions import InMemorySubscriptionBus

        self.bus = InMemorySubscriptionBus()

    async def start(self, stack: AsyncExitStack) -> McpVariant:
        entries = await self.upstream.open(stack)
        self.variant = self._build(entries)
        return self.variant

    def _build(self, entries: list[dict[str, Any]]) -> McpVariant:
        return build_mcp_variant(entries, self.spec, server=self.upstream.name, verify=self.config.verify)

    # -- the SDK server -------------------------------------------------------------------

    def server(self) -> Any:
        from mcp.server.lowlevel import Server
        from mcp.server.subscriptions import ListenHandler

        assert self.variant is not None
        instructions = "\n\n".join(self.variant.instructions()) if self.config.instructions else None
        return Server(f"toolbias-mcp-proxy ({self.spec.name})", version=_version(),
                      instructions=instructions or None, on_list_tools=self.on_list_tools,
                      on_call_tool=self.on_call_tool, on_subscriptions_listen=ListenHandler(self.bus))

    def _conversation(self, ctx: Any) -> McpConversation:
        assert self.variant is not None
        # SDK 2.x: the per-connection object behind the per-request session (no public accessor yet)
        connection = getattr(ctx.session, "_connection", None) or ctx.session
        conv = self._conversations.get(connection)
        if conv is None:
            conv = self._conversations[connection] = McpConversation(self.variant, self.config.control)
            self._connections[connection] = True
            self._record(conv)
        elif conv.variant is not self.variant:
            conv.rebind(self.variant)
        return conv

    async def on_list_tools(self, ctx: Any, params: Any) -> Any:
        from mcp import types

        conv = self._conversation(ctx)
        return types.ListToolsResult.model_validate({"tools": list(conv.variant.tools)})

    async def on_call_tool(self, ctx: Any, params: Any) -> Any:
        from mcp import types

        conv = self._conversation(ctx)
        _, step = conv.decode(params.name, params.arguments)
        if isinstance(step, Answer):
            self._record(conv)
            return types.CallToolResult.model_validate(
                {"content": [{"type": "text", "text": step.text}], "isError": step.is_error})
        results = []
        for action in step:
            try:
                results.append(await self.upstream.call(action.tool, dict(action.arguments)))
            except UpstreamError as exc:
                conv.upstream_failed(exc.what)
                self._record(conv)
                return types.CallToolResult.model_validate(
                    {"content": [{"type": "text", "text": f"Error: {exc.what}"}], "isError": True})
        self._record(conv)
        if len(results) == 1:
            return results[0]
        content = [c for r in results for c in r.content]
        return types.CallToolResult(content=content, is_error=any(bool(r.is_error) for r in results))

    def _record(self, conv: McpConversation) -> None:
        if self.recorder is not None:
            self.recorder.update(conv.log)

    # -- the upstream's tools change ------------------------------------------------------

    async def watch(self) -> None:
        """Rebuild the variant on each ``tools/list_changed`` from the upstream; notify clients."""
        async for _ in self.upstream.changes:
            await self.rebuild()

    async def rebuild(self) -> bool:
        """List the upstream's tools again, rebuild and re-verify the variant; True when it now
        serves the new tools (a variant that fails keeps the old one, said on stderr)."""
        from mcp.server.subscriptions import ToolsListChanged

        try:
            self.variant = self._build(await self.upstream.tools())
        except (ToolbiasError, TimeoutError) as exc:
            what = exc.render() if isinstance(exc, ToolbiasError) else f"tools/list timed out: {exc}"
            print(f"toolbias mcp-proxy: the upstream's tools changed, but the variant was not rebuilt: {what}",
                  file=sys.stderr, flush=True)
            return False
        self.rebuilds += 1
        for connection in list(self._connections):
            notify = getattr(connection, "send_tool_list_changed", None)
            if notify is not None:
                try:
                    await notify()  # handshake era; a 2026-era connection drops it (it listens instead)
                except Exception:  # noqa: BLE001 - a client that went away needs no notice
                    pass
        await self.bus.publish(ToolsListChanged())
        return True

    def close(self) -> None:
        """Write what the store has pending (the server's shutdown)."""
        if self.recorder is not None:
            self.recorder.flush_and_close()


def _version() -> str:
    from .. import __version__

    return str(__version__)


def make_recorder(config: McpProxyConfig, store: str | None) -> Recorder | None:
    if not store:
        return None
    return Recorder(store, config.study or f"mcp-proxy|{config.variant}", config.model,
                    control=Control(config.control).value, condition="instruction" if config.instructions else "base")


def parse_listen(url: str) -> tuple[str, int, str]:
    """``http://HOST:PORT[/PATH]`` as (host, port, path); port 0: any free port."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme != "http" or not parts.hostname or port is None:
        raise ToolbiasError(f"cannot listen on '{url}'", where="--listen",
                            fix="write http://127.0.0.1:PORT (0: any free port), optionally with a path (/mcp)")
    return parts.hostname, port, parts.path.rstrip("/") or DEFAULT_PATH


async def serve(config: McpProxyConfig, store: str | None = None, listen: str | None = None,
                ready: Any = None) -> McpVariantProxy:
    """Run the proxy until its client goes away (stdio) or it is interrupted (HTTP). ``ready``
    is called with the variant (and, over HTTP, the URL) once the proxy serves."""
    import anyio

    address = parse_listen(listen) if listen else None
    recorder = make_recorder(config, store)
    proxy = McpVariantProxy(config, recorder)
    try:
        async with AsyncExitStack() as stack:
            variant = await proxy.start(stack)
            server = proxy.server()
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(proxy.watch)
                with anyio.CancelScope() as serving:  # Ctrl-C or SIGTERM end it: the store is then flushed
                    stop = [serving.cancel]  # over HTTP: uvicorn's own graceful shutdown
                    tasks.start_soon(_stop_on_signal, stop)
                    if address is None:
                        await _serve_stdio(server, variant, ready)
                    else:
                        await _serve_http(server, variant, address, ready, stop)
                tasks.cancel_scope.cancel()
    except Exception as exc:  # a task group wraps the error: the user's error, unwrapped
        found = _first_error(exc)
        if found is exc:
            raise
        raise found from None
    finally:
        proxy.close()
    return proxy


def _first_error(exc: BaseException) -> BaseException:
    """The first :class:`ToolbiasError` in ``exc`` or the (nested) exception groups it is, else ``exc``."""
    if isinstance(exc, ToolbiasError):
        return exc
    for inner in getattr(exc, "exceptions", None) or ():
        found = _first_error(inner)
        if isinstance(found, ToolbiasError):
            return found
    return exc


async def _stop_on_signal(stop: list[Any]) -> None:
    import signal

    import anyio

    try:
        receiver = anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM)
    except NotImplementedError:  # no signal receivers here (Windows): the default handlers stay
        return
    with receiver as signals:
        async for _ in signals:
            stop[-1]()
            return


async def _serve_stdio(server: Any, variant: McpVariant, ready: Any) -> None:
    from mcp.server.lowlevel import NotificationOptions
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        if ready is not None:
            ready(variant, None)
        await server.run(read, write, server.create_initialization_options(NotificationOptions(tools_changed=True)))


async def _serve_http(server: Any, variant: McpVariant, address: tuple[str, int, str], ready: Any,
                      stop: list[Any]) -> None:
    from . import _uvicorn, bind

    uvicorn = _uvicorn()
    host, port, path = address
    app = server.streamable_http_app(streamable_http_path=path, host=host)
    sock = bind(host, port)
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{sock.getsockname()[1]}{path}"
    http = _quiet_server(uvicorn)(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on"))
    stop.append(lambda: setattr(http, "should_exit", True))
    if ready is not None:
        ready(variant, url)
    try:
        await http.serve(sockets=[sock])
    finally:
        sock.close()


def _quiet_server(uvicorn: Any) -> Any:
    """uvicorn's server without its own signal handling: it would re-raise SIGTERM after shutting
    down, killing the process before the store is flushed; :func:`_stop_on_signal` handles them."""
    from contextlib import contextmanager

    class Server(uvicorn.Server):  # type: ignore[misc, name-defined]
        @contextmanager
        def capture_signals(self) -> Any:
            yield

    return Server


__all__ = ["DEFAULT_PATH", "McpProxyConfig", "McpVariantProxy", "Upstream", "UpstreamError", "parse_listen", "serve"]
