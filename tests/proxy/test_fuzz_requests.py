"""Fuzzing the proxy's request bodies (issue 24, the fuzz test): whatever a client sends to
``/v1/chat/completions`` or ``/v1/responses``, the proxy answers a 2xx or a 4xx whose error says what
is wrong: never a 500, a traceback or a hang. The ASGI app is called in process (no socket: each
example costs a few milliseconds) in front of a real loopback upstream that always answers.
Derandomised, so a failure is reproducible; the example count is kept small for speed."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

hypothesis = pytest.importorskip("hypothesis", reason="the fuzz tests need hypothesis (pip install 'toolbias[dev]')")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests.support.agents import MODEL  # noqa: E402
from tests.support.servers import FakeOpenAIServer, Reply  # noqa: E402
from toolbias.proxy import ProxyConfig, build_app  # noqa: E402
from toolbias.proxy.app import ProxyApp  # noqa: E402

TOOL = {"type": "function", "function": {"name": "set_light", "description": "Switch a light.", "parameters": {
    "type": "object", "properties": {"room": {"type": "string", "enum": ["kitchen", "hall"]},
                                     "on": {"type": "boolean"}}, "required": ["room", "on"]}}}

scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20), st.floats(allow_nan=True),
                    st.text(max_size=12))
json_values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                            st.dictionaries(st.text(max_size=8), inner, max_size=3)),
                           max_leaves=8)
roles = st.sampled_from(["user", "assistant", "tool", "system", "developer", "function", "", None])
call = st.fixed_dictionaries({"id": st.one_of(st.just("c1"), json_values), "type": st.just("function"),
                              "function": st.one_of(st.fixed_dictionaries({
                                  "name": st.one_of(st.just("set_light"), json_values),
                                  "arguments": st.one_of(st.just('{"room": "hall", "on": true}'), json_values)}),
                                  json_values)})
message = st.one_of(
    st.fixed_dictionaries({"role": roles, "content": st.one_of(st.text(max_size=20), json_values)},
                          optional={"tool_calls": st.lists(call, max_size=2), "tool_call_id": json_values}),
    json_values)
tools = st.one_of(st.just([TOOL]), st.lists(st.one_of(st.just(TOOL), json_values), max_size=2), json_values)
FIELDS = {"model": st.one_of(st.just(MODEL), json_values), "messages": st.one_of(
              st.lists(message, min_size=1, max_size=4), json_values),
          "tools": tools, "tool_choice": st.one_of(st.sampled_from(["auto", "none", "required"]), json_values,
                                                   st.just({"type": "function", "function": {"name": "set_light"}})),
          "stream": st.one_of(st.booleans(), json_values), "temperature": json_values, "top_p": json_values,
          "max_tokens": json_values, "n": json_values, "seed": json_values, "stop": json_values,
          "stream_options": json_values, "logprobs": json_values, "parallel_tool_calls": json_values,
          "response_format": json_values, "user": json_values}
chat_bodies = st.one_of(st.fixed_dictionaries({}, optional=FIELDS), json_values)
RESPONSES = {"model": FIELDS["model"], "input": st.one_of(st.text(max_size=10), st.lists(st.one_of(
                 st.fixed_dictionaries({"type": st.sampled_from(["message", "function_call", "function_call_output",
                                                                 "reasoning", "web_search_call"]),
                                        "role": roles, "content": json_values, "call_id": json_values,
                                        "name": json_values, "arguments": json_values, "output": json_values}),
                 json_values), max_size=3), json_values),
             "instructions": json_values, "tools": tools, "reasoning": json_values, "text": json_values,
             "stream": st.one_of(st.booleans(), json_values), "max_output_tokens": json_values,
             "previous_response_id": json_values, "truncation": json_values}
responses_bodies = st.one_of(st.fixed_dictionaries({}, optional=RESPONSES), json_values)


def _encode(body: Any) -> bytes:
    return json.dumps(body, allow_nan=True).encode()


async def _call(app: ProxyApp, path: str, data: bytes) -> tuple[int, bytes]:
    sent: list[dict[str, Any]] = []
    parts = [{"type": "http.request", "body": data, "more_body": False}]

    async def receive() -> dict[str, Any]:
        if parts:
            return parts.pop(0)
        await asyncio.sleep(3600)  # no disconnect: the client waits for its answer
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        sent.append(dict(message))

    scope = {"type": "http", "method": "POST", "path": path, "headers": [(b"content-type", b"application/json")]}
    await asyncio.wait_for(app(scope, receive, send), timeout=60)  # a hang fails the example
    start = next(m for m in sent if m["type"] == "http.response.start")
    return int(start["status"]), b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[ProxyApp, asyncio.AbstractEventLoop]]:
    with FakeOpenAIServer(models=(MODEL,), default=Reply.calls(("set_light", {"room": "hall", "on": True}))) as up:
        app = build_app(ProxyConfig(upstream=(up.base_url,), variant="native", retries=1, max_rounds=2))
        loop = asyncio.new_event_loop()
        try:
            yield app, loop
        finally:
            loop.run_until_complete(app.proxy.aclose())
            loop.close()


def _check(status: int, body: bytes) -> None:
    assert status != 500 and (200 <= status < 300 or 400 <= status < 500), (status, body[:500])
    assert b"Traceback" not in body
    if status >= 400:
        err = json.loads(body)["error"]
        assert isinstance(err["message"], str) and len(err["message"]) > 10, err


FUZZ = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@FUZZ
@given(body=chat_bodies)
def test_any_chat_body_is_answered_or_refused_clearly(served: tuple[ProxyApp, asyncio.AbstractEventLoop],
                                                      body: Any) -> None:
    app, loop = served
    _check(*loop.run_until_complete(_call(app, "/v1/chat/completions", _encode(body))))


@FUZZ
@given(body=responses_bodies)
def test_any_responses_body_is_answered_or_refused_clearly(served: tuple[ProxyApp, asyncio.AbstractEventLoop],
                                                           body: Any) -> None:
    app, loop = served
    _check(*loop.run_until_complete(_call(app, "/v1/responses", _encode(body))))


@pytest.mark.parametrize("raw", [b"", b"{", b"[1, 2]", b'"text"', b"\xff\xfe", b"NaN", b'{"a": 1e999}',
                                 b"[" * 100_000 + b"]" * 100_000])
def test_raw_bytes_that_are_not_a_request(served: tuple[ProxyApp, asyncio.AbstractEventLoop], raw: bytes) -> None:
    app, loop = served
    for path in ("/v1/chat/completions", "/v1/responses"):
        status, body = loop.run_until_complete(_call(app, path, raw))
        assert status == 400, body[:300]
        _check(status, body)


def test_a_well_formed_body_is_served_in_process(served: tuple[ProxyApp, asyncio.AbstractEventLoop]) -> None:
    """The in-process call serves what it should (so the fuzz's 2xx answers are real answers)."""
    app, loop = served
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hall light on"}], "tools": [TOOL]}
    status, raw = loop.run_until_complete(_call(app, "/v1/chat/completions", _encode(body)))
    assert status == 200, raw[:300]
    calls = json.loads(raw)["choices"][0]["message"]["tool_calls"]
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == \
        [("set_light", {"room": "hall", "on": True})]
