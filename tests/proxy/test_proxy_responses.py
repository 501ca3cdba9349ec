"""``POST /v1/responses`` on toolbias proxy over loopback: the openai SDK's own Responses client
(a client nobody here wrote) as the agent, a real uvicorn proxy, a scripted chat upstream playing
the gold under the variant. The agent must see exactly the native gold under each variant."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from toolbias.catalog import load_catalog
from toolbias.catalog.formats import write_tools
from toolbias.catalog.model import Catalog, Task
from toolbias.proxy.codecs import CodecSource
from toolbias.variants import resolve_variant

pytest.importorskip("uvicorn", reason="toolbias proxy needs uvicorn (pip install 'toolbias[proxy]')")
openai = pytest.importorskip("openai")

from tests.support.agents import MODEL, OracleUpstream, native_tools, proxy_server  # noqa: E402
from tests.support.servers import FakeOpenAIServer  # noqa: E402


@pytest.fixture(scope="module")
def builtin() -> Catalog:
    return load_catalog("builtin")


def _task(catalog: Catalog) -> Task:
    return next(t for t in catalog.tasks if len(t.gold) >= 2)


def _sdk_agent(base_url: str, tools: list[dict[str, Any]], query: str,
               stream: bool = False) -> tuple[list[tuple[str, Any]], str]:
    """The openai SDK's Responses API loop: the whole conversation in ``input`` each turn (with
    ``stream``: the SDK's own stream helper accumulates the events into the response)."""
    client = openai.OpenAI(base_url=base_url, api_key="sk-test", max_retries=0)
    items: list[Any] = [{"role": "user", "content": query}]
    executed: list[tuple[str, Any]] = []
    try:
        for _ in range(20):
            if stream:
                with client.responses.stream(model=MODEL, input=items, tools=tools, instructions="Be helpful.",
                                             store=False) as events:
                    r = events.get_final_response()
            else:
                r = client.responses.create(model=MODEL, input=items, tools=tools, instructions="Be helpful.",
                                            store=False)
            calls = [o for o in r.output if o.type == "function_call"]
            if not calls:
                return executed, r.output_text
            items += [o.model_dump(exclude_none=True) for o in r.output]
            for c in calls:
                executed.append((c.name, json.loads(c.arguments)))
                items.append({"type": "function_call_output", "call_id": c.call_id, "output": '{"ok": true}'})
    finally:
        client.close()
    raise AssertionError("the agent never got an answer")


@pytest.mark.parametrize("variant,stream", [("native", False), ("transaction", False), ("fully_merged", False),
                                            ("schema_discovery", False), ("composed", False), ("transaction", True),
                                            ("fully_merged", True)])
def test_sdk_responses_agent_sees_exactly_the_native_gold(builtin: Catalog, variant: str, stream: bool) -> None:
    task = _task(builtin)
    chat_tools = native_tools(builtin, task.domain)
    codec = CodecSource(resolve_variant(variant)).for_tools(chat_tools).codec
    with FakeOpenAIServer(models=(MODEL,)) as upstream:
        upstream.responder = OracleUpstream(codec, task.gold, 1)
        with proxy_server(upstream, variant) as proxy:
            executed, answer = _sdk_agent(proxy.base_url, write_tools(builtin.domain(task.domain).tools, "responses"),
                                          task.query, stream)
        first = upstream.requests[0]
    assert executed == [(a.tool, dict(a.arguments)) for a in task.gold]
    assert answer == "All done."
    # upstream: a chat request with the variant's tools and the instructions as the system message
    assert {t["function"]["name"] for t in first["tools"]} == {t["function"]["name"] for t in codec.schema("live")}
    assert first["messages"][0] == {"role": "system", "content": "Be helpful."}


def test_without_tools_passes_through_and_refusals_are_400s(builtin: Catalog) -> None:
    with FakeOpenAIServer(models=(MODEL,)) as upstream, proxy_server(upstream, "native") as proxy:
        client = openai.OpenAI(base_url=proxy.base_url, api_key="sk-test", max_retries=0)
        try:
            r = client.responses.create(model=MODEL, input="Say ok.", max_output_tokens=20)
        finally:
            client.close()
        assert r.output_text == "ok" and r.status == "completed" and r.usage.output_tokens >= 1
        assert upstream.requests[-1]["max_tokens"] == 20 and "tools" not in upstream.requests[-1]
        raw = httpx.post(f"{proxy.base_url}/responses", json={"model": MODEL, "input": "Say ok.", "stream": True},
                         timeout=10)
        assert raw.headers["content-type"].startswith("text/event-stream")
        events = [json.loads(line[6:]) for line in raw.text.splitlines() if line.startswith("data: ")]
        assert [e["type"] for e in events][0] == "response.created" and events[-1]["type"] == "response.completed"
        assert [e["sequence_number"] for e in events] == list(range(len(events)))
        assert "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta") == "ok"
        n = len(upstream.requests)
        tools = write_tools(builtin.domains[0].tools, "responses")
        bad = {"previous_response_id": ({"previous_response_id": "resp_1"}, "keeps no conversations"),
               "hosted tool": ({"tools": [*tools, {"type": "web_search_preview"}]}, "unknown type 'web_search_preview'"),
               "item": ({"input": [{"type": "web_search_call", "id": "ws_1"}]}, "'web_search_call' is not served"),
               "empty": ({"input": []}, "'input' must be")}
        for name, (extra, needle) in bad.items():
            body = {"model": MODEL, "input": "hi", "tools": tools, **extra}
            resp = httpx.post(f"{proxy.base_url}/responses", json=body, timeout=10)
            assert resp.status_code == 400, (name, resp.text)
            assert needle in resp.json()["error"]["message"], (name, resp.text)
        assert len(upstream.requests) == n  # nothing refused reached the upstream
