"""Any OpenAI-compatible chat server: OpenAI, vLLM, SGLang, llama.cpp, Ollama, hosted APIs.

``openai:<model>`` with the base URL from the ``base_url`` option (``--base-url``),
else ``OPENAI_BASE_URL``, else OpenAI's; the key from ``api_key`` / ``OPENAI_API_KEY``
(a placeholder is sent to servers other than api.openai.com when none is set, as
local servers ignore it). Several base URLs (a list, or one string separated by
commas) share the load: each request goes to the next URL in turn, so a retried
request lands on another replica.

- Requests go straight through one pooled ``aiohttp`` session per event loop (the openai
  SDK's httpx client path cost ~40x the CPU per request at 64 in flight); no retries here:
  the wrapper retries.
- Responses map to :class:`ModelOutput` with calls from ``tool_calls``. When a server
  returns no ``tool_calls`` but the text holds calls (a server without a tool
  parser), they are recovered by :mod:`.textcalls` and ``recovered`` is set.
- Failures map to :class:`InfraError`: 408/409/429/5xx, timeouts, refused or
  dropped connections and unreadable bodies are retryable (429's ``Retry-After``
  becomes ``retry_after``); other 4xx are not.
- ``check()`` asks each server's ``/models`` (falling back to a 1-token request)
  and raises :class:`ProviderError` for an unreachable server, a bad key or a
  model the server does not serve.
- ``settings()`` (hashed into episode keys) holds the model, the URL list and any
  ``extra_body``, never the key; timeouts are operational and left out.
"""

from __future__ import annotations

import asyncio
import email.utils
import itertools
import json
import os
import time
from typing import Any
from urllib.parse import urlparse

from ..base import wirejson
from ..errors import ProviderError
from .base import GenerateConfig, InfraError, Message, ModelAPI, ModelOutput, ToolCall, Usage
from .textcalls import calls_in_text

DEFAULT_BASE_URL = "https://api.openai.com/v1"
#: sent to non-OpenAI servers when no key is configured (vLLM, llama.cpp and Ollama ignore it)
PLACEHOLDER_KEY = "sk-no-key-required"
RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 520, 521, 522, 523, 524, 529})


def _split_urls(value: str | list[str] | tuple[str, ...] | None) -> list[str]:
    if value is None:
        return []
    items = value.split(",") if isinstance(value, str) else [u for v in value for u in str(v).split(",")]
    return [u.strip().rstrip("/") for u in items if u.strip()]


def _is_openai_host(url: str) -> bool:
    host = (urlparse(url).hostname or "").lower()
    return host == "api.openai.com" or host.endswith(".openai.com")


def parse_retry_after(headers: Any) -> float | None:
    """Seconds to wait from ``retry-after-ms`` / ``Retry-After`` (seconds or an HTTP date), else None."""
    if headers is None:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return max(0.0, float(ms) / 1000.0)
        value = headers.get("retry-after")
    except Exception:  # noqa: BLE001 - odd header containers: no hint
        return None
    if value is None:
        return None
    value = str(value).strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - time.time())


