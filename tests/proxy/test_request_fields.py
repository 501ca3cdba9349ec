"""What a client's request fields do through the proxy (issue 24, item 11): every field reaches the
upstream, or the request is refused with a 400 that names it; nothing is dropped or misread
without a word. Today ``stop``, ``response_format``, penalties, ``user``, ``reasoning_effort`` ... are
dropped from requests with tools, ``"stream": "false"`` streams, ``max_tokens: -5`` and
``temperature: NaN`` are served, a ``tool_choice`` naming an unknown tool is served, ``/v1/models``
answers a made-up model when the upstream is down, and anyone may use the proxy (no client key)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from toolbias.proxy import ProxyConfig, ProxyServer, exposure_warning

pytest.importorskip("uvicorn", reason="toolbias proxy needs uvicorn (pip install 'toolbias[proxy]')")

from tests.support.agents import MODEL, proxy_server  # noqa: E402
from tests.support.servers import FakeOpenAIServer, Reply, free_port  # noqa: E402

TOOLS: list[dict[str, Any]] = [{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city.",
                                            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                           "required": ["city"]}}},
         {"type": "function", "function": {"name": "get_time", "description": "Time in a city.",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                          "required": ["city"]}}}]
MESSAGES = [{"role": "user", "content": "weather in Paris?"}]

#: fields the upstream must see as the client sent them
FORWARDED = {"stop": ["\n\nUser:"], "response_format": {"type": "json_object"}, "parallel_tool_calls": False,
             "presence_penalty": 0.5, "frequency_penalty": -0.25, "logit_bias": {"50256": -100}, "user": "u-42",
             "reasoning_effort": "low", "top_k": 20, "metadata": {"run": "a"}}


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(models=(MODEL,)) as srv:
        yield srv


@pytest.fixture(scope="module")
def proxy(upstream: FakeOpenAIServer) -> Iterator[ProxyServer]:
    with proxy_server(upstream, "fully_merged") as server:
        yield server


def _post(proxy: ProxyServer, body: dict[str, Any] | bytes, path: str = "chat/completions") -> httpx.Response:
    if isinstance(body, bytes):
        return httpx.post(f"{proxy.base_url}/{path}", content=body, headers={"content-type": "application/json"},
                          timeout=30)
    return httpx.post(f"{proxy.base_url}/{path}", json=body, timeout=30)


@pytest.mark.parametrize("with_tools", [True, False])
def test_the_upstream_sees_every_field_it_should(proxy: ProxyServer, upstream: FakeOpenAIServer,
                                                 with_tools: bool) -> None:
    upstream.queue(Reply.text("sunny"))
    body: dict[str, Any] = {"model": MODEL, "messages": MESSAGES, **FORWARDED}
    if with_tools:
        body["tools"] = TOOLS
    r = _post(proxy, body)
    assert r.status_code == 200, r.text
    seen = upstream.requests[-1]
    assert {k: seen.get(k) for k in FORWARDED} == FORWARDED


@pytest.mark.parametrize(("field", "value"), [("logprobs", True), ("top_logprobs", 3), ("n", 2),
                                              ("functions", [{"name": "f", "parameters": {}}])])
def test_what_the_proxy_cannot_honour_is_a_400_naming_it(proxy: ProxyServer, upstream: FakeOpenAIServer,
                                                         field: str, value: Any) -> None:
    before = len(upstream.requests)
    r = _post(proxy, {"model": MODEL, "messages": MESSAGES, "tools": TOOLS, field: value})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == field and field in err["message"]
    assert len(upstream.requests) == before  # refused before any upstream request


def test_legacy_functions_never_pass_through_without_the_variant(proxy: ProxyServer,
                                                                 upstream: FakeOpenAIServer) -> None:
    before = len(upstream.requests)
    r = _post(proxy, {"model": MODEL, "messages": MESSAGES, "functions": [TOOLS[0]["function"]]})
    assert r.status_code == 400 and r.json()["error"]["param"] == "functions"
    assert len(upstream.requests) == before


BAD = [
    ("stream", b'"false"', "true or false"),
    ("max_tokens", b"-5", "at least 1"),
    ("max_completion_tokens", b"0", "at least 1"),
    ("max_tokens", b"12.5", "integer"),
    ("temperature", b"NaN", "finite number"),
    ("temperature", b'"0.5"', "finite number"),
    ("temperature", b"7", "between 0 and 2"),
    ("top_p", b"Infinity", "finite number"),
    ("seed", b"true", "integer"),
    ("presence_penalty", b"3", "between -2 and 2"),
    ("parallel_tool_calls", b'"no"', "true or false"),
    ("tool_choice", b'{"type": "function", "function": {"name": "get_stock"}}', "not among the request's tools"),
    ("tool_choice", b'"sometimes"', "must be 'auto'"),
]


@pytest.mark.parametrize("with_tools", [True, False])
@pytest.mark.parametrize(("field", "raw", "says"), BAD)
def test_malformed_fields_are_a_400_that_says_which(proxy: ProxyServer, upstream: FakeOpenAIServer, field: str,
                                                    raw: bytes, says: str, with_tools: bool) -> None:
    if field == "tool_choice" and not with_tools and b"get_stock" in raw:
        pytest.skip("a named tool_choice without tools is the upstream's to judge")
    base = {"model": MODEL, "messages": MESSAGES, **({"tools": TOOLS} if with_tools else {})}
    body = json.dumps(base)[:-1].encode() + b', "' + field.encode() + b'": ' + raw + b"}"
    before = len(upstream.requests)
    r = _post(proxy, body)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == field and says in err["message"], err
    assert len(upstream.requests) == before


def test_a_named_tool_choice_of_a_known_tool_is_served(proxy: ProxyServer, upstream: FakeOpenAIServer) -> None:
    upstream.queue(Reply.text("ok"))
    r = _post(proxy, {"model": MODEL, "messages": MESSAGES, "tools": TOOLS,
                      "tool_choice": {"type": "function", "function": {"name": "get_time"}}})
    assert r.status_code == 200, r.text
    assert upstream.requests[-1]["tool_choice"] == "required"


def test_responses_fields_are_mapped_or_refused(proxy: ProxyServer, upstream: FakeOpenAIServer) -> None:
    upstream.queue(Reply.text("sunny"))
    tools = [{"type": "function", **t["function"]} for t in TOOLS]
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
    r = _post(proxy, {"model": MODEL, "input": "weather?", "tools": tools, "user": "u-1",
                      "reasoning": {"effort": "high"}, "store": False,
                      "text": {"format": {"type": "json_schema", "name": "a", "schema": schema}},
                      "tool_choice": {"type": "function", "name": "get_weather"}}, "responses")
    assert r.status_code == 200, r.text
    seen = upstream.requests[-1]
    assert seen["user"] == "u-1" and seen["reasoning_effort"] == "high"
    assert seen["response_format"] == {"type": "json_schema", "json_schema": {"name": "a", "schema": schema}}
    for field, value in (("conversation", "conv_1"), ("truncation", "auto"), ("reasoning", {"summary": "auto"})):
        r = _post(proxy, {"model": MODEL, "input": "weather?", "tools": tools, field: value}, "responses")
        assert r.status_code == 400 and r.json()["error"]["param"] == field, r.text
    r = _post(proxy, {"model": MODEL, "input": "weather?", "tools": tools,
                      "tool_choice": {"type": "function", "name": "nope"}}, "responses")
    assert r.status_code == 400 and r.json()["error"]["param"] == "tool_choice"


def test_models_is_an_error_when_the_upstream_is_down() -> None:
    dead = f"http://127.0.0.1:{free_port()}/v1"
    with ProxyServer(ProxyConfig(upstream=(dead,), variant="native", model="my-model")) as server:
        r = httpx.get(f"{server.base_url}/models", timeout=30)
    assert r.status_code == 502, r.text
    assert r.json()["error"]["type"] == "upstream_error" and "my-model" not in r.text


def test_models_lists_the_upstreams(proxy: ProxyServer) -> None:
    r = httpx.get(f"{proxy.base_url}/models", timeout=30)
    assert r.status_code == 200 and [m["id"] for m in r.json()["data"]] == [MODEL]


def test_a_client_key_guards_every_route_but_health(upstream: FakeOpenAIServer) -> None:
    upstream.queue(Reply.text("hi"))
    body = {"model": MODEL, "messages": MESSAGES}
    with proxy_server(upstream, "native", client_key="sesame") as server:
        for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": "sesame"}):
            r = httpx.post(f"{server.base_url}/chat/completions", json=body, headers=headers, timeout=30)
            assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key", r.text
            assert "sesame" not in r.text
            assert httpx.get(f"{server.base_url}/models", headers=headers, timeout=30).status_code == 401
        assert httpx.get(f"{server.base_url}/health", timeout=30).status_code == 200
        r = httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=30,
                       headers={"authorization": "Bearer sesame"})
        assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "hi"


@pytest.mark.parametrize(("host", "key", "warned"), [
    ("0.0.0.0", None, True), ("192.168.1.7", None, True), ("::", None, True), ("myhost.lan", None, True),
    ("0.0.0.0", "k", False), ("127.0.0.1", None, False), ("::1", None, False), ("localhost", None, False)])
def test_listening_beyond_loopback_without_a_key_is_warned(host: str, key: str | None, warned: bool) -> None:
    text = exposure_warning(host, key)
    assert (text is not None) == warned
    if text:
        assert "--proxy-key" in text and host in text
