"""The layer every provider runs inside: retries, a concurrency limit per endpoint,
and a response cache. Providers never re-implement these.

Cache key (documented contract, tested): SHA-256 of the canonical JSON of
``{"model": spec, "endpoint": base URL(s), "provider": the provider's settings other than where
requests go (:meth:`ModelAPI.behaviour`: ``--extra-body``, the paper's backbone wire settings
such as stop sequences and the thinking switch), "messages": [...], "tools": [...] (in order),
"tool_choice": ..., "config": {temperature, max_tokens, top_p, seed}}``. Operational
knobs (timeouts, concurrency, retry counts, API keys) are excluded, so they never
invalidate a cache and secrets never reach it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt
from tenacity.wait import wait_base

from ..base.canonical import sha256_of
from .base import GenerateConfig, InfraError, Message, ModelAPI, ModelOutput

if TYPE_CHECKING:
    from tenacity import RetryCallState

    from ..catalog.model import Task
    from ..variants.codec import Codec

log = logging.getLogger("toolbias.providers")


def cache_key(model: ModelAPI, messages: list[Message], tools: list[dict[str, Any]], tool_choice: str | None,
              config: GenerateConfig) -> str:
    settings = model.settings()
    payload = {
        "model": model.spec,
        "endpoint": settings.get("base_urls") or model.base_url,
        "provider": model.behaviour(),
        "messages": messages,
        "tools": tools,
        "tool_choice": tool_choice,
        "config": config.to_dict(),
    }
    return sha256_of(payload)


class ResponseCache:
    """Model responses on disk (SQLite), keyed by :func:`cache_key`."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, output TEXT NOT NULL)")
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> ModelOutput | None:
        with self._lock:
            row = self._db.execute("SELECT output FROM responses WHERE key=?", (key,)).fetchone()
        if row is None:
            self.misses += 1
            return None
        self.hits += 1
        d = json.loads(row[0])
        d["cached"] = True
        return ModelOutput.from_dict(d)

    def put(self, key: str, output: ModelOutput) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO responses VALUES (?, ?)", (key, json.dumps(output.to_dict())))
            self._db.commit()

    def close(self) -> None:
        self._db.close()


def backoff_seconds(attempt: int, exc: BaseException | None, initial: float, maximum: float) -> float:
    """Exponential backoff with full jitter, but never shorter than a server's Retry-After."""
    backoff = random.uniform(0, min(maximum, initial * 2 ** (attempt - 1)))
    after = getattr(exc, "retry_after", None)
    return max(backoff, float(after)) if after is not None else backoff


class _WaitRetryAfter(wait_base):
    def __init__(self, initial: float, maximum: float) -> None:
        self.initial, self.maximum = initial, maximum

    def __call__(self, retry_state: RetryCallState) -> float:
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        # tenacity's attempt 1 here is the call's second attempt (the first ran on the fast path)
        return backoff_seconds(retry_state.attempt_number + 1, exc, self.initial, self.maximum)


@dataclass
class RetryPolicy:
    attempts: int = 6
    initial_wait: float = 0.5
    max_wait: float = 30.0


@dataclass
class WrapperStats:
    calls: int = 0
    retries: int = 0
    failures: int = 0
    cache_hits: int = 0

    def add(self, other: WrapperStats) -> None:
        """Count ``other``'s calls too (a worker process's, when a study forks)."""
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def since(self, before: WrapperStats) -> WrapperStats:
        return WrapperStats(**{f.name: getattr(self, f.name) - getattr(before, f.name) for f in fields(self)})


