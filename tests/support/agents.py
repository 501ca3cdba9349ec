"""Agents and scripted upstreams for tests that drive ``toolbias proxy`` over loopback.

``OracleUpstream`` answers like a model that knows the variant (a task's gold encoded by the
proxy's own codec); ``run_agent`` is a minimal agent loop over httpx that 'executes' the
native calls the proxy hands it; ``proxy_server`` puts a :class:`ProxyServer` in front of a
:class:`~tests.support.servers.FakeOpenAIServer`."""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.support.servers import FakeOpenAIServer, Reply
from toolbias.catalog.model import Catalog, NativeAction
from toolbias.proxy import ProxyConfig, ProxyServer
from toolbias.variants.codec import Codec

MODEL = "fake-model"


def native_tools(catalog: Catalog, domain: str) -> list[dict[str, Any]]:
    return [t.to_openai() for t in catalog.domain(domain).tools]


class OracleUpstream:
    """Responds like a model that knows the variant: the gold encoded by the same codec the
    proxy builds, ``per_round`` calls per request, then a text answer."""

    def __init__(self, codec: Codec, gold: tuple[NativeAction, ...], per_round: int = 1,
                 domain: str = "live", answer: str = "All done.") -> None:
        self.calls = codec.encode([NativeAction(domain, a.tool, a.arguments) for a in gold])
        self.per_round = per_round
        self.answer = answer

    def __call__(self, body: dict[str, Any]) -> Reply:
        made = sum(len(m.get("tool_calls") or []) for m in body["messages"] if m["role"] == "assistant")
        batch = self.calls[made:made + self.per_round]
        if not batch:
            return Reply.text(self.answer)
        return Reply.calls(*((c.name, dict(c.arguments)) for c in batch))


def run_agent(base_url: str, tools: list[dict[str, Any]], query: str, stream: bool = False,
              max_turns: int = 20) -> tuple[list[tuple[str, dict[str, Any]]], list[dict[str, Any]], str]:
    """A minimal agent: calls the proxy, 'executes' native calls, until a text answer."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "Be helpful."}, {"role": "user", "content": query}]
    executed: list[tuple[str, dict[str, Any]]] = []
    with httpx.Client(timeout=30) as client:
        for _ in range(max_turns):
            body = {"model": MODEL, "messages": messages, "tools": tools, "stream": stream}
            response = client.post(f"{base_url}/chat/completions", json=body)
            assert response.status_code == 200, response.text
            message = from_stream(response.text) if stream else response.json()["choices"][0]["message"]
            messages.append(message)
            if not message.get("tool_calls"):
                return executed, messages, message.get("content") or ""
            for call in message["tool_calls"]:
                args = json.loads(call["function"]["arguments"])
                executed.append((call["function"]["name"], args))
                messages.append({"role": "tool", "tool_call_id": call["id"],
                                 "content": json.dumps({"ok": True, "n": len(executed)})})
    raise AssertionError("the agent never got an answer")


def from_stream(text: str) -> dict[str, Any]:
    """The assistant message of a streamed (SSE) chat completion."""
    message: dict[str, Any] = {"role": "assistant", "content": None}
    calls: list[dict[str, Any]] = []
    for line in text.splitlines():
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        chunk = json.loads(line[6:])
        for choice in chunk["choices"]:
            delta = choice["delta"]
            if delta.get("content"):
                message["content"] = (message["content"] or "") + delta["content"]
            for tc in delta.get("tool_calls") or []:
                calls.append({"id": tc["id"], "type": "function", "function": dict(tc["function"])})
    if calls:
        message["tool_calls"] = calls
    return message


def proxy_server(upstream: FakeOpenAIServer, variant: str, **options: Any) -> ProxyServer:
    """A (not yet started) :class:`ProxyServer` for ``variant`` in front of ``upstream``;
    ``store=`` goes to the server, the other options to :class:`ProxyConfig`."""
    store = options.pop("store", None)
    return ProxyServer(ProxyConfig(upstream=(upstream.base_url,), variant=variant, **options), store=store)
