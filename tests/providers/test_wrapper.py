"""The provider wrapper: retries with Retry-After, concurrency limits, the cache key."""

from __future__ import annotations

import asyncio
import time

import pytest

from toolbias.providers.base import GenerateConfig, InfraError, ModelAPI, ModelOutput
from toolbias.providers.wrapper import ProviderWrapper, ResponseCache, RetryPolicy, cache_key


class Flaky(ModelAPI):
    cacheable = True

    def __init__(self, failures: int, retry_after: float | None = None, retryable: bool = True, url="http://a"):
        self.spec, self.base_url = "flaky", url
        self.failures, self.retry_after, self.retryable = failures, retry_after, retryable
        self.calls = 0
        self.active = 0
        self.peak = 0

    async def generate(self, messages, tools, tool_choice, config):
        self.calls += 1
        self.active += 1
        self.peak = max(self.peak, self.active)
        try:
            await asyncio.sleep(0.01)
            if self.calls <= self.failures:
                raise InfraError("HTTP 503", retry_after=self.retry_after, retryable=self.retryable)
            return ModelOutput(content=f"answer {self.calls}")
        finally:
            self.active -= 1


FAST = RetryPolicy(attempts=4, initial_wait=0.0, max_wait=0.0)
MSGS = [{"role": "user", "content": "hi"}]


def gen(w, msgs=MSGS, tools=(), choice=None, cfg=GenerateConfig()):
    return asyncio.run(w.generate(list(msgs), list(tools), choice, cfg))


def test_retries_until_success_and_counts_them():
    inner = Flaky(failures=2)
    w = ProviderWrapper(inner, retry=FAST)
    assert gen(w).content == "answer 3"
    assert inner.calls == 3 and w.stats.retries == 2 and w.stats.failures == 0


def test_retries_are_bounded():
    inner = Flaky(failures=100)
    w = ProviderWrapper(inner, retry=FAST)
    with pytest.raises(InfraError):
        gen(w)
    assert inner.calls == 4 and w.stats.failures == 1


def test_non_retryable_errors_are_not_retried():
    inner = Flaky(failures=1, retryable=False)
    with pytest.raises(InfraError):
        gen(ProviderWrapper(inner, retry=FAST))
    assert inner.calls == 1


def test_retry_after_is_honoured():
    inner = Flaky(failures=1, retry_after=0.3)
    w = ProviderWrapper(inner, retry=FAST)
    t = time.perf_counter()
    gen(w)
    assert time.perf_counter() - t >= 0.3


def test_concurrency_limit_per_endpoint():
    inner = Flaky(failures=0, url="http://limit-test")
    w = ProviderWrapper(inner, concurrency=3, retry=FAST)

    async def many():
        await asyncio.gather(*(w.generate(MSGS, [], None, GenerateConfig()) for _ in range(12)))

    asyncio.run(many())
    assert inner.peak == 3 and inner.calls == 12


def test_cache_key_covers_what_changes_the_answer():
    m = Flaky(0)
    tools = [{"type": "function", "function": {"name": "a"}}, {"type": "function", "function": {"name": "b"}}]
    base = cache_key(m, MSGS, tools, None, GenerateConfig())
    variants = [
        cache_key(m, [{"role": "user", "content": "hi!"}], tools, None, GenerateConfig()),
        cache_key(m, MSGS, list(reversed(tools)), None, GenerateConfig()),  # tool order matters
        cache_key(m, MSGS, tools, "required", GenerateConfig()),
        cache_key(m, MSGS, tools, None, GenerateConfig(temperature=0.7)),
        cache_key(m, MSGS, tools, None, GenerateConfig(max_tokens=10)),
        cache_key(m, MSGS, tools, None, GenerateConfig(seed=3)),
        cache_key(Flaky(0, url="http://b"), MSGS, tools, None, GenerateConfig()),
    ]
    other = Flaky(0)
    other.spec = "other-model"
    variants.append(cache_key(other, MSGS, tools, None, GenerateConfig()))
    wired = Flaky(0)
    wired.settings = lambda: {"spec": wired.spec, "extra_body": {"stop": ["x"]}}  # type: ignore[method-assign]
    variants.append(cache_key(wired, MSGS, tools, None, GenerateConfig()))      # provider settings matter
    assert base not in variants and len(set(variants)) == len(variants)
    # operational knobs do not change the key
    slow = Flaky(5)
    slow.timeout = 999  # type: ignore[attr-defined]
    assert cache_key(slow, MSGS, tools, None, GenerateConfig()) == base


def test_cache_hits_skip_the_model(tmp_path):
    cache = ResponseCache(tmp_path / "c.db")
    inner = Flaky(0)
    w = ProviderWrapper(inner, retry=FAST, cache=cache)
    first = gen(w)
    second = gen(w)
    assert inner.calls == 1 and second.cached and second.content == first.content
    gen(w, choice="required")
    assert inner.calls == 2
