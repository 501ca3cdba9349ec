"""``toolbias proxy``: an OpenAI-compatible server that serves a variant to the model and
native calls to the agent, so any agent or benchmark runner is measured under any variant.

    agent --(native tools)--> proxy --(variant tools)--> upstream model server
    agent <--(native calls)-- proxy <--(variant calls)-- upstream

Python API::

    with ProxyServer(ProxyConfig(upstream=("http://127.0.0.1:8000/v1",), variant="fully_merged"),
                     store="live.db") as server:
        server.base_url  # "http://127.0.0.1:PORT/v1": point the agent here
"""

from __future__ import annotations

import asyncio
import gc
import socket
import threading
from typing import Any

from ..errors import MissingExtraError, ToolbiasError
from ..variants.codec import Control
from .app import ProxyApp
from .codecs import CodecSource, RequestError
from .conversation import CallLog, Conversation
from .records import LIVE_KIND, Recorder
from .service import ProxyConfig, ProxyError, VariantProxy


def _uvicorn() -> Any:
    try:
        import uvicorn
    except ImportError:
        raise MissingExtraError("uvicorn", "proxy", "toolbias proxy") from None
    return uvicorn


def build_app(config: ProxyConfig, store: str | None = None) -> ProxyApp:
    """The ASGI app for ``config``; conversations go to ``store`` (SQLite) when given."""
    recorder = None
    if store:
        model = f"openai:{config.model}" if config.model else "proxy"
        recorder = Recorder(store, config.study or f"proxy|{config.variant}", model,
                            control=Control(config.control).value,
                            condition="instruction" if config.instructions else "base")
    proxy = VariantProxy(config, recorder)
    return ProxyApp(proxy, on_shutdown=recorder.flush_and_close if recorder else None, client_key=config.client_key)


def exposure_warning(host: str, client_key: str | None) -> str | None:
    """What to tell the operator when the proxy listens beyond loopback without a client key:
    anyone who reaches the port spends the upstream's key and compute."""
    import ipaddress

    if client_key:
        return None
    try:
        if ipaddress.ip_address(host.strip("[]")).is_loopback:
            return None
    except ValueError:
        if host == "localhost":
            return None
    return (f"toolbias proxy: warning: listening on {host} without a client key: anyone who can reach this port "
            "uses your upstream model server (and its API key); set --proxy-key (or TOOLBIAS_PROXY_KEY) "
            "so clients must send 'Authorization: Bearer <key>', or listen on 127.0.0.1")


def bind(host: str, port: int) -> socket.socket:
    """A listening socket (port 0: a free one), so the URL is known before serving."""
    try:
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        raise ToolbiasError(f"cannot listen on {host}:{port}: {exc.strerror or exc}",
                            fix="choose another --port (0: any free port) or --host") from None
    sock.setblocking(False)
    return sock


class ProxyServer:
    """The proxy on a socket: ``run()`` in the foreground (the CLI), or ``start()`` /
    ``stop()`` in a background thread (tests, benchmarks, notebooks)."""

    def __init__(self, config: ProxyConfig, *, host: str = "127.0.0.1", port: int = 0, store: str | None = None,
                 log_level: str = "warning", grace_s: float = 10.0) -> None:
        """``grace_s``: on shutdown (SIGTERM, Ctrl-C, :meth:`stop`), how long requests still being
        answered may take before they are cancelled (those whose client left are cancelled at once)."""
        uvicorn = _uvicorn()
        self.app = build_app(config, store)
        self.sock = bind(host, port)
        self.host = host
        self.port = int(self.sock.getsockname()[1])
        loop = "uvloop" if _has("uvloop") else "asyncio"
        http = "httptools" if _has("httptools") else "h11"
        self.server = uvicorn.Server(uvicorn.Config(self.app, loop=loop, http=http, log_level=log_level,
                                                    access_log=False, lifespan="on", timeout_keep_alive=30,
                                                    proxy_headers=False, timeout_graceful_shutdown=grace_s))
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    def run(self) -> None:
        """Serve until interrupted (Ctrl-C: the store is flushed, then it returns). The process
        is the proxy's alone, so the garbage collector is tuned for it (:func:`tune_gc`)."""
        tune_gc()
        self.server.run(sockets=[self.sock])

    def start(self) -> ProxyServer:
        started = threading.Event()
        failure: list[BaseException] = []

        def serve() -> None:
            async def main() -> None:
                task = asyncio.create_task(self.server.serve(sockets=[self.sock]))
                while not self.server.started and not task.done():
                    await asyncio.sleep(0.005)
                started.set()
                await task
            try:
                asyncio.run(main())
            except BaseException as exc:  # noqa: BLE001 - reported by start()
                failure.append(exc)
                started.set()

        self._thread = threading.Thread(target=serve, name="toolbias-proxy", daemon=True)
        self._thread.start()
        started.wait()
        if failure:
            raise failure[0]
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self.server.should_exit = True
            self._thread.join()
            self._thread = None
        self.sock.close()

    def __enter__(self) -> ProxyServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


__all__ = ["LIVE_KIND", "CallLog", "CodecSource", "Conversation", "ProxyApp", "ProxyConfig", "ProxyError",
           "ProxyServer", "Recorder", "RequestError", "VariantProxy", "build_app", "exposure_warning"]


def tune_gc() -> None:
    """Garbage-collector settings for a process that only serves the proxy.

    Every request's parsed body is hundreds of containers (an agent's tool schemas), all freed
    by reference counting; with the default threshold (a young collection every 700
    allocations) the collector ran several times per request, scanning them and everything
    promoted before, and took a third of the proxy's CPU (bench/bench_proxy.py). What is
    loaded at start-up lives as long as the process, so it is frozen out of every scan, and
    young collections run every 50,000 allocations; cycles are still collected."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)

