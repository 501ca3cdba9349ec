"""toolbias proxy over loopback HTTP: a real uvicorn server in front of a real (scripted)
OpenAI-compatible upstream, driven by an agent loop over httpx.

The scripted upstream plays a task's gold actions encoded into the variant (as the oracle
does), one call per request or all at once; the agent must see exactly the gold, as
native calls, under every registered variant."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from toolbias.catalog import load_catalog
from toolbias.catalog.model import Catalog, NativeAction, Task
from toolbias.proxy import ProxyConfig, ProxyServer, VariantProxy
from toolbias.proxy.codecs import CodecSource
from toolbias.variants import registry, resolve_variant

pytest.importorskip("uvicorn", reason="toolbias proxy needs uvicorn (pip install 'toolbias[proxy]')")

from tests.support.agents import MODEL, OracleUpstream, native_tools, proxy_server, run_agent  # noqa: E402
from tests.support.servers import FakeOpenAIServer, Reply, free_port  # noqa: E402


def _task(catalog: Catalog, min_gold: int = 2) -> Task:
    return next(t for t in catalog.tasks if len(t.gold) >= min_gold)


@pytest.fixture(scope="module")
def builtin() -> Catalog:
    return load_catalog("builtin")


@pytest.fixture
def upstream() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(models=(MODEL,)) as srv:
        yield srv


_proxy = proxy_server


# ----------------------------------------------------------------------------- variants


REPRESENTATIVE = [name for name, spec in registry().items() if "representative" in spec.tags]


@pytest.mark.parametrize("variant", REPRESENTATIVE)
@pytest.mark.parametrize("per_round", [1, 99])
def test_agent_sees_exactly_the_native_gold(builtin: Catalog, upstream: FakeOpenAIServer, variant: str,
                                            per_round: int) -> None:
    task = _task(builtin, 2)
    tools = native_tools(builtin, task.domain)
    codec = CodecSource(resolve_variant(variant)).for_tools(tools).codec
    upstream.responder = OracleUpstream(codec, task.gold, per_round)
    with _proxy(upstream, variant) as proxy:
        executed, _, answer = run_agent(proxy.base_url, tools, task.query)
    assert executed == [(a.tool, dict(a.arguments)) for a in task.gold]
    assert answer == "All done."
    # the upstream only ever saw the variant's tools
    seen = {t["function"]["name"] for t in upstream.requests[0]["tools"]}
    assert seen == {t["function"]["name"] for t in codec.schema("live")}
    n_calls = len(upstream.responder.calls)
    protocol = n_calls - len(task.gold)
    if per_round == 1:  # one upstream request per variant call, plus the answer
        assert len(upstream.requests) == n_calls + 1
    if protocol and per_round == 1:  # protocol calls never reached the agent: fewer agent turns than rounds
        assert len(upstream.requests) > len(task.gold) + 1


async def test_every_registered_variant_plays_the_gold_exactly(builtin: Catalog,
                                                               upstream: FakeOpenAIServer) -> None:
    """Every registered variant, built on the request's own tools and on --catalog builtin
    (the request handling without the HTTP server, which the tests above cover)."""
    task = _task(builtin, 2)
    tools = native_tools(builtin, task.domain)
    for name in registry():
        for catalog in (None, "builtin"):
            proxy = VariantProxy(ProxyConfig(upstream=(upstream.base_url,), variant=name, catalog=catalog))
            bound = proxy.codecs.for_tools(tools)
            upstream.responder = OracleUpstream(bound.codec, task.gold, 99, bound.domain)
            messages: list[dict[str, Any]] = [{"role": "user", "content": task.query}]
            executed = []
            for _ in range(5):
                message = (await proxy.chat({"model": MODEL, "messages": messages, "tools": tools}))["choices"][0]["message"]
                messages.append(message)
                for call in message.get("tool_calls") or []:
                    executed.append((call["function"]["name"], json.loads(call["function"]["arguments"])))
                    messages.append({"role": "tool", "tool_call_id": call["id"], "content": "{}"})
                if not message.get("tool_calls"):
                    break
            await proxy.aclose()
            assert executed == [(a.tool, dict(a.arguments)) for a in task.gold], (name, catalog)


def test_a_variant_that_cannot_be_built_on_the_tools_is_a_400(upstream: FakeOpenAIServer, tmp_path: Any) -> None:
    spec = tmp_path / "rename_missing.json"
    spec.write_text(json.dumps({"name": "needs_a_tool", "steps": [{"op": "merge", "groups": [["nope_a", "nope_b"]]}]}))
    tools = [{"type": "function", "function": {"name": "ping", "parameters": {"type": "object", "properties": {}}}}]
    with _proxy(upstream, str(spec)) as proxy:
        r = httpx.post(f"{proxy.base_url}/chat/completions",
                       json={"model": MODEL, "messages": [{"role": "user", "content": "x"}], "tools": tools})
    assert r.status_code == 400, r.text
    assert "needs_a_tool" in r.json()["error"]["message"] and not upstream.requests


def test_streaming_replies_carry_the_same_native_calls(builtin: Catalog, upstream: FakeOpenAIServer) -> None:
    task = _task(builtin, 2)
    tools = native_tools(builtin, task.domain)
    codec = CodecSource(resolve_variant("transaction")).for_tools(tools).codec
    upstream.responder = OracleUpstream(codec, task.gold, 1)
    with _proxy(upstream, "transaction") as proxy:
        executed, _, answer = run_agent(proxy.base_url, tools, task.query, stream=True)
    assert executed == [(a.tool, dict(a.arguments)) for a in task.gold] and answer == "All done."


#: two tools as pydantic writes them (``$defs`` + ``$ref``, ``Model | dict`` as tau2's airline sends them, and
#: ``Optional[X] = None`` as ``anyOf`` with null)
PYDANTIC_TOOLS = [
    {"type": "function", "function": {
        "name": "book_trip", "description": "Book a trip.",
        "parameters": {"$defs": {"Leg": {"properties": {"origin": {"type": "string"}, "date": {"type": "string"}},
                                         "required": ["origin", "date"], "title": "Leg", "type": "object"},
                                 "Passenger": {"properties": {"name": {"type": "string"},
                                                              "email": {"anyOf": [{"type": "string"}, {"type": "null"}],
                                                                        "default": None, "title": "Email"}},
                                               "required": ["name"], "title": "Passenger", "type": "object"}},
                       "properties": {"user_id": {"type": "string"},
                                      "legs": {"items": {"anyOf": [{"$ref": "#/$defs/Leg"},
                                                                   {"additionalProperties": True, "type": "object"}]},
                                               "type": "array"},
                                      "passenger": {"$ref": "#/$defs/Passenger"}},
                       "required": ["user_id", "legs", "passenger"], "title": "parameters", "type": "object"}}},
    {"type": "function", "function": {
        "name": "get_trip", "description": "Look a trip up.",
        "parameters": {"properties": {"trip_id": {"type": "string"},
                                      "verbose": {"anyOf": [{"type": "boolean"}, {"type": "null"}], "default": None},
                                      "status": {"anyOf": [{"enum": ["open", "closed"], "type": "string"},
                                                           {"type": "null"}], "default": None}},
                       "required": ["trip_id"], "type": "object"}}},
]


@pytest.mark.parametrize("variant", ["fully_merged", "nested_args", "fully_split", "transaction",
                                     "reference_resolution", "schema_discovery"])
def test_tools_with_pydantic_refs_are_inlined_not_refused(upstream: FakeOpenAIServer, variant: str) -> None:
    """Without --catalog the variant is built on the request's tools: ``$defs`` references
    and ``Optional`` fields (every pydantic-made tool list: tau2-bench's airline, most
    frameworks) are rewritten first, so the request is served instead of refused with a 400,
    and a null argument reaches the agent as null."""
    book = NativeAction("live", "book_trip", {"user_id": "u1", "legs": [{"origin": "SFO", "date": "2024-05-01"}],
                                              "passenger": {"name": "Ada", "email": None}})
    gold = (NativeAction("live", "get_trip", {"trip_id": "t9", "verbose": None, "status": "open"}), book)
    bound = CodecSource(resolve_variant(variant)).for_tools(PYDANTIC_TOOLS)
    shown = json.dumps(bound.tools)
    assert "$ref" not in shown and "$defs" not in shown and "anyOf" not in shown
    upstream.responder = OracleUpstream(bound.codec, gold, 1)
    with _proxy(upstream, variant) as proxy:
        executed, _, answer = run_agent(proxy.base_url, PYDANTIC_TOOLS, "book it")
    assert executed == [(a.tool, dict(a.arguments)) for a in gold] and answer == "All done."
    assert "$ref" not in json.dumps(upstream.requests[0]["tools"])


# ----------------------------------------------------------------------------- decoding


def test_off_schema_calls_go_back_to_the_model_as_errors(builtin: Catalog, upstream: FakeOpenAIServer) -> None:
    task = _task(builtin, 1)
    tools = native_tools(builtin, task.domain)
    codec = CodecSource(resolve_variant("fully_merged")).for_tools(tools).codec
    good = codec.encode([NativeAction("live", a.tool, a.arguments) for a in task.gold[:1]])[0]
    upstream.queue(Reply.calls((task.gold[0].tool, dict(task.gold[0].arguments))),  # the native name: off-schema
                   Reply.calls((good.name, '{"operation": ')),                        # unparsable arguments
                   Reply.calls((good.name, dict(good.arguments))),
                   Reply.text("ok"))
    with _proxy(upstream, "fully_merged") as proxy:
        r = httpx.post(f"{proxy.base_url}/chat/completions",
                       json={"model": MODEL, "messages": [{"role": "user", "content": task.query}], "tools": tools})
    message = r.json()["choices"][0]["message"]
    assert [c["function"]["name"] for c in message["tool_calls"]] == [task.gold[0].tool]
    errors = [m["content"] for m in upstream.requests[2]["messages"] if m["role"] == "tool"]
    assert errors[0].startswith("Error: Unknown tool") and "could not parse" in errors[1]
    assert len(upstream.requests) == 3 and r.json()["toolbias"]["rounds"] == 3


def test_protocol_state_is_kept_per_conversation(builtin: Catalog, upstream: FakeOpenAIServer) -> None:
    """Two agents interleaved on one proxy: each conversation's transaction handles and
    transcript stay its own (the upstream sees each history exactly once, in order)."""
    task = _task(builtin, 2)
    tools = native_tools(builtin, task.domain)
    codec = CodecSource(resolve_variant("transaction")).for_tools(tools).codec
    upstream.responder = OracleUpstream(codec, task.gold, 1)
    with _proxy(upstream, "transaction") as proxy:
        a = run_agent(proxy.base_url, tools, task.query)
        b = run_agent(proxy.base_url, tools, task.query + " (again)")
    assert a[0] == b[0] == [(x.tool, dict(x.arguments)) for x in task.gold]
    for body in upstream.requests:  # every upstream transcript has one user message: no mixing
        assert sum(m["role"] == "user" for m in body["messages"]) == 1


def test_a_history_the_proxy_never_served_is_rebuilt_in_the_variant(builtin: Catalog,
                                                                     upstream: FakeOpenAIServer) -> None:
    task = _task(builtin, 2)
    tools = native_tools(builtin, task.domain)
    first = task.gold[0]
    history = [{"role": "user", "content": task.query},
               {"role": "assistant", "content": None, "tool_calls": [
                   {"id": "x1", "type": "function",
                    "function": {"name": first.tool, "arguments": json.dumps(dict(first.arguments))}}]},
               {"role": "tool", "tool_call_id": "x1", "content": '{"ok": true}'}]
    upstream.queue(Reply.text("fine"))
    with _proxy(upstream, "transaction") as proxy:
        r = httpx.post(f"{proxy.base_url}/chat/completions", json={"model": MODEL, "messages": history, "tools": tools})
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "fine"
    sent = upstream.requests[0]["messages"]
    names = [c["function"]["name"] for m in sent if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    codec = CodecSource(resolve_variant("transaction")).for_tools(tools).codec
    assert names == [c.name for c in codec.encode([NativeAction("live", first.tool, first.arguments)])]
    assert len(names) >= 2
    assert sent[-1] == {"role": "tool", "tool_call_id": sent[-2]["tool_calls"][0]["id"], "content": '{"ok": true}'}


# ----------------------------------------------------------------------------- pass-through, errors, store


def test_requests_without_tools_pass_straight_through(upstream: FakeOpenAIServer) -> None:
    upstream.queue(Reply.text("I am the user."), Reply.text("streamed"))
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "temperature": 0.3, "stop": ["x"]}
    with _proxy(upstream, "fully_merged") as proxy:
        r = httpx.post(f"{proxy.base_url}/chat/completions", json=body)
        assert r.json()["choices"][0]["message"]["content"] == "I am the user."
        assert upstream.requests[-1] == body  # unchanged, extra fields included
        models = httpx.get(f"{proxy.base_url}/models").json()
        assert [m["id"] for m in models["data"]] == [MODEL]


def test_upstream_outage_is_a_clear_error_not_a_hang(builtin: Catalog) -> None:
    tools = native_tools(builtin, builtin.domains[0].name)
    dead = f"http://127.0.0.1:{free_port()}/v1"
    config = ProxyConfig(upstream=(dead,), variant="native", retries=2)
    with ProxyServer(config) as proxy:
        for body in ({"model": MODEL, "messages": [{"role": "user", "content": "x"}], "tools": tools},
                     {"model": MODEL, "messages": [{"role": "user", "content": "x"}]}):
            r = httpx.post(f"{proxy.base_url}/chat/completions", json=body, timeout=30)
            assert r.status_code == 502, r.text
            err = r.json()["error"]
            assert err["type"] == "upstream_error" and "connection failed" in err["message"]


def test_upstream_client_errors_keep_their_status(builtin: Catalog, upstream: FakeOpenAIServer) -> None:
    tools = native_tools(builtin, builtin.domains[0].name)
    with _proxy(upstream, "native") as proxy:
        r = httpx.post(f"{proxy.base_url}/chat/completions",
                       json={"model": "no-such-model", "messages": [{"role": "user", "content": "x"}], "tools": tools})
        assert r.status_code == 404 and "no-such-model" in r.json()["error"]["message"]
        r = httpx.post(f"{proxy.base_url}/chat/completions", content=b"{not json")
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_json"
        r = httpx.post(f"{proxy.base_url}/chat/completions",
                       json={"model": MODEL, "messages": [{"role": "user", "content": "x"}],
                             "tools": [{"type": "function", "function": {"parameters": {}}}]})
        assert r.status_code == 400 and "no 'name'" in r.json()["error"]["message"]


def test_conversations_go_to_the_store(builtin: Catalog, upstream: FakeOpenAIServer, tmp_path: Any) -> None:
    task = _task(builtin, 2)
    tools = native_tools(builtin, task.domain)
    codec = CodecSource(resolve_variant("transaction")).for_tools(tools).codec
    upstream.responder = OracleUpstream(codec, task.gold, 1)
    db = tmp_path / "live.db"
    with _proxy(upstream, "transaction", store=str(db)) as proxy:
        run_agent(proxy.base_url, tools, task.query)
        upstream.responder = lambda body: Reply.calls(("no_such_tool", {}))  # noqa: E731
        httpx.post(f"{proxy.base_url}/chat/completions",
                   json={"model": MODEL, "messages": [{"role": "user", "content": "y"}], "tools": tools})
    rows = sqlite3.connect(db).execute(
        "SELECT study, kind, variant, n_executed, n_rejections, record FROM episodes ORDER BY n_executed").fetchall()
    assert len(rows) == 2
    bad, good = rows
    assert good[:4] == ("proxy|transaction", "live", "transaction", len(task.gold)) and good[4] == 0
    record = json.loads(good[5])["live"]
    outcomes = [c["decoded"]["outcome"] for c in record["calls"]]
    assert outcomes.count("native") == len(task.gold) and outcomes.count("reply") == len(outcomes) - len(task.gold)
    assert bad[4] == 16 and json.loads(bad[5])["live"]["termination"] == "protocol_round_limit"