class ProviderWrapper(ModelAPI):
    """Adds retry, a per-endpoint concurrency limit and an optional cache to a provider."""

    _semaphores: dict[tuple[int, str], asyncio.Semaphore] = {}

    def __init__(self, inner: ModelAPI, *, concurrency: int = 8, retry: RetryPolicy | None = None,
                 cache: ResponseCache | None = None, on_retry: Callable[[str], None] | None = None) -> None:
        self.inner = inner
        self.spec = inner.spec
        self.base_url = inner.base_url
        self.concurrency = max(1, concurrency)
        self.retry = retry or RetryPolicy()
        self.cache = cache if inner.cacheable else None
        self.cpu_bound = inner.cpu_bound
        self.stats = WrapperStats()
        self.on_retry = on_retry

    @property
    def caches_responses(self) -> bool:
        return self.cache is not None

    def settings(self) -> dict[str, Any]:
        return self.inner.settings()

    async def check(self) -> None:
        await self.inner.check()

    async def aclose(self) -> None:
        await self.inner.aclose()

    def _semaphore(self) -> asyncio.Semaphore:
        key = (id(asyncio.get_running_loop()), self.base_url or self.spec)
        sem = self._semaphores.get(key)
        if sem is None:
            sem = self._semaphores[key] = asyncio.Semaphore(self.concurrency)
        return sem

    def for_episode(self, task: Task, codec: Codec) -> ModelAPI:
        bound = self.inner.for_episode(task, codec)
        return self if bound is self.inner else _BoundWrapper(self, bound)

    async def generate(self, messages: list[Message], tools: list[dict[str, Any]], tool_choice: str | None,
                       config: GenerateConfig) -> ModelOutput:
        return await self._call(self.inner, messages, tools, tool_choice, config)

    async def _call(self, target: ModelAPI, messages: list[Message], tools: list[dict[str, Any]],
                    tool_choice: str | None, config: GenerateConfig) -> ModelOutput:
        key = cache_key(target, messages, tools, tool_choice, config) if self.cache else None
        if key and self.cache:
            hit = self.cache.get(key)
            if hit is not None:
                self.stats.cache_hits += 1
                return hit
        self.stats.calls += 1
        try:  # fast path: most calls succeed first time and need no retry machinery
            if self.cpu_bound:  # no endpoint to protect, and it never yields: a limit could not bind
                out = await target.generate(messages, tools, tool_choice, config)
            else:
                async with self._semaphore():
                    out = await target.generate(messages, tools, tool_choice, config)
        except InfraError as exc:
            if not exc.retryable or self.retry.attempts <= 1:
                self.stats.failures += 1
                raise
            out = await self._retry(target, messages, tools, tool_choice, config, first=exc)
        if key and self.cache:
            self.cache.put(key, out)
        return out

    async def _retry(self, target: ModelAPI, messages: list[Message], tools: list[dict[str, Any]],
                     tool_choice: str | None, config: GenerateConfig, first: InfraError) -> ModelOutput:
        """Attempts 2..n after a retryable failure, with backoff honouring Retry-After."""
        self._log_failure(1, first)
        await asyncio.sleep(backoff_seconds(1, first, self.retry.initial_wait, self.retry.max_wait))
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.retry.attempts - 1),
            wait=_WaitRetryAfter(self.retry.initial_wait, self.retry.max_wait),
            retry=retry_if_exception(lambda e: isinstance(e, InfraError) and e.retryable),
            before_sleep=self._log_retry,
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    async with self._semaphore():
                        out = await target.generate(messages, tools, tool_choice, config)
        except InfraError:
            self.stats.failures += 1
            raise
        return out

    def _log_retry(self, state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        self._log_failure(state.attempt_number + 1, exc)

    def _log_failure(self, attempt: int, exc: BaseException | None) -> None:
        self.stats.retries += 1
        msg = f"{self.spec}: attempt {attempt} failed ({exc}); retrying"
        log.warning(msg)
        if self.on_retry:
            self.on_retry(msg)


class _BoundWrapper(ModelAPI):
    """An episode-bound agent (oracle, scripted) behind its parent's retry and limits."""

    def __init__(self, parent: ProviderWrapper, bound: ModelAPI) -> None:
        self.parent, self.bound = parent, bound
        self.spec, self.base_url = bound.spec, bound.base_url

    async def generate(self, messages: list[Message], tools: list[dict[str, Any]], tool_choice: str | None,
                       config: GenerateConfig) -> ModelOutput:
        return await self.parent._call(self.bound, messages, tools, tool_choice, config)


def wrap(inner: ModelAPI, **options: Any) -> ProviderWrapper:
    return inner if isinstance(inner, ProviderWrapper) else ProviderWrapper(inner, **options)
