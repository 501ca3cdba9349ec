"""The OpenAI Responses and Anthropic messages providers against loopback servers speaking each wire
format: requests in the API's own form (tools, tool results, tool choice), answers parsed, retries,
cache and concurrency through the wrapper, and whole studies through ``toolbias run``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.api_servers import FakeAPIServer, messages_answer, responses_answer
from tests.support.cli import run_cli
from toolbias.catalog.loaders import load_catalog
from toolbias.errors import ProviderError
from toolbias.providers import make_provider
from toolbias.providers.anthropic import AnthropicProvider
from toolbias.providers.base import GenerateConfig, InfraError
from toolbias.providers.responses import OpenAIResponsesProvider
from toolbias.providers.wrapper import ProviderWrapper, ResponseCache, RetryPolicy

SCHEMA = {"type": "object", "properties": {"zone": {"type": "string", "enum": ["bedroom", "kitchen"]},
                                           "celsius": {"type": "number"}}, "required": ["zone", "celsius"]}
TOOLS = [{"type": "function", "function": {"name": "set_temperature", "description": "Set a zone's temperature.",
                                           "parameters": SCHEMA}}]
HISTORY = [{"role": "system", "content": "Use only the provided tools."},
           {"role": "user", "content": "Bedroom to 21 and kitchen to 19."},
           {"role": "assistant", "content": "On it.", "tool_calls": [
               {"id": "call_a", "type": "function",
                "function": {"name": "set_temperature", "arguments": '{"zone": "bedroom", "celsius": 21}'}},
               {"id": "call_b", "type": "function",
                "function": {"name": "set_temperature", "arguments": {"zone": "kitchen", "celsius": 19}}}]},
           {"role": "tool", "tool_call_id": "call_a", "content": "ok"},
           {"role": "tool", "tool_call_id": "call_b", "content": "ok"}]
CFG = GenerateConfig(temperature=0.0, max_tokens=64)


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(var, raising=False)


# --------------------------------------------------------------------------- OpenAI Responses API

async def test_responses_request_and_answer_in_the_wire_format() -> None:
    answer = responses_answer("Done.", [("set_temperature", {"zone": "bedroom", "celsius": 21})])
    with FakeAPIServer(lambda path, body: answer, api_key="sk-test") as srv:
        p = make_provider("openai-responses:fake-model", base_url=srv.base_url, api_key="sk-test",
                          extra_body={"reasoning": {"effort": "low"}})
        try:
            out = await p.generate(HISTORY, TOOLS, "required", CFG)
        finally:
            await p.aclose()
    path, body = srv.requests[0]
    assert path == "/v1/responses" and srv.headers[0]["authorization"] == "Bearer sk-test"
    assert body["tools"] == [{"type": "function", "name": "set_temperature", "description": "Set a zone's temperature.",
                              "parameters": SCHEMA}]
    assert body["tool_choice"] == "required" and body["max_output_tokens"] == 64 and body["store"] is False
    assert body["reasoning"] == {"effort": "low"} and "seed" not in body and "messages" not in body
    assert body["input"] == [
        {"role": "system", "content": "Use only the provided tools."},
        {"role": "user", "content": "Bedroom to 21 and kitchen to 19."},
        {"role": "assistant", "content": "On it."},
        {"type": "function_call", "call_id": "call_a", "name": "set_temperature",
         "arguments": '{"zone": "bedroom", "celsius": 21}'},
        {"type": "function_call", "call_id": "call_b", "name": "set_temperature",
         "arguments": '{"zone": "kitchen", "celsius": 19}'},
        {"type": "function_call_output", "call_id": "call_a", "output": "ok"},
        {"type": "function_call_output", "call_id": "call_b", "output": "ok"}]
    assert out.content == "Done." and [(c.id, c.name, c.arguments) for c in out.tool_calls] == [
        ("call_0", "set_temperature", {"zone": "bedroom", "celsius": 21})]
    assert (out.usage.prompt_tokens, out.usage.completion_tokens, out.usage.cached_prompt_tokens) == (40, 7, 8)
    assert p.settings()["spec"] == "openai-responses:fake-model" and p.settings()["extra_body"]


async def test_responses_failed_status_and_bad_arguments() -> None:
    replies = iter([{"status": "failed", "error": {"message": "server overloaded"}, "output": []},
                    responses_answer(None, [("set_temperature", '{"zone": ')])])
    with FakeAPIServer(lambda path, body: next(replies)) as srv:
        p = OpenAIResponsesProvider("fake-model", base_url=srv.base_url)
        try:
            with pytest.raises(InfraError, match="server overloaded") as info:
                await p.generate(HISTORY[:2], TOOLS, None, CFG)
            assert info.value.retryable
            out = await p.generate(HISTORY[:2], TOOLS, None, CFG)
        finally:
            await p.aclose()
    assert out.tool_calls[0].parse_error and out.tool_calls[0].arguments is None


# --------------------------------------------------------------------------- Anthropic messages API

async def test_anthropic_request_and_answer_in_the_wire_format() -> None:
    answer = messages_answer("Setting it.", [("set_temperature", {"zone": "kitchen", "celsius": 19})])
    with FakeAPIServer(lambda path, body: answer, api_key="ak-test") as srv:
        p = make_provider("anthropic:fake-model", base_url=srv.base_url, api_key="ak-test")
        try:
            await p.check()  # /v1/models lists the model
            out = await p.generate(HISTORY, TOOLS, "required", CFG)
        finally:
            await p.aclose()
    path, body = srv.requests[0]
    headers = srv.headers[0]
    assert path == "/v1/messages" and headers["x-api-key"] == "ak-test" and headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in headers
    assert body["tools"] == [{"name": "set_temperature", "description": "Set a zone's temperature.",
                              "input_schema": SCHEMA}]
    assert body["tool_choice"] == {"type": "any"} and body["max_tokens"] == 64
    assert body["system"] == "Use only the provided tools."
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Bedroom to 21 and kitchen to 19."}]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "On it."},
            {"type": "tool_use", "id": "call_a", "name": "set_temperature", "input": {"zone": "bedroom", "celsius": 21}},
            {"type": "tool_use", "id": "call_b", "name": "set_temperature", "input": {"zone": "kitchen", "celsius": 19}}]},
        {"role": "user", "content": [  # both results in one user turn, as the API requires
            {"type": "tool_result", "tool_use_id": "call_a", "content": "ok"},
            {"type": "tool_result", "tool_use_id": "call_b", "content": "ok"}]}]
    assert out.content == "Setting it."
    assert [(c.id, c.name, c.arguments) for c in out.tool_calls] == [
        ("toolu_0", "set_temperature", {"zone": "kitchen", "celsius": 19})]
    assert (out.usage.prompt_tokens, out.usage.cached_prompt_tokens) == (40, 10)


@pytest.mark.parametrize("choice,wire", [("auto", {"type": "auto"}), ("none", {"type": "none"}), (None, None)])
async def test_anthropic_tool_choice(choice: str | None, wire: dict[str, str] | None) -> None:
    with FakeAPIServer(lambda path, body: messages_answer("ok")) as srv:
        p = AnthropicProvider("fake-model", base_url=srv.base_url)
        try:
            await p.generate(HISTORY[:2], TOOLS, choice, CFG)
        finally:
            await p.aclose()
    assert srv.requests[0][1].get("tool_choice") == wire


async def test_anthropic_key_model_and_base_url_refusals(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ProviderError, match="no API key"):
        make_provider("anthropic:claude-x")  # api.anthropic.com without ANTHROPIC_API_KEY
    with pytest.raises(ProviderError, match="no model name"):
        make_provider("anthropic:")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    assert AnthropicProvider("m").base_urls == ("http://127.0.0.1:9/v1",)  # the SDK's variable names the host
    with FakeAPIServer(lambda path, body: messages_answer("ok"), models=("other",)) as srv:
        p = AnthropicProvider("fake-model", base_url=srv.base_url)
        try:
            with pytest.raises(ProviderError, match="not served") as info:
                await p.check()
            assert info.value.fix and "anthropic:other" in info.value.fix
        finally:
            await p.aclose()
    with FakeAPIServer(lambda path, body: messages_answer("ok"), api_key="right") as srv:
        p = AnthropicProvider("fake-model", base_url=srv.base_url, api_key="wrong")
        try:
            with pytest.raises(ProviderError, match="bad API key") as info:
                await p.check()
            assert "ANTHROPIC_API_KEY" in (info.value.fix or "")
        finally:
            await p.aclose()


# --------------------------------------------------------------------------- through the wrapper

@pytest.mark.parametrize("kind,answer", [("anthropic", messages_answer), ("openai-responses", responses_answer)])
async def test_retry_and_cache_through_the_wrapper(tmp_path: Path, kind: str, answer: Any) -> None:
    with FakeAPIServer(lambda path, body: answer("fine")) as srv:
        srv.fail(529)  # Anthropic's "overloaded"
        srv.fail(429)
        cache = ResponseCache(tmp_path / "cache.db")
        wrapped = ProviderWrapper(make_provider(f"{kind}:fake-model", base_url=srv.base_url), concurrency=2,
                                  retry=RetryPolicy(attempts=4, initial_wait=0.0, max_wait=0.0), cache=cache)
        try:
            first = await wrapped.generate(HISTORY[:2], TOOLS, None, CFG)
            again = await wrapped.generate(HISTORY[:2], TOOLS, None, CFG)
        finally:
            await wrapped.aclose()
            cache.close()
    assert first.content == "fine" and again.content == "fine"
    assert len(srv.requests) == 3  # two failures retried, then the cache answers the repeat
    assert (wrapped.stats.retries, wrapped.stats.cache_hits) == (2, 1)


async def test_a_client_error_is_not_retried() -> None:
    with FakeAPIServer(lambda path, body: messages_answer("x")) as srv:
        srv.fail(400)
        wrapped = ProviderWrapper(AnthropicProvider("fake-model", base_url=srv.base_url),
                                  retry=RetryPolicy(attempts=4, initial_wait=0.0, max_wait=0.0))
        try:
            with pytest.raises(InfraError, match="HTTP 400: injected HTTP 400") as info:
                await wrapped.generate(HISTORY[:2], TOOLS, None, CFG)
        finally:
            await wrapped.aclose()
    assert not info.value.retryable and len(srv.requests) == 1


# --------------------------------------------------------------------------- whole studies: toolbias run

def _gold_player(api: str) -> Any:
    """Answers each task's first turn with its gold calls (native names) and then a text reply."""
    gold = {t.query: t.gold for t in load_catalog("builtin").tasks}

    def respond(path: str, body: dict[str, Any]) -> dict[str, Any]:
        if api == "anthropic":
            last = body["messages"][-1]["content"]
            if any(b.get("type") == "tool_result" for b in last):
                return messages_answer("Done.")
            query = body["messages"][0]["content"][0]["text"]
            return messages_answer(None, [(a.tool, dict(a.arguments)) for a in gold[query]])
        items = body["input"]
        if items[-1].get("type") == "function_call_output":
            return responses_answer("Done.")
        query = next(i["content"] for i in items if i.get("role") == "user")
        return responses_answer(None, [(a.tool, dict(a.arguments)) for a in gold[query]])

    return respond




