"""A third-party client drives the proxy: litellm (the client tau2-bench's runner calls models
through) plays an agent loop against toolbias proxy over loopback, with a scripted upstream
that knows the variant, under fully merged, fully split, nested args, transaction and schema
discovery, whole replies and streamed (litellm reassembles the proxy's events). Skipped when
litellm is not installed (``toolbias[tau2]``)."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
litellm = pytest.importorskip("litellm", reason="litellm is not installed (pip install 'toolbias[tau2]')")
pytest.importorskip("uvicorn", reason="toolbias proxy needs uvicorn (pip install 'toolbias[proxy]')")

from tests.support.agents import MODEL, OracleUpstream, native_tools  # noqa: E402
from tests.support.servers import FakeOpenAIServer  # noqa: E402
from toolbias.catalog import load_catalog  # noqa: E402
from toolbias.proxy import ProxyConfig, ProxyServer  # noqa: E402
from toolbias.proxy.codecs import CodecSource  # noqa: E402
from toolbias.variants import resolve_variant  # noqa: E402


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("variant", ["fully_merged", "fully_split", "nested_args", "transaction", "schema_discovery"])
async def test_litellm_agent_through_the_proxy_sees_native_calls(variant: str, stream: bool) -> None:
    catalog = load_catalog("builtin")
    task = next(t for t in catalog.tasks if len(t.gold) >= 2)
    tools = native_tools(catalog, task.domain)
    codec = CodecSource(resolve_variant(variant)).for_tools(tools).codec
    with FakeOpenAIServer(models=(MODEL,)) as upstream:
        upstream.responder = OracleUpstream(codec, task.gold, 2 if stream else 1)  # streams: calls in parallel
        with ProxyServer(ProxyConfig(upstream=(upstream.base_url,), variant=variant)) as proxy:
            messages: list[dict[str, Any]] = [{"role": "user", "content": task.query}]
            executed = []
            for _ in range(12):
                response = await litellm.acompletion(model=f"openai/{MODEL}", api_base=proxy.base_url,
                                                     api_key="EMPTY", messages=messages, tools=tools, stream=stream)
                if stream:  # litellm's own reassembly of the proxy's server-sent events
                    response = litellm.stream_chunk_builder([c async for c in response], messages=messages)
                message = response.choices[0].message
                calls = message.tool_calls or []
                messages.append({"role": "assistant", "content": message.content,
                                 "tool_calls": [{"id": c.id, "type": "function",
                                                 "function": {"name": c.function.name,
                                                              "arguments": c.function.arguments}} for c in calls]
                                 or None})
                if not calls:
                    break
                for c in calls:
                    executed.append((c.function.name, json.loads(c.function.arguments)))
                    messages.append({"role": "tool", "tool_call_id": c.id, "content": '{"ok": true}'})
    assert executed == [(a.tool, dict(a.arguments)) for a in task.gold]
    assert messages[-1]["content"] == "All done."
    native = {t["function"]["name"] for t in tools}
    assert all(name in native for name, _ in executed)  # the agent never saw a variant call
