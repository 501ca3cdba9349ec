"""The variant proxy's request handling, apart from any HTTP server.

:class:`VariantProxy` takes an OpenAI chat-completions request body and returns the
response body (or raises :class:`ProxyError`, an OpenAI-style error with its HTTP
status). Requests with native ``tools`` are served through a :class:`Conversation`
under the variant; requests without tools (a user simulator, a judge) go upstream
unchanged.
"""

from __future__ import annotations

import asyncio
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
from .request import ProxyError, check_request, forwarded


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
    max_snapshots: int = 100_000        # conversation states kept to continue them (least recently used out)
    max_snapshot_bytes: int = 256 * 1024 * 1024  # ... and about how many bytes of transcript they may hold
    client_key: str | None = None       # clients must send 'Authorization: Bearer <it>' [default: anyone may]
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
        self._snapshot_bytes = 0
        #: conversation id -> turns served (or being served) on its row: a snapshot with fewer turns
        #: is a turn the client sends again (a retry, a regeneration), served as a branch on its own row
        self._heads: OrderedDict[str, int] = OrderedDict()
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
        tools = body.get("tools")
        if not isinstance(tools, list) or not tools:
            raise ProxyError(400, "chat() needs native 'tools'; requests without tools pass through")
        check_request(body)
        model = self.upstream_model(body)
        started = time.perf_counter()
        try:
            bound = self.codecs.cached(tools)
            if bound is None:  # a new tool list: its variant may take seconds to build (10,000 tools)
                bound = await asyncio.to_thread(self.codecs.build, tools)
                self.codecs.remember(tools, bound)
            hashes = history_hashes(messages)
            conv, start = self._find(hashes, bound)
            if start == 0 and len(messages) > 1:
                conv = await self._stored(hashes, bound) or conv
            for i in range(start, len(messages)):
                conv.add(messages[i], i)
        except RequestError as exc:
            raise ProxyError(400, exc.render(), code="invalid_request") from None
        provider = self._provider(model)
        config = self._generate_config(body)

        async def upstream(msgs: list[Message], variant_tools: list[dict[str, Any]],
                           choice: str | None) -> ModelOutput:
            return await provider.generate(msgs, variant_tools, choice, config)

        turns = conv.log.turns
        self._claim(conv.log.conv_id, turns + 1)
        try:
            reply, finish = await conv.turn(upstream, _tool_choice(body.get("tool_choice")), self.config.max_rounds)
        except InfraError as exc:
            conv.log.termination = "upstream_error"
            self._record(conv.log)
            self._release(conv.log.conv_id, turns)
            raise upstream_error(exc) from None
        except asyncio.CancelledError:  # the client went away (or shutdown ran out of grace): a retry continues it
            conv.log.termination = "cancelled"
            self._record(conv.log)
            self._release(conv.log.conv_id, turns)
            raise
        head = extend_hash(hashes[-1], reply)
        conv.log.head = head.hex()
        self._remember(head, conv.snapshot())
        self._record(conv.log)
        return self._completion(body, reply, finish, conv.log, time.perf_counter() - started)

    def _find(self, hashes: list[bytes], bound: Any) -> tuple[Conversation, int]:
        """The conversation whose longest served history prefixes this one, or a new one. A
        snapshot that was already continued (the client sends a turn again: a retry, a
        regeneration) starts a branch: a new conversation (its own row) that copies the
        snapshot's log and names its parent, so the first conversation's row is left as it was."""
        for i in range(len(hashes) - 1, 0, -1):
            snap = self._snapshots.get(hashes[i])
            if snap is not None and snap.log.domain == bound.domain and snap.log.variant == self.variant.name:
                self._snapshots.move_to_end(hashes[i])
                log = self._continued(snap.log.copy())
                return Conversation(bound, log, self.config.control, self.config.instructions, snap), i
        log = CallLog(conv_id=uuid.uuid4().hex, variant=self.variant.name, domain=bound.domain,
                      catalog=bound.codec.catalog.name)
        return Conversation(bound, log, self.config.control, self.config.instructions), 0

    def _continued(self, log: CallLog) -> CallLog:
        """``log`` continued, or, when its conversation has moved past it, a branch of it."""
        if self._heads.get(log.conv_id, log.turns) != log.turns:
            log.branch_of, log.conv_id = log.conv_id, uuid.uuid4().hex
            log.started, log.termination = time.time(), "live"
        return log

    async def _stored(self, hashes: list[bytes], bound: Any) -> Conversation | None:
        """A history no snapshot holds, that a stored conversation ended with (the proxy was
        restarted, or the state left memory): the conversation is rebuilt from the history, as
        any unknown history is, but continues that conversation's row."""
        found = self.recorder.stored_conversation(hashes) if self.recorder is not None else None
        if found is None:
            return None
        data = await asyncio.to_thread(self.recorder.load, found[0])  # type: ignore[union-attr]
        if not data or data.get("domain") != bound.domain or data.get("variant") != self.variant.name:
            return None
        log = self._continued(CallLog.from_dict(data))
        log.termination = "live"
        return Conversation(bound, log, self.config.control, self.config.instructions)

    def _claim(self, conv_id: str, turns: int) -> None:
        self._heads[conv_id] = turns
        self._heads.move_to_end(conv_id)
        if len(self._heads) > self.config.max_snapshots:
            self._heads.popitem(last=False)

    def _release(self, conv_id: str, turns: int) -> None:
        """A turn that failed: the conversation may be continued from before it again."""
        if self._heads.get(conv_id) == turns + 1:
            self._heads[conv_id] = turns

    def _remember(self, key: bytes, snap: Snapshot) -> None:
        """Keep ``snap`` under ``key``; the least recently used go first, past ``max_snapshots``
        states or ``max_snapshot_bytes`` of transcript (counted per snapshot, so shared messages
        count more than once: the bound errs on the small side)."""
        old = self._snapshots.pop(key, None)
        if old is not None:
            self._snapshot_bytes -= old.nbytes
        self._snapshots[key] = snap
        self._snapshot_bytes += snap.nbytes
        while self._snapshots and (len(self._snapshots) > self.config.max_snapshots
                                   or self._snapshot_bytes > self.config.max_snapshot_bytes):
            self._snapshot_bytes -= self._snapshots.popitem(last=False)[1].nbytes

    def memory(self) -> dict[str, int]:
        """What the proxy holds to continue conversations (``/health``)."""
        return {"snapshots": len(self._snapshots), "snapshot_bytes": self._snapshot_bytes}

    def _record(self, log: CallLog) -> None:
        if self.recorder is not None:
            self.recorder.update(log)

    def _generate_config(self, body: Mapping[str, Any]) -> GenerateConfig:
        """The upstream's sampling settings (checked by :func:`~.request.check_request`), with the
        request's other fields forwarded as they are (:func:`~.request.forwarded`)."""
        max_tokens = body.get("max_completion_tokens") or body.get("max_tokens") or self.config.max_tokens
        temperature = body.get("temperature")
        return GenerateConfig(temperature=1.0 if temperature is None else float(temperature),
                              max_tokens=int(max_tokens),
                              top_p=None if body.get("top_p") is None else float(body["top_p"]),
                              seed=None if body.get("seed") is None else int(body["seed"]),
                              extra=forwarded(body) or None)

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
        check_request(body)
        model = self.upstream_model(body)
        inner = self._provider(model).inner
        assert isinstance(inner, OpenAIProvider)
        out = dict(body)
        if self.config.model:
            out["model"] = self.config.model
        return inner, inner.next_url(), out


def _tool_choice(value: Any) -> str | None:
    """The agent's tool_choice (checked by :func:`~.request.check_tool_choice`) for the variant: a
    named native function cannot be named in the variant (it may be a dispatcher operation or a
    protocol), so it becomes 'required'."""
    if value is None or isinstance(value, str):
        return value
    return "required"


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