@pytest.mark.parametrize("kind", ["anthropic", "openai-responses"])
def test_run_plays_a_study_through_each_api(capsys: pytest.CaptureFixture[str], tmp_path: Path, kind: str) -> None:
    store = tmp_path / "s.db"
    with FakeAPIServer(_gold_player("anthropic" if kind == "anthropic" else "responses")) as srv:
        code, out, err = run_cli(capsys, "run", "--model", f"{kind}:fake-model", "--base-url", srv.base_url,
                              "--variants", "native", "--tasks", "3", "--store", str(store),
                              "--extra-body", '{"chat_template_kwargs": {"enable_thinking": false}}')
        assert code == 0, err
        bodies = [b for _, b in srv.requests]
    assert bodies and all(b["chat_template_kwargs"] == {"enable_thinking": False} for b in bodies)
    code, _, err = run_cli(capsys, "export", "--store", str(store), "-o", str(tmp_path / "e.jsonl"))
    assert code == 0, err
    rows = [json.loads(line) for line in (tmp_path / "e.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and all(r["success"] for r in rows), rows[0]


@pytest.mark.parametrize("text,needle", [
    ("{bad", "not valid JSON"), ("[1]", "must be a JSON object"), ('{"a": 1}', "sends no request body")])
def test_extra_body_refusals(capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, needle: str) -> None:
    model = "oracle" if needle == "sends no request body" else "openai:m"
    code, _, err = run_cli(capsys, "run", "--model", model, "--variants", "native", "--tasks", "1",
                        "--store", str(tmp_path / "s.db"), "--extra-body", text)
    assert code != 0 and needle in err and "fix:" in err
