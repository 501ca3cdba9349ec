"""The variant proxy's request handling, apart from any HTTP server.

:class:`VariantProxy` takes an OpenAI chat-completions request body and returns the
response body (or raises :class:`ProxyError`, an OpenAI-style error with its HTTP
status). Requests with native ``tools`` are served through a :class:`Conversation`
under the variant; requests without tools (a user simulator, a judge) go upstream
unchanged.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import ToolbiasError
from ..providers.base import GenerateConfig, InfraError, Message, ModelOutput
from ..providers.openai import HTTPInfraError, OpenAIProvider
from ..providers.wrapper import ProviderWrapper, RetryPolicy
from ..variants import resolve_variant
from ..variants.codec import Control
from .codecs import CodecSource, RequestError
from .conversation import CallLog, Conversation, Snapshot, extend_hash, history_hashes


class ProxyError(Exception):
    """An error the client receives as ``{"error": {...}}`` with an HTTP status."""

    def __init__(self, status: int, message: str, kind: str = "invalid_request_error",
                 code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.kind, self.code = status, message, kind, code

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.kind, "param": None, "code": self.code}}


@dataclass
class ProxyConfig:
    """Everything ``toolbias proxy`` takes (each field has a CLI option)."""

    upstream: tuple[str, ...]
    variant: str
    catalog: str | None = None
    model: str | None = None            # upstream model name [default: the request's]
    api_key: str | None = None          # upstream key [default: OPENAI_API_KEY or a placeholder]
    control: Control = Control.STRICT
    instructions: bool = False          # append the variant's instruction to system messages
    max_rounds: int = 16                # upstream requests per agent turn (protocol replies, rejections)
    retries: int = 3                    # attempts per upstream request (transient errors)
    timeout: float = 120.0              # seconds per upstream request
    max_connections: int = 512
    max_tokens: int = 4096              # when the request names none
    study: str | None = None            # store study name [default: proxy|<variant>]
    max_snapshots: int = 100_000
    extra: dict[str, Any] = field(default_factory=dict)


#: request fields the proxy maps onto the upstream request itself
_SAMPLING = ("temperature", "top_p", "seed", "max_tokens", "max_completion_tokens")


class VariantProxy:
    """Serve chat requests under one variant (see the module docstring)."""

    def __init__(self, config: ProxyConfig, recorder: Any | None = None) -> None:
        if not config.upstream:
            raise ToolbiasError("no upstream URL", fix="pass --upstream http://HOST:PORT/v1")
        self.config = config
        self.variant = resolve_variant(config.variant)
        self.codecs = CodecSource(self.variant, config.catalog)
        self.recorder = recorder
        self._providers: dict[str, ProviderWrapper] = {}
        self._snapshots: OrderedDict[bytes, Snapshot] = OrderedDict()
        self._ids = itertools.count(1)
        self.upstream_probe = self._provider(config.model or "upstream")  # validates the URLs now

    # -- upstream ---------------------------------------------------------------------

    def _provider(self, model: str) -> ProviderWrapper:
        p = self._providers.get(model)
        if p is None:
            inner = OpenAIProvider(model, base_urls=list(self.config.upstream), api_key=self.config.api_key,
                                   timeout=self.config.timeout, max_connections=self.config.max_connections)
            p = self._providers[model] = ProviderWrapper(
                inner, concurrency=self.config.max_connections,
                retry=RetryPolicy(attempts=max(1, self.config.retries), initial_wait=0.25, max_wait=5.0))
        return p

    def upstream_model(self, body: Mapping[str, Any]) -> str:
        model = self.config.model or body.get("model")
        if not isinstance(model, str) or not model:
            raise ProxyError(400, "the request names no 'model'", code="missing_model")
        return model

    async def aclose(self) -> None:
        for p in self._providers.values():
            await p.aclose()

    # -- chat -------------------------------------------------------------------------

    async def chat(self, body: Any) -> dict[str, Any]:
        """The response to a non-streaming chat request with native tools (raises ProxyError)."""
        if not isinstance(body, Mapping):
            raise ProxyError(400, "the request body must be a JSON object")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ProxyError(400, "'messages' must be a non-empty list", code="invalid_messages")
        if body.get("n", 1) not in (1, None):
            raise ProxyError(400, "the variant proxy serves n=1 only", code="unsupported_n")
        tools = body.get("tools")
        if not isinstance(tools, list) or not tools:
            raise ProxyError(400, "chat() needs native 'tools'; requests without tools pass through")
        model = self.upstream_model(body)
        started = time.perf_counter()
        try:
            bound = self.codecs.for_tools(tools)
            hashes = history_hashes(messages)
            conv, start = self._find(hashes, bound)
            for i in range(start, len(messages)):
                conv.add(messages[i], i)
        except RequestError as exc:
            raise ProxyError(400, exc.render(), code="invalid_request") from None
        provider = self._provider(model)
        config = self._generate_config(body)

        async def upstream(msgs: list[Message], variant_tools: list[dict[str, Any]],
                           choice: str | None) -> ModelOutput:
            return await provider.generate(msgs, variant_tools, choice, config)

        try:
            reply, finish = await conv.turn(upstream, _tool_choice(body.get("tool_choice")), self.config.max_rounds)
        except InfraError as exc:
            conv.log.termination = "upstream_error"
            self._record(conv.log)
            raise upstream_error(exc) from None
        self._remember(extend_hash(hashes[-1], reply), conv.snapshot())
        self._record(conv.log)
        return self._completion(body, reply, finish, conv.log, time.perf_counter() - started)

    def _find(self, hashes: list[bytes], bound: Any) -> tuple[Conversation, int]:
        """The conversation whose longest served history prefixes this one, or a new one."""
        for i in range(len(hashes) - 1, 0, -1):
            snap = self._snapshots.get(hashes[i])
            if snap is not None and snap.log.domain == bound.domain and snap.log.variant == self.variant.name:
                self._snapshots.move_to_end(hashes[i])
                return Conversation(bound, snap.log, self.config.control, self.config.instructions, snap), i
        log = CallLog(conv_id=uuid.uuid4().hex, variant=self.variant.name, domain=bound.domain,
                      catalog=bound.codec.catalog.name)
        return Conversation(bound, log, self.config.control, self.config.instructions), 0

    def _remember(self, key: bytes, snap: Snapshot) -> None:
        self._snapshots[key] = snap
        if len(self._snapshots) > self.config.max_snapshots:
            self._snapshots.popitem(last=False)

    def _record(self, log: CallLog) -> None:
        if self.recorder is not None:
            self.recorder.update(log)

    def _generate_config(self, body: Mapping[str, Any]) -> GenerateConfig:
        try:
            max_tokens = body.get("max_completion_tokens") or body.get("max_tokens") or self.config.max_tokens
            temperature = body.get("temperature")
            return GenerateConfig(temperature=1.0 if temperature is None else float(temperature),
                                  max_tokens=int(max_tokens),
                                  top_p=None if body.get("top_p") is None else float(body["top_p"]),
                                  seed=None if body.get("seed") is None else int(body["seed"]))
        except (TypeError, ValueError):
            raise ProxyError(400, "temperature, top_p, seed and max_tokens must be numbers",
                             code="invalid_sampling") from None

    def _completion(self, body: Mapping[str, Any], reply: Message, finish: str, log: CallLog,
                    latency: float) -> dict[str, Any]:
        message = {"role": "assistant", "content": reply.get("content")}
        if reply.get("tool_calls"):
            message["tool_calls"] = reply["tool_calls"]
        mark = {"conversation": log.conv_id, "variant": log.variant, "rounds": log.rounds,
                "latency_s": round(latency, 6)}
        # the mark in the choice too: litellm (tau2's client) keeps a choice's extra fields and drops the
        # response's, so tau2's results file names its schema (``toolbias report --tau2-results``)
        return {
            "id": f"chatcmpl-tb{next(self._ids)}", "object": "chat.completion", "created": int(time.time()),
            "model": str(body.get("model") or self.config.model),
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None,
                         "toolbias": mark}],
            "usage": {"prompt_tokens": log.prompt_tokens, "completion_tokens": log.completion_tokens,
                      "total_tokens": log.prompt_tokens + log.completion_tokens},
            "toolbias": mark,
        }

    def upstream_provider(self) -> OpenAIProvider:
        """The provider that reaches the upstream (its ``/models``, its URLs), without the wrapper."""
        inner = self.upstream_probe.inner
        assert isinstance(inner, OpenAIProvider)
        return inner

    # -- pass-through -----------------------------------------------------------------

    def passthrough_request(self, body: Mapping[str, Any]) -> tuple[OpenAIProvider, str, dict[str, Any]]:
        """(provider, URL, body) for a request without tools, forwarded unchanged but for
        ``--model``."""
        model = self.upstream_model(body)
        inner = self._provider(model).inner
        assert isinstance(inner, OpenAIProvider)
        out = dict(body)
        if self.config.model:
            out["model"] = self.config.model
        return inner, inner.next_url(), out


def _tool_choice(value: Any) -> str | None:
    """The agent's tool_choice for the variant: a named native function cannot be named in
    the variant (it may be a dispatcher operation or a protocol), so it becomes 'required'."""
    if value is None or value in ("auto", "none", "required"):
        return value if isinstance(value, str) else None
    if isinstance(value, Mapping):
        return "required"
    raise ProxyError(400, f"unsupported tool_choice {value!r}", code="invalid_tool_choice")


def upstream_error(exc: InfraError) -> ProxyError:
    status = getattr(exc, "status", None) if isinstance(exc, HTTPInfraError) else None
    message = f"upstream model server: {exc}"
    if status is not None and 400 <= status < 500 and status not in (401, 403, 408, 429):
        return ProxyError(status, message, kind="invalid_request_error", code="upstream_rejected")
    if status == 429:
        return ProxyError(429, message, kind="rate_limit_error", code="upstream_rate_limited")
    if "timed out" in str(exc):
        return ProxyError(504, message, kind="upstream_error", code="upstream_timeout")
    return ProxyError(502, message, kind="upstream_error", code="upstream_unavailable")
