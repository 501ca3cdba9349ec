"""Loopback servers speaking today's other model APIs: the OpenAI Responses API
(``POST /v1/responses``) and the Anthropic messages API (``POST /v1/messages``), plus
``GET /v1/models``. Stdlib ``http.server`` on 127.0.0.1 in a daemon thread.

Each answer comes from ``responder(path, body)`` (a full response dict); ``fail(status, times)``
makes the next requests answer that HTTP status with an error body in the API's own form (for
retries: 429, 529, 500). With ``api_key`` set, a request without it (``Authorization: Bearer`` for
Responses, ``x-api-key`` for messages) gets 401. ``requests`` and ``headers`` record what came in.

Helpers build answers in each wire format: :func:`responses_answer` and :func:`messages_answer`
take ``text`` and ``calls`` ``[(name, arguments)]``.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Callable
from typing import Any

Responder = Callable[[str, dict[str, Any]], dict[str, Any]]


def responses_answer(text: str | None = None, calls: list[tuple[str, Any]] = (),  # type: ignore[assignment]
                     model: str = "fake-model") -> dict[str, Any]:
    output: list[dict[str, Any]] = [{"type": "reasoning", "id": "rs_0", "summary": []}]
    if text is not None:
        output.append({"type": "message", "id": "msg_0", "role": "assistant", "status": "completed",
                       "content": [{"type": "output_text", "text": text, "annotations": []}]})
    for i, (name, args) in enumerate(calls):
        output.append({"type": "function_call", "id": f"fc_{i}", "call_id": f"call_{i}", "name": name,
                       "arguments": args if isinstance(args, str) else json.dumps(args), "status": "completed"})
    return {"id": "resp_0", "object": "response", "status": "completed", "model": model, "output": output,
            "usage": {"input_tokens": 40, "output_tokens": 7, "input_tokens_details": {"cached_tokens": 8},
                      "total_tokens": 47}}


def messages_answer(text: str | None = None, calls: list[tuple[str, Any]] = (),  # type: ignore[assignment]
                    model: str = "fake-model") -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if text is not None:
        content.append({"type": "text", "text": text})
    for i, (name, args) in enumerate(calls):
        content.append({"type": "tool_use", "id": f"toolu_{i}", "name": name, "input": args})
    return {"id": "msg_0", "type": "message", "role": "assistant", "model": model, "content": content,
            "stop_reason": "tool_use" if calls else "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 30, "output_tokens": 5, "cache_read_input_tokens": 10,
                      "cache_creation_input_tokens": 0}}


class FakeAPIServer:
    def __init__(self, responder: Responder, *, models: tuple[str, ...] = ("fake-model",),
                 api_key: str | None = None) -> None:
        self.responder = responder
        self.models = models
        self.api_key = api_key
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.headers: list[dict[str, str]] = []
        self._failures: list[int] = []
        self._lock = threading.Lock()
        self._httpd: http.server.ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def fail(self, status: int, times: int = 1) -> None:
        with self._lock:
            self._failures.extend([status] * times)

    def __enter__(self) -> FakeAPIServer:
        handler = type("Handler", (_Handler,), {"fake": self})
        self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._httpd is not None
        self._httpd.shutdown()
        self._httpd.server_close()


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    fake: FakeAPIServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if status == 429:
            self.send_header("retry-after-ms", "10")
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str) -> None:
        if self.path.endswith("/messages"):  # Anthropic's error form
            self._send(status, {"type": "error", "error": {"type": "api_error", "message": message}})
        else:
            self._send(status, {"error": {"message": message, "type": "server_error", "code": None}})

    def _authorised(self) -> bool:
        key = self.fake.api_key
        if key is None or self.headers.get("x-api-key") == key or \
                self.headers.get("Authorization") == f"Bearer {key}":
            return True
        self._error(401, "invalid x-api-key")
        return False

    def do_GET(self) -> None:
        if not self._authorised():
            return
        if self.path.rstrip("/") == "/v1/models":
            self._send(200, {"data": [{"id": m, "type": "model"} for m in self.fake.models]})
        else:
            self._error(404, f"no route {self.path}")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if not self._authorised():
            return
        path = self.path.rstrip("/")
        with self.fake._lock:
            self.fake.requests.append((path, body))
            self.fake.headers.append({k.lower(): v for k, v in self.headers.items()})
            status = self.fake._failures.pop(0) if self.fake._failures else None
        if status is not None:
            self._error(status, f"injected HTTP {status}")
            return
        if path not in ("/v1/responses", "/v1/messages"):
            self._error(404, f"no route {self.path}")
            return
        self._send(200, self.fake.responder(path, body))