class OpenAIProvider(ModelAPI):
    """``openai:<model>`` against one or more OpenAI-compatible base URLs.

    Options: ``base_url`` (str, or several separated by commas), ``base_urls``
    (a list), ``api_key``, ``timeout`` (seconds per request, default 120),
    ``max_connections`` (per URL, default 256), ``extra_body`` (dict merged into
    every request, e.g. vLLM sampling extras; part of the settings hash).
    """

    cacheable = True

    def __init__(self, arg: str = "", *, base_url: str | list[str] | None = None,
                 base_urls: list[str] | tuple[str, ...] | None = None, api_key: str | None = None,
                 timeout: float | None = 120.0, max_connections: int | None = 256, extra_body: dict[str, Any] | None = None,
                 **options: Any) -> None:
        if options:
            raise ProviderError(f"unknown option(s) for openai models: {', '.join(sorted(options))}",
                                fix="use base_url, base_urls, api_key, timeout, max_connections, extra_body")
        self.model = arg.strip()
        if not self.model:
            raise ProviderError("no model name given", where="model spec 'openai:'",
                                fix="name the served model, e.g. openai:gpt-4o-mini or openai:Qwen/Qwen2.5-7B-Instruct")
        self.spec = f"openai:{self.model}"
        urls = _split_urls(base_url) + _split_urls(base_urls)
        if not urls:
            urls = _split_urls(os.environ.get("OPENAI_BASE_URL")) or [DEFAULT_BASE_URL]
        self.base_urls: tuple[str, ...] = tuple(dict.fromkeys(urls))
        for u in self.base_urls:
            if urlparse(u).scheme not in ("http", "https") or not urlparse(u).hostname:
                raise ProviderError(f"'{_redact(u)}' is not an http(s) URL", where="base URL",
                                    fix="pass e.g. --base-url http://localhost:8000/v1")
            if urlparse(u).username is not None or urlparse(u).password is not None:
                # the key goes in the Authorization header; HTTP clients refuse URL credentials beside it
                raise ProviderError(f"'{_redact(u)}' carries credentials (user:password@), which cannot be sent "
                                    "beside the API key's Authorization header", where="base URL",
                                    fix="remove 'user:password@' from the URL and pass the key with "
                                        "OPENAI_API_KEY (or --api-key for the proxy)")
        #: the cache and concurrency key: the URL list
        self.base_url = ",".join(self.base_urls)
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if not key:
            if any(_is_openai_host(u) for u in self.base_urls):
                raise ProviderError(f"no API key for {self.spec}",
                                    fix="set OPENAI_API_KEY, or pass --base-url for a local server")
            key = PLACEHOLDER_KEY
        self._api_key = key
        self.timeout = float(timeout) if timeout else 120.0
        self.max_connections = int(max_connections) if max_connections else 256
        self.extra_body = dict(extra_body) if extra_body else None
        self._headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        self._clients: dict[int, Any] = {}
        self._tool_texts: dict[int, tuple[list[Any], bytes]] = {}
        self._turn = itertools.count()

    def __repr__(self) -> str:  # never shows the key
        return f"OpenAIProvider(model={self.model!r}, base_urls={[_redact(u) for u in self.base_urls]!r})"

    def settings(self) -> dict[str, Any]:
        s: dict[str, Any] = {"spec": self.spec, "model": self.model,
                             "base_urls": [_redact(u) for u in self.base_urls]}  # no credentials
        if self.extra_body:
            s["extra_body"] = self.extra_body
        return s

    # -- clients ----------------------------------------------------------------

    def http_client(self) -> Any:
        """The pooled ``aiohttp.ClientSession`` of this event loop. Why aiohttp, not the openai
        SDK or httpx: at 64 requests in flight httpx (httpcore 1.0) spent ~5.9 ms of CPU per
        request in its pool, aiohttp ~0.12 ms (bench/bench_proxy.py)."""
        # one session per event loop: a pooled connection opened under one asyncio.run() (check())
        # cannot be used under the next (run_study()) - "Event loop is closed"
        key = _loop_id()
        client = self._clients.get(key)
        if client is None:
            import aiohttp

            connector = aiohttp.TCPConnector(limit=self.max_connections, limit_per_host=self.max_connections)
            client = self._clients[key] = aiohttp.ClientSession(
                connector=connector, headers=self._headers, timeout=aiohttp.ClientTimeout(total=self.timeout))
        return client

    def next_url(self) -> str:
        """The URL the next request goes to (round-robin)."""
        return self.base_urls[next(self._turn) % len(self.base_urls)]

    async def aclose(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for c in clients:
            try:
                await c.close()
            except Exception:  # noqa: BLE001 - closing is best effort (a session of a closed loop)
                pass

    async def post_json(self, url: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST ``body`` to ``url + path``; the response's JSON object, or :class:`InfraError`
        (retryable or not, with the HTTP status when there was one)."""
        tools = body.get("tools")
        if isinstance(tools, list) and len(body) > 1:  # the tool list is the same object every turn: encoded once
            rest = wirejson.dumpb({k: v for k, v in body.items() if k != "tools"})
            data = rest[:-1] + b',"tools":' + self._tools_json(tools) + b"}"
        else:
            data = wirejson.dumpb(body)
        try:
            async with self.http_client().post(url + path, data=data) as response:
                content = await response.read()
                status, headers = response.status, response.headers
        except Exception as exc:  # noqa: BLE001 - classified below; unknown errors re-raise
            raise self.transport_error(exc, url) from exc
        if status >= 400:
            raise self.status_error(status, content, headers, url)
        try:
            data = wirejson.loads(content)
        except (ValueError, RecursionError) as exc:
            raise InfraError(f"{_redact(url)}: unreadable response: {exc}", retryable=True) from None
        if not isinstance(data, dict):
            raise InfraError(f"{_redact(url)}: unreadable response: not a JSON object", retryable=True)
        return data

    def _tools_json(self, tools: list[Any]) -> bytes:
        """JSON of a tool list, cached by identity (codecs share one list per domain; the list
        is kept with its text, so its id cannot be reused while cached)."""
        hit = self._tool_texts.get(id(tools))
        if hit is not None and hit[0] is tools:
            return hit[1]
        text = wirejson.dumpb(tools)
        if len(self._tool_texts) >= 256:
            self._tool_texts.clear()
        self._tool_texts[id(tools)] = (tools, text)
        return text

    async def get_json(self, url: str, path: str) -> tuple[int, bytes]:
        """GET ``url + path``: (status, body); transport failures raise :class:`InfraError`."""
        try:
            async with self.http_client().get(url + path) as response:
                return response.status, await response.read()
        except Exception as exc:  # noqa: BLE001 - classified below; unknown errors re-raise
            raise self.transport_error(exc, url) from exc

    # -- generation -------------------------------------------------------------

    def chat_request(self, messages: list[Message], tools: list[dict[str, Any]], tool_choice: str | None,
                     config: GenerateConfig) -> dict[str, Any]:
        request: dict[str, Any] = {"model": self.model, "messages": _wire_messages(messages),
                                   "temperature": config.temperature, "max_tokens": config.max_tokens}
        if config.top_p is not None:
            request["top_p"] = config.top_p
        if config.seed is not None:
            request["seed"] = config.seed
        if tools:
            # the same list object every turn (a codec's schema: never mutated), so its JSON is cached
            request["tools"] = tools if all("function" in t for t in tools) else \
                [t if "function" in t else {"type": "function", "function": t} for t in tools]
            if tool_choice is not None:
                request["tool_choice"] = tool_choice
        if config.extra:
            request.update(config.extra)
        if self.extra_body:
            request.update(self.extra_body)  # merged into the JSON body, as the SDK's extra_body is
        return request

    async def generate(self, messages: list[Message], tools: list[dict[str, Any]], tool_choice: str | None,
                       config: GenerateConfig) -> ModelOutput:
        url = self.next_url()
        request = self.chat_request(messages, tools, tool_choice, config)
        t0 = time.perf_counter()
        response = await self.post_json(url, "/chat/completions", request)
        latency = time.perf_counter() - t0
        return self._to_output(response, tools, tool_choice, latency, url)

    def _to_output(self, response: dict[str, Any], tools: list[dict[str, Any]], tool_choice: str | None,
                   latency: float, url: str) -> ModelOutput:
        choices = response.get("choices")
        if not choices or not isinstance(choices, list):
            raise InfraError(f"{_redact(url)}: the server returned no choices", retryable=True)
        message = choices[0].get("message") if isinstance(choices[0], dict) else None
        if not isinstance(message, dict):
            raise InfraError(f"{_redact(url)}: the server returned a choice without a message", retryable=True)
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            content = json.dumps(content, ensure_ascii=False)
        calls: list[ToolCall] = []
        for i, tc in enumerate(message.get("tool_calls") or []):
            if not isinstance(tc, dict):
                continue
            fn: dict[str, Any] = tc["function"] if isinstance(tc.get("function"), dict) else {}
            name = fn.get("name") or ""
            calls.append(ToolCall.from_wire(str(tc.get("id") or f"call_{i}"), str(name), fn.get("arguments"),
                                            generated_id=not tc.get("id")))
        recovered, raw_content = False, None
        found = None if calls else calls_in_text(content, tools, tool_choice)
        if found is not None:
            calls, raw_content, content, recovered = found.calls, content, (found.remaining or None), True
        usage: dict[str, Any] = response["usage"] if isinstance(response.get("usage"), dict) else {}
        details: dict[str, Any] = usage["prompt_tokens_details"] if isinstance(usage.get("prompt_tokens_details"), dict) \
            else {}
        return ModelOutput(
            content=content,
            tool_calls=tuple(calls),
            usage=Usage(prompt_tokens=_int(usage.get("prompt_tokens")),
                        completion_tokens=_int(usage.get("completion_tokens")),
                        cached_prompt_tokens=_int(details.get("cached_tokens"))),
            latency_s=latency,
            recovered=recovered,
            raw_content=raw_content,
        )

    def transport_error(self, exc: BaseException, url: str) -> BaseException:
        """Classify a transport exception; programming errors pass through unchanged."""
        import aiohttp

        if isinstance(exc, asyncio.TimeoutError):
            return InfraError(f"{_redact(url)}: request timed out after {self.timeout:g}s", retryable=True)
        if isinstance(exc, (aiohttp.ClientError, OSError)):
            return InfraError(f"{_redact(url)}: connection failed: {type(exc).__name__}: {exc}", retryable=True)
        return exc

    def status_error(self, status: int, content: bytes, headers: Any, url: str) -> HTTPInfraError:
        detail = _error_detail(content)
        if status in (401, 403):
            return HTTPInfraError(status, f"{_redact(url)}: HTTP {status}: bad API key or no access to "
                                          f"{self.model}: {detail}", retryable=False)
        if status == 429:
            return HTTPInfraError(status, f"{_redact(url)}: HTTP 429 rate limited: {detail}", retryable=True,
                                  retry_after=parse_retry_after(headers))
        retryable = status in RETRYABLE_STATUS or status >= 500
        return HTTPInfraError(status, f"{_redact(url)}: HTTP {status}: {detail}", retryable=retryable,
                              retry_after=parse_retry_after(headers) if retryable else None)

    # -- check ------------------------------------------------------------------

    async def check(self) -> None:
        await asyncio.gather(*(self._check_url(u) for u in self.base_urls))

    async def _check_url(self, url: str) -> None:
        fix_url = f"start the server, or fix --base-url / {self.URL_ENV}"
        try:
            status, content = await self.get_json(url, "/models")
        except InfraError as exc:
            raise ProviderError(f"server at {_redact(url)} unreachable: {exc}", fix=fix_url) from None
        if status in (401, 403):
            raise ProviderError(f"bad API key for the server at {_redact(url)} (HTTP {status}): "
                                f"{_error_detail(content)}", fix=f"set {self.KEY_ENV} (or --api-key) to a valid key")
        served: list[str] = []
        if status == 200:
            try:
                data = json.loads(content)
                served = [str(m["id"]) for m in data.get("data") or [] if isinstance(m, dict) and "id" in m]
            except (ValueError, AttributeError, TypeError):
                served = []  # an unreadable /models: probe below
        if served:
            if self.model not in served:
                shown = ", ".join(sorted(served)[:20]) + (" ..." if len(served) > 20 else "")
                raise ProviderError(f"model '{self.model}' not served at {_redact(url)}; available: {shown}",
                                    fix=f"use one of: {', '.join('openai:' + m for m in sorted(served)[:5])}")
            return
        await self._probe(url)

    #: the probe's path and the environment variables its errors name (an API kind on this
    #: transport sets its own)
    PROBE_PATH = "/chat/completions"
    KEY_ENV = "OPENAI_API_KEY"
    URL_ENV = "OPENAI_BASE_URL"

    def probe_body(self) -> dict[str, Any]:
        """The smallest request this API answers (one token)."""
        return {"model": self.model, "messages": [{"role": "user", "content": "ping"}], "max_tokens": 1,
                "temperature": 0.0}

    def probe_not_found(self, url: str, exc: Exception) -> ProviderError:
        """What a 404 to the probe means for this API."""
        return ProviderError(f"model '{self.model}' not served at {_redact(url)}: {exc}",
                             fix="check the model name the server was started with")

    async def _probe(self, url: str) -> None:
        """A 1-token request, for servers without a usable /models."""
        try:
            await self.post_json(url, self.PROBE_PATH, self.probe_body())
        except HTTPInfraError as exc:
            if exc.status in (401, 403):
                raise ProviderError(f"bad API key for the server at {_redact(url)} (HTTP {exc.status}): {exc}",
                                    fix=f"set {self.KEY_ENV} (or --api-key) to a valid key") from None
            if exc.status == 404:
                raise self.probe_not_found(url, exc) from None
            if not exc.retryable:
                raise ProviderError(f"the server at {_redact(url)} refused a test request for '{self.model}' "
                                    f"(HTTP {exc.status}): {exc}") from None
            # a busy or flaky server is the wrapper's business, not a configuration error
        except InfraError as exc:
            if "connection failed" in str(exc):
                raise ProviderError(f"server at {_redact(url)} unreachable: {exc}",
                                    fix=f"start the server, or fix --base-url / {self.URL_ENV}") from None


class HTTPInfraError(InfraError):
    """An HTTP error status from the server (``status``), classified like every InfraError."""

    def __init__(self, status: int, message: str, *, retryable: bool, retry_after: float | None = None) -> None:
        super().__init__(message, retryable=retryable, retry_after=retry_after)
        self.status = status


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _redact(url: str) -> str:
    """``url`` without a password (``http://user:KEY@host`` -> ``http://user:***@host``), for
    settings (stored) and messages (logged); requests still use the real URL."""
    parts = urlparse(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return parts._replace(netloc=netloc).geturl()


def _loop_id() -> int:
    try:
        return id(asyncio.get_running_loop())
    except RuntimeError:  # outside a loop (tests building clients directly)
        return 0


def _wire_messages(messages: list[Message]) -> list[Message]:
    """Messages as the API expects them: tool-call arguments as JSON strings (copied only if needed)."""
    out = messages
    for i, m in enumerate(messages):
        calls = m.get("tool_calls")
        if not calls or all(isinstance((c.get("function") or {}).get("arguments"), str) for c in calls):
            continue
        if out is messages:
            out = list(messages)
        fixed = []
        for c in calls:
            fn = dict(c.get("function") or {})
            if not isinstance(fn.get("arguments"), str):
                fn["arguments"] = json.dumps(fn.get("arguments") or {}, ensure_ascii=False)
            fixed.append({**c, "function": fn})
        out[i] = {**m, "tool_calls": fixed}
    return out


def _error_detail(content: bytes) -> str:
    """The message of an OpenAI-style error body (or the body's text), shortened."""
    try:
        body = json.loads(content)
    except (ValueError, RecursionError):
        return content.decode("utf-8", "replace").strip()[:500] or "(empty body)"
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:500]
        if isinstance(err, str):
            return err[:500]
        if body.get("detail"):
            return str(body["detail"])[:500]
    return json.dumps(body)[:500]
