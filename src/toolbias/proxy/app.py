"""The proxy as a plain ASGI application, served by uvicorn.

Four routes (``POST /v1/chat/completions``, ``POST /v1/responses`` (:mod:`.responses_api`),
``GET /v1/models``, ``GET /health``; the ``/v1`` prefix is optional). Why no web framework: four routes need no router, and the
proxy's job is to add as little per-request CPU as possible in front of a model server.

Streaming (``"stream": true``): a request with tools is decoded whole (calls must be
complete to decode them) and sent as server-sent events, one chunk per part; a request
without tools streams the upstream's bytes through unchanged.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, TypeVar

from ..base import wirejson
from ..providers.base import InfraError
from .request import check_request
from .service import ProxyError, VariantProxy, upstream_error

T = TypeVar("T")

log = logging.getLogger("toolbias.proxy")

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

_JSON_HEADERS = [(b"content-type", b"application/json")]
_SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
#: the largest request body accepted (a long agent conversation with big tool results fits)
MAX_BODY = 64 * 1024 * 1024


class ProxyApp:
    """ASGI entry point around a :class:`VariantProxy`.

    ``client_key``: when set, every route but ``/health`` answers 401 unless the request carries
    ``Authorization: Bearer <client_key>`` (the proxy spends its upstream key for whoever reaches it)."""

    def __init__(self, proxy: VariantProxy, on_shutdown: Callable[[], None] | None = None,
                 client_key: str | None = None) -> None:
        self.proxy = proxy
        self.on_shutdown = on_shutdown
        self._served_responses = 0
        self._client_key = f"Bearer {client_key}".encode() if client_key else None

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
            if self._client_key is not None and path != "/health":
                _authorise(scope, self._client_key)
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
        except ClientGone:
            return  # nobody to answer: the client closed the connection, its upstream work is cancelled
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
        check_request(body)
        stream = bool(body.get("stream"))
        if not body.get("tools"):
            await self._passthrough(body, stream, send, receive)
            return
        result = await until_disconnect(receive, self.proxy.chat(body))
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
            result = await until_disconnect(receive, self.proxy.chat(chat))
        else:
            provider, url, out = self.proxy.passthrough_request(chat)
            try:
                result = await until_disconnect(receive, provider.post_json(url, "/chat/completions", out))
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

    async def _passthrough(self, body: dict[str, Any], stream: bool, send: Send, receive: Receive) -> None:
        provider, url, out = self.proxy.passthrough_request(body)
        if not stream:
            try:
                result = await until_disconnect(receive, provider.post_json(url, "/chat/completions", out))
            except InfraError as exc:
                raise upstream_error(exc) from None
            await _send_json(send, 200, result)
            return
        try:
            response = await until_disconnect(
                receive, provider.http_client().post(url + "/chat/completions", data=wirejson.dumpb(out)))
        except Exception as exc:  # noqa: BLE001 - transport errors become a clear 502/504
            err = provider.transport_error(exc, url)
            if not isinstance(err, InfraError):
                raise
            raise upstream_error(err) from None
        try:
            if response.status >= 400:
                content = await response.read()
                raise upstream_error(provider.status_error(response.status, content, response.headers, url))
            await until_disconnect(receive, self._pump(response, send))
        finally:
            response.release()

    async def _pump(self, response: Any, send: Send) -> None:
        """The upstream's stream to the client, piece by piece."""
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

    async def _models(self, send: Send) -> None:
        """The upstream's model list. An upstream that cannot be reached, or that answers with an
        error, is a 502 (never a made-up list); one without a ``/models`` route (404) lists the
        proxy's ``--model`` when one is set (every request goes to that model), else a 502."""
        provider = self.proxy.upstream_provider()
        url = provider.next_url()
        try:
            status, content = await provider.get_json(url, "/models")
        except InfraError as exc:
            raise upstream_error(exc) from None
        if status == 404 and self.proxy.config.model:
            await _send_json(send, 200, {"object": "list", "data": [
                {"id": self.proxy.config.model, "object": "model", "created": 0, "owned_by": "toolbias"}]})
            return
        if status != 200:
            raise upstream_error(provider.status_error(status, content, {}, url))
        try:
            data = wirejson.loads(content)
        except ValueError:
            data = None
        if not isinstance(data, dict) or not isinstance(data.get("data"), list):
            raise ProxyError(502, "upstream model server: GET /models did not answer a model list",
                             kind="upstream_error", code="upstream_bad_models")
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


class ClientGone(Exception):
    """The client closed its connection before its answer was ready."""


async def until_disconnect(receive: Receive, work: Awaitable[T]) -> T:
    """``work``'s result, unless the client disconnects first: then ``work`` (its upstream
    request) is cancelled and :class:`ClientGone` raised. A client that gives up must not leave
    its upstream request running until its timeout (times its retries), nor keep a shutdown
    waiting for it."""
    task = asyncio.ensure_future(work)
    watch = asyncio.ensure_future(_disconnected(receive))
    try:
        await asyncio.wait((task, watch), return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        task.cancel()
        watch.cancel()
        raise
    if task.done():
        watch.cancel()
        return task.result()
    task.cancel()
    try:
        await task
    except BaseException:  # noqa: BLE001 - cancelled, or failed meanwhile: nobody to tell
        pass
    raise ClientGone


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


def _authorise(scope: Scope, expected: bytes) -> None:
    given = next((v for k, v in scope.get("headers") or () if k.lower() == b"authorization"), b"")
    if not hmac.compare_digest(given, expected):
        raise ProxyError(401, "missing or wrong API key for this proxy: send 'Authorization: Bearer <key>' with "
                              "the key it was started with (--proxy-key or TOOLBIAS_PROXY_KEY)",
                         kind="invalid_request_error", code="invalid_api_key")


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
    if hasattr(proxy, "memory"):
        body["memory"] = proxy.memory()
    recorder = getattr(proxy, "recorder", None)
    if recorder is None:
        return 200, body
    body["store"] = recorder.stats()
    if body["store"]["error"] is not None:
        body["status"] = "store_failing"
        return 503, body
    return 200, body
