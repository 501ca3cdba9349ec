"""The proxy as a plain ASGI application, served by uvicorn.

Four routes (``POST /v1/chat/completions``, ``POST /v1/responses`` (:mod:`.responses_api`),
``GET /v1/models``, ``GET /health``; the ``/v1`` prefix is optional). Why no web framework: four routes need no router, and the
proxy's job is to add as little per-request CPU as possible in front of a model server.

Streaming (``"stream": true``): a request with tools is decoded whole (calls must be
complete to decode them) and sent as server-sent events, one chunk per part; a request
without tools streams the upstream's bytes through unchanged.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from ..base import wirejson
from ..providers.base import InfraError
from .service import ProxyError, VariantProxy, upstream_error

log = logging.getLogger("toolbias.proxy")

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

_JSON_HEADERS = [(b"content-type", b"application/json")]
_SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
#: the largest request body accepted (a long agent conversation with big tool results fits)
MAX_BODY = 64 * 1024 * 1024


class ProxyApp:
    """ASGI entry point around a :class:`VariantProxy`."""

    def __init__(self, proxy: VariantProxy, on_shutdown: Callable[[], None] | None = None) -> None:
        self.proxy = proxy
        self.on_shutdown = on_shutdown
        self._served_responses = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path = scope["path"].rstrip("/")
        if path.startswith("/v1/"):
            path = path[3:]
        method = scope["method"]
        try:
            if path == "/chat/completions" and method == "POST":
                await self._chat(receive, send)
            elif path == "/responses" and method == "POST":
                await self._responses(receive, send)
            elif path == "/models" and method == "GET":
                await self._models(send)
            elif path == "/health" and method == "GET":
                await _send_json(send, *_health(self.proxy))
            else:
                raise ProxyError(404, f"no route {method} {scope['path']}; the proxy serves POST "
                                      "/v1/chat/completions, POST /v1/responses and GET /v1/models", code="not_found")
        except ProxyError as exc:
            await _send_json(send, exc.status, exc.body())
        except Exception as exc:  # noqa: BLE001 - a bug must still answer, not hang the agent
            log.exception("toolbias proxy: internal error")
            err = ProxyError(500, f"toolbias proxy internal error: {type(exc).__name__}: {exc}",
                             kind="server_error", code="proxy_internal_error")
            await _send_json(send, 500, err.body())

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.proxy.aclose()
                if self.on_shutdown:
                    self.on_shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _chat(self, receive: Receive, send: Send) -> None:
        raw = await _read_body(receive)
        try:
            body = wirejson.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise ProxyError(400, f"the request body is not JSON: {exc}", code="invalid_json") from None
        if not isinstance(body, dict):
            raise ProxyError(400, "the request body must be a JSON object", code="invalid_json")
        stream = bool(body.get("stream"))
        if not body.get("tools"):
            await self._passthrough(body, stream, send)
            return
        result = await self.proxy.chat(body)
        if not stream:
            await _send_json(send, 200, result)
            return
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
        for chunk in completion_chunks(result, include_usage):
            await send({"type": "http.response.body", "body": b"data: " + wirejson.dumpb(chunk) + b"\n\n",
                        "more_body": True})
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n", "more_body": False})

    async def _responses(self, receive: Receive, send: Send) -> None:
        """The Responses API, served as the chat request it means (:mod:`.responses_api`)."""
        from .responses_api import chat_request, response_events, response_object

        try:
            body = wirejson.loads(await _read_body(receive))
        except (ValueError, RecursionError) as exc:
            raise ProxyError(400, f"the request body is not JSON: {exc}", code="invalid_json") from None
        chat = chat_request(body)
        if chat.get("tools"):
            result = await self.proxy.chat(chat)
        else:
            provider, url, out = self.proxy.passthrough_request(chat)
            try:
                result = await provider.post_json(url, "/chat/completions", out)
            except InfraError as exc:
                raise upstream_error(exc) from None
        self._served_responses += 1
        response = response_object(result, body, self._served_responses)
        if not body.get("stream"):
            await _send_json(send, 200, response)
            return
        await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
        for event in response_events(response):
            data = b"event: " + event["type"].encode() + b"\ndata: " + wirejson.dumpb(event) + b"\n\n"
            await send({"type": "http.response.body", "body": data, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _passthrough(self, body: dict[str, Any], stream: bool, send: Send) -> None:
        provider, url, out = self.proxy.passthrough_request(body)
        if not stream:
            try:
                result = await provider.post_json(url, "/chat/completions", out)
            except InfraError as exc:
                raise upstream_error(exc) from None
            await _send_json(send, 200, result)
            return
        try:
            response = await provider.http_client().post(url + "/chat/completions", data=wirejson.dumpb(out))
        except Exception as exc:  # noqa: BLE001 - transport errors become a clear 502/504
            err = provider.transport_error(exc, url)
            if not isinstance(err, InfraError):
                raise
            raise upstream_error(err) from None
        try:
            if response.status >= 400:
                content = await response.read()
                raise upstream_error(provider.status_error(response.status, content, response.headers, url))
            await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
            try:
                async for piece in response.content.iter_any():
                    await send({"type": "http.response.body", "body": piece, "more_body": True})
            except Exception as exc:  # noqa: BLE001 - the stream broke after it started: say so in it
                error = {"error": {"message": f"upstream model server: stream interrupted: {exc!r}",
                                   "type": "upstream_error", "param": None, "code": "upstream_stream_broken"}}
                await send({"type": "http.response.body", "body": b"data: " + wirejson.dumpb(error) + b"\n\n",
                            "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            response.release()

    async def _models(self, send: Send) -> None:
        provider = self.proxy.upstream_provider()
        try:
            status, content = await provider.get_json(provider.next_url(), "/models")
            data = wirejson.loads(content) if status == 200 else None
        except (InfraError, ValueError):  # an upstream without a usable /models
            data = None
        if not isinstance(data, dict) or not isinstance(data.get("data"), list):
            name = self.proxy.config.model or "upstream"
            data = {"object": "list", "data": [{"id": name, "object": "model", "created": 0, "owned_by": "toolbias"}]}
        await _send_json(send, 200, data)


def completion_chunks(result: dict[str, Any], include_usage: bool) -> list[dict[str, Any]]:
    """A whole chat completion as the chunks of a stream (role and content, one chunk per
    tool call, the finish reason, and usage when asked)."""
    choice = result["choices"][0]
    message = choice["message"]
    base = {"id": result["id"], "object": "chat.completion.chunk", "created": result.get("created", int(time.time())),
            "model": result["model"]}
    chunks = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": message.get("content")},
                                    "finish_reason": None}]}]
    for i, call in enumerate(message.get("tool_calls") or []):
        delta = {"tool_calls": [{"index": i, "id": call["id"], "type": "function", "function": call["function"]}]}
        chunks.append({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]})
    if include_usage:
        chunks.append({**base, "choices": [], "usage": result.get("usage")})
    return chunks


async def _read_body(receive: Receive) -> bytes:
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ProxyError(400, "the client disconnected before sending the whole request")
        piece = message.get("body", b"")
        size += len(piece)
        if size > MAX_BODY:
            raise ProxyError(413, f"the request body is larger than {MAX_BODY} bytes", code="body_too_large")
        parts.append(piece)
        if not message.get("more_body"):
            return b"".join(parts)


async def _send_json(send: Send, status: int, body: Any) -> None:
    data = wirejson.dumpb(body)
    await send({"type": "http.response.start", "status": status,
                "headers": [*_JSON_HEADERS, (b"content-length", str(len(data)).encode())]})
    await send({"type": "http.response.body", "body": data})


def _health(proxy: Any) -> tuple[int, dict[str, Any]]:
    """``/health``: 200 ``ok``; 503 ``store_failing`` while the store writer cannot write (its rows
    are kept and retried; the body says why and how many are pending)."""
    body: dict[str, Any] = {"status": "ok", "variant": proxy.variant.name}
    recorder = getattr(proxy, "recorder", None)
    if recorder is None:
        return 200, body
    body["store"] = recorder.stats()
    if body["store"]["error"] is not None:
        body["status"] = "store_failing"
        return 503, body
    return 200, body
