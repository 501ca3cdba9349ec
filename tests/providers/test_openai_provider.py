"""The openai provider over real loopback HTTP: a scriptable fake server, and llama_cpp.server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest

from tests.support.catalogs import THERMOSTAT_TOOLS
from tests.support.servers import FAULTS, FakeOpenAIServer, LlamaCppServer, Reply
from toolbias.errors import ProviderError
from toolbias.providers import make_provider
from toolbias.providers.base import GenerateConfig, InfraError
from toolbias.providers.openai import PLACEHOLDER_KEY, OpenAIProvider, parse_retry_after

TOOLS = THERMOSTAT_TOOLS
MESSAGES = [{"role": "system", "content": "Use only the provided tools."},
            {"role": "user", "content": "Set the bedroom to 21 degrees."}]
CFG = GenerateConfig()


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(hang_s=10) as srv:
        yield srv


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def provider(srv: FakeOpenAIServer, **kw: object) -> OpenAIProvider:
    return OpenAIProvider("fake-model", base_url=srv.base_url, timeout=kw.pop("timeout", 5.0), **kw)  # type: ignore[arg-type]


async def generate(p: OpenAIProvider, tools: list | None = None, tool_choice: str | None = None):  # type: ignore[no-untyped-def]
    try:
        return await p.generate(MESSAGES, TOOLS if tools is None else tools, tool_choice, CFG)
    finally:
        await p.aclose()


# ------------------------------------------------------------------ responses


async def test_native_tool_calls_are_parsed(server: FakeOpenAIServer) -> None:
    server.queue(Reply.calls(("set_temperature", {"zone": "bedroom", "celsius": 21}),
                             ("set_temperature", '{"zone": "kitchen", "celsius": 19}')))
    out = await generate(provider(server), tool_choice="required")
    assert [(c.name, c.arguments) for c in out.tool_calls] == [
        ("set_temperature", {"zone": "bedroom", "celsius": 21}), ("set_temperature", {"zone": "kitchen", "celsius": 19})]
    assert [c.id for c in out.tool_calls] == ["call_0", "call_1"]
    assert out.recovered is False and out.content is None
    assert out.usage.prompt_tokens > 0 and out.usage.completion_tokens > 0 and out.latency_s > 0
    body = server.requests[-1]
    assert body["model"] == "fake-model" and body["tools"] == TOOLS and body["tool_choice"] == "required"
    assert body["messages"] == MESSAGES and body["temperature"] == 0.0 and body["max_tokens"] == 512


async def test_malformed_native_arguments_become_parse_errors(server: FakeOpenAIServer) -> None:
    server.queue(Reply.calls(("set_temperature", '{"zone": "bed'), ("set_temperature", "[1]")))
    out = await generate(provider(server))
    assert all(c.arguments is None and c.parse_error for c in out.tool_calls)
    assert out.tool_calls[0].raw_arguments == '{"zone": "bed'


async def test_text_calls_are_recovered_and_flagged(server: FakeOpenAIServer) -> None:
    server.queue(Reply.text('Okay.\n<tool_call>\n{"name": "set_temperature", "arguments": '
                            '{"zone": "bedroom", "celsius": 21}}\n</tool_call>'))
    out = await generate(provider(server))
    assert out.recovered is True
    assert [(c.name, c.arguments) for c in out.tool_calls] == [("set_temperature", {"zone": "bedroom", "celsius": 21})]
    assert out.content == "Okay."


async def test_no_recovery_without_tools_or_with_tool_choice_none(server: FakeOpenAIServer) -> None:
    text = '{"name": "set_temperature", "arguments": {"zone": "bedroom", "celsius": 21}}'
    server.queue(Reply.text(text), Reply.text(text))
    out = await generate(provider(server), tools=[])
    assert (out.tool_calls, out.recovered, out.content) == ((), False, text)
    assert "tools" not in server.requests[-1]
    out = await generate(provider(server), tool_choice="none")
    assert (out.tool_calls, out.recovered, out.content) == ((), False, text)


async def test_plain_answer(server: FakeOpenAIServer) -> None:
    server.queue(Reply.text("All done."))
    out = await generate(provider(server))
    assert (out.content, out.tool_calls, out.recovered) == ("All done.", (), False)


async def test_sampling_settings_are_sent(server: FakeOpenAIServer) -> None:
    p = provider(server, extra_body={"top_k": 20})
    try:
        await p.generate(MESSAGES, TOOLS, None, GenerateConfig(temperature=0.7, max_tokens=64, top_p=0.9, seed=3))
    finally:
        await p.aclose()
    body = server.requests[-1]
    assert (body["temperature"], body["max_tokens"], body["top_p"], body["seed"], body["top_k"]) == (0.7, 64, 0.9, 3, 20)
    assert "tool_choice" not in body


# ------------------------------------------------------------------ faults -> InfraError

EXPECTED = {
    "http500": "HTTP 500", "http502": "HTTP 502", "http503": "HTTP 503", "rate_limit": "HTTP 429",
    "rate_limit_retry_after": "HTTP 429", "timeout": "timed out", "drop": "connection failed",
    "short_read": "connection failed", "truncated": "unreadable response", "empty_choices": "no choices",
}


@pytest.mark.parametrize("kind", FAULTS)
async def test_each_fault_is_a_retryable_infra_error(server: FakeOpenAIServer, kind: str) -> None:
    server.retry_after = 2.5
    server.inject(kind)
    # the hung reply (held 30 s) must time out; other replies get a roomy limit, so that a
    # loaded machine's slow answer is not taken for the fault
    p = provider(server, timeout=3.0 if kind == "timeout" else 30.0)
    with pytest.raises(InfraError) as info:
        await p.generate(MESSAGES, TOOLS, None, CFG)
    err = info.value
    assert err.retryable is True
    assert EXPECTED[kind] in str(err) and server.base_url in str(err)
    assert err.retry_after == (2.5 if kind == "rate_limit_retry_after" else None)
    # the next request, on the same client, succeeds
    out = await p.generate(MESSAGES, TOOLS, None, CFG)
    assert out.content == "ok"
    await p.aclose()


async def test_client_errors_are_not_retryable(server: FakeOpenAIServer) -> None:
    p = OpenAIProvider("not-served", base_url=server.base_url)
    with pytest.raises(InfraError) as info:
        await p.generate(MESSAGES, TOOLS, None, CFG)
    assert info.value.retryable is False and "404" in str(info.value)
    await p.aclose()
    with FakeOpenAIServer(api_key="right") as locked:
        p = OpenAIProvider("fake-model", base_url=locked.base_url, api_key="wrong")
        with pytest.raises(InfraError) as info:
            await p.generate(MESSAGES, TOOLS, None, CFG)
        assert info.value.retryable is False and "401" in str(info.value)
        await p.aclose()


async def test_unreachable_server_is_retryable() -> None:
    with FakeOpenAIServer() as srv:
        url = srv.base_url
    p = OpenAIProvider("fake-model", base_url=url, timeout=2)
    with pytest.raises(InfraError) as info:
        await p.generate(MESSAGES, TOOLS, None, CFG)
    assert info.value.retryable is True and "connection failed" in str(info.value)


async def test_random_faults_at_a_rate() -> None:
    with FakeOpenAIServer(fault_rate=0.5, faults=("http503", "rate_limit", "drop"), seed=7) as srv:
        p = provider(srv)
        ok = failed = 0
        for _ in range(40):
            try:
                await p.generate(MESSAGES, TOOLS, None, CFG)
                ok += 1
            except InfraError as exc:
                assert exc.retryable
                failed += 1
        await p.aclose()
        assert ok + failed == 40 and 8 <= failed <= 32
        assert srv.counts["reply"] == ok and sum(srv.counts[k] for k in ("http503", "rate_limit", "drop")) == failed


def test_parse_retry_after() -> None:
    assert parse_retry_after({"retry-after": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "1500"}) == 1.5
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None
    when = parse_retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"})
    assert when == 0.0  # in the past


# ------------------------------------------------------------------ check()


async def test_check_passes_for_a_served_model(server: FakeOpenAIServer) -> None:
    p = provider(server)
    await p.check()
    await p.aclose()


async def test_check_unknown_model_lists_the_served_ones(server: FakeOpenAIServer) -> None:
    server.models.append("other-model")
    p = OpenAIProvider("gpt-nope", base_url=server.base_url)
    with pytest.raises(ProviderError, match=r"model 'gpt-nope' not served at .*available: fake-model, other-model"):
        await p.check()
    await p.aclose()


async def test_check_bad_key() -> None:
    with FakeOpenAIServer(api_key="sk-right") as srv:
        p = OpenAIProvider("fake-model", base_url=srv.base_url, api_key="sk-wrong")
        with pytest.raises(ProviderError, match="bad API key") as info:
            await p.check()
        assert "sk-wrong" not in str(info.value)
        await p.aclose()
        good = OpenAIProvider("fake-model", base_url=srv.base_url, api_key="sk-right")
        await good.check()
        await good.aclose()


async def test_check_unreachable() -> None:
    with FakeOpenAIServer() as srv:
        url = srv.base_url
    p = OpenAIProvider("fake-model", base_url=url)
    with pytest.raises(ProviderError, match=f"server at {url} unreachable"):
        await p.check()


async def test_check_every_base_url() -> None:
    with FakeOpenAIServer() as a, FakeOpenAIServer(models=("another",)) as b:
        p = OpenAIProvider("fake-model", base_urls=[a.base_url, b.base_url])
        with pytest.raises(ProviderError, match=f"not served at {b.base_url}"):
            await p.check()
        await p.aclose()


# ------------------------------------------------------------------ configuration


async def test_several_base_urls_share_the_load() -> None:
    with FakeOpenAIServer() as a, FakeOpenAIServer() as b, FakeOpenAIServer() as c:
        p = OpenAIProvider("fake-model", base_url=f"{a.base_url},{b.base_url}", base_urls=[c.base_url])
        assert p.base_urls == (a.base_url, b.base_url, c.base_url)
        await asyncio.gather(*(p.generate(MESSAGES, TOOLS, None, CFG) for _ in range(9)))
        await p.aclose()
        assert [len(s.requests) for s in (a, b, c)] == [3, 3, 3]
        assert p.settings()["base_urls"] == [a.base_url, b.base_url, c.base_url]
        assert p.base_url == ",".join(p.base_urls)


def test_settings_never_hold_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-secret")
    p = OpenAIProvider("gpt-4o-mini", base_url="http://127.0.0.1:1/v1", api_key="sk-option-secret", timeout=9)
    text = json.dumps(p.settings()) + repr(p)
    assert "secret" not in text
    assert p.settings() == {"spec": "openai:gpt-4o-mini", "model": "gpt-4o-mini", "base_urls": ["http://127.0.0.1:1/v1"]}
    p2 = OpenAIProvider("gpt-4o-mini", base_url="http://127.0.0.1:1/v1")
    assert "secret" not in json.dumps(p2.settings()) and p2.settings() == OpenAIProvider(
        "gpt-4o-mini", base_url="http://127.0.0.1:1/v1", timeout=1).settings()


async def test_key_from_env_is_sent(server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    p = make_provider("openai:fake-model")
    assert p.base_url == server.base_url
    await p.generate(MESSAGES, TOOLS, None, CFG)
    await p.aclose()
    assert server.headers[-1]["authorization"] == "Bearer sk-from-env"


async def test_placeholder_key_for_local_servers(server: FakeOpenAIServer) -> None:
    await generate(provider(server))
    assert server.headers[-1]["authorization"] == f"Bearer {PLACEHOLDER_KEY}"


def test_configuration_errors() -> None:
    with pytest.raises(ProviderError, match="no API key"):
        OpenAIProvider("gpt-4o-mini")
    with pytest.raises(ProviderError, match="no model name"):
        OpenAIProvider("", base_url="http://127.0.0.1:1/v1")
    with pytest.raises(ProviderError, match="not an http"):
        OpenAIProvider("m", base_url="localhost:8000")
    with pytest.raises(ProviderError, match="unknown option"):
        OpenAIProvider("m", base_url="http://127.0.0.1:1/v1", temprature=1)


# ------------------------------------------------------------------ llama_cpp.server with the embedded model


# (llama_server: the session's one server, tests/conftest.py)


@pytest.mark.slow
async def test_llama_cpp_server_calls_come_back_as_text_and_are_recovered(llama_server: LlamaCppServer) -> None:
    p = OpenAIProvider(llama_server.model, base_url=llama_server.base_url, timeout=300)
    await p.check()
    out = await p.generate(MESSAGES, TOOLS, "auto", GenerateConfig(max_tokens=96))
    await p.aclose()
    assert out.recovered is True, out
    assert len(out.tool_calls) >= 1
    call = out.tool_calls[0]
    assert call.name == "set_temperature" and call.parse_error is None
    assert call.arguments == {"zone": "bedroom", "celsius": 21}
    assert out.usage.prompt_tokens > 50


@pytest.mark.slow
async def test_llama_cpp_server_check(llama_server: LlamaCppServer) -> None:
    p = OpenAIProvider("no-such-model", base_url=llama_server.base_url)
    with pytest.raises(ProviderError, match=f"available: {llama_server.model}"):
        await p.check()
    await p.aclose()


async def test_tool_call_arguments_are_sent_as_json_strings(server: FakeOpenAIServer) -> None:
    history = [*MESSAGES,
               {"role": "assistant", "content": None, "tool_calls": [
                   {"id": "c0", "type": "function",
                    "function": {"name": "set_temperature", "arguments": {"zone": "bedroom", "celsius": 21}}}]},
               {"role": "tool", "tool_call_id": "c0", "content": "{\"ok\": true}"}]
    p = provider(server)
    await p.generate(history, TOOLS, None, CFG)
    await p.aclose()
    sent = server.requests[-1]["messages"][2]["tool_calls"][0]["function"]["arguments"]
    assert json.loads(sent) == {"zone": "bedroom", "celsius": 21}
    assert isinstance(history[2]["tool_calls"][0]["function"]["arguments"], dict)  # the caller's copy is untouched
