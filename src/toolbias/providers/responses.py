"""The OpenAI Responses API: ``openai-responses:<model>`` (``POST {base_url}/responses``).

The schema-bias artifact runs models through this API. Messages and tools arrive in the
chat form every provider takes (:mod:`.base`) and go out in the Responses API's own:

- tools ``{"type": "function", "name", "description", "parameters"}`` (written by
  :mod:`toolbias.catalog.formats`), ``tool_choice`` ``"auto"`` / ``"required"`` / ``"none"``;
- the conversation as ``input`` items: system and user turns as role messages, assistant text
  as an assistant message, each tool call a ``function_call`` item and each tool result a
  ``function_call_output`` item (paired by ``call_id``); ``store`` is false (nothing kept server-side);
- ``max_tokens`` is sent as ``max_output_tokens``; ``seed`` is not part of this API and is left out.

Under ``--protocol paper`` (``request_form == "paper"``) requests take the artifact's form
instead (:func:`paper_request`).

The answer's ``output`` items map to :class:`ModelOutput`: ``message`` text is the content,
``function_call`` items the calls (``reasoning`` items are skipped); a ``"status": "failed"``
answer is a retryable :class:`InfraError`. Transport, retries, cache and concurrency are those of
:class:`~.openai.OpenAIProvider` and the wrapper (the same base URL, key and ``extra_body`` options).
"""

from __future__ import annotations

import json
import time
from typing import Any

from ..catalog.formats import read_tools, tool_entry
from ..errors import CatalogError, ProviderError
from .base import GenerateConfig, InfraError, Message, ModelOutput, ToolCall, Usage
from .openai import OpenAIProvider, _int, _redact
from .textcalls import calls_in_text


def convert_tools(tools: list[dict[str, Any]], fmt: str) -> list[dict[str, Any]]:
    """A chat-form tool list in another API's format (``responses`` or ``anthropic``)."""
    try:
        parsed = read_tools(list(tools), "request", "tools")
    except CatalogError as exc:
        raise ProviderError(f"the tool list cannot be sent: {exc.what}", where=exc.where, fix=exc.fix) from None
    return [tool_entry(t, fmt) for t in parsed]


class ToolListCache:
    """Each chat-form tool list converted once (a codec passes the same list object every turn)."""

    def __init__(self, fmt: str) -> None:
        self.fmt = fmt
        self._lists: dict[int, tuple[list[dict[str, Any]], list[dict[str, Any]]]] = {}

    def get(self, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        hit = self._lists.get(id(tools))
        if hit is not None and hit[0] is tools:
            return hit[1]
        converted = convert_tools(tools, self.fmt)
        if len(self._lists) >= 256:
            self._lists.clear()
        self._lists[id(tools)] = (tools, converted)
        return converted


def arguments_text(fn: dict[str, Any]) -> str:
    args = fn.get("arguments")
    return args if isinstance(args, str) else json.dumps(args or {}, ensure_ascii=False)


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # chat content parts
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return json.dumps(content, ensure_ascii=False)


def input_items(messages: list[Message]) -> list[dict[str, Any]]:
    """Chat messages as Responses ``input`` items."""
    items: list[dict[str, Any]] = []
    for m in messages:
        role = m.get("role")
        if role == "tool":
            items.append({"type": "function_call_output", "call_id": str(m.get("tool_call_id") or ""),
                          "output": _text(m.get("content"))})
            continue
        if role == "assistant":
            text = _text(m.get("content"))
            if text:
                items.append({"role": "assistant", "content": text})
            for c in m.get("tool_calls") or []:
                fn = c.get("function") or {}
                items.append({"type": "function_call", "call_id": str(c.get("id") or ""),
                              "name": str(fn.get("name") or ""), "arguments": arguments_text(fn)})
            continue
        items.append({"role": role if role in ("system", "developer", "user") else "user",
                      "content": _text(m.get("content"))})
    return items


def paper_request(model: str, messages: list[Message], tools: list[dict[str, Any]], tool_choice: str | None,
                  max_tokens: int) -> dict[str, Any]:
    """A Responses request as the schema-bias artifact writes it from a chat request
    (``eval/common.py``): the input items of :func:`input_items` with a call's empty argument text
    sent as ``"{}"``, tools ``{"type", "name", "description", "parameters", "strict": false}``, the
    token cap as ``max_output_tokens``, and no ``temperature``, ``seed`` or ``store``."""
    items = []
    for item in input_items(messages):
        if item.get("type") == "function_call" and not item["arguments"]:
            item = {**item, "arguments": "{}"}
        items.append(item)
    entries = []
    for t in tools:
        fn = t.get("function", t)
        entries.append({"type": "function", "name": fn["name"], "description": fn.get("description", ""),
                        "parameters": fn.get("parameters", {"type": "object", "properties": {}}), "strict": False})
    body: dict[str, Any] = {"model": model, "input": items, "tools": entries, "max_output_tokens": max_tokens}
    if tool_choice:
        body["tool_choice"] = tool_choice
    return body


class OpenAIResponsesProvider(OpenAIProvider):
    """``openai-responses:<model>``: the options of ``openai:`` models, through ``/responses``."""

    def __init__(self, arg: str = "", **options: Any) -> None:
        if not arg.strip():
            raise ProviderError("no model name given", where="model spec 'openai-responses:'",
                                fix="name the model, e.g. openai-responses:gpt-4o-mini")
        super().__init__(arg, **options)
        self.spec = f"openai-responses:{self.model}"
        self._converted = ToolListCache("responses")

    def __repr__(self) -> str:
        return f"OpenAIResponsesProvider(model={self.model!r}, base_urls={[_redact(u) for u in self.base_urls]!r})"

    def request(self, messages: list[Message], tools: list[dict[str, Any]], tool_choice: str | None,
                config: GenerateConfig) -> dict[str, Any]:
        if self.request_form == "paper":
            body = paper_request(self.model, messages, tools, tool_choice, config.max_tokens)
            if self.extra_body:
                body.update(self.extra_body)  # e.g. the artifact's reasoning effort: {"reasoning": {"effort": ...}}
            return body
        body = {"model": self.model, "input": input_items(messages), "store": False,
                                "temperature": config.temperature, "max_output_tokens": config.max_tokens}
        if config.top_p is not None:
            body["top_p"] = config.top_p
        if tools:
            body["tools"] = self._converted.get(tools)
            if tool_choice is not None:
                body["tool_choice"] = tool_choice
        if self.extra_body:
            body.update(self.extra_body)
        return body

    async def generate(self, messages: list[Message], tools: list[dict[str, Any]], tool_choice: str | None,
                       config: GenerateConfig) -> ModelOutput:
        url = self.next_url()
        body = self.request(messages, tools, tool_choice, config)
        t0 = time.perf_counter()
        response = await self.post_json(url, "/responses", body)
        return self.to_output(response, tools, tool_choice, time.perf_counter() - t0, url)

    def to_output(self, response: dict[str, Any], tools: list[dict[str, Any]], tool_choice: str | None,
                  latency: float, url: str) -> ModelOutput:
        if response.get("status") == "failed" or response.get("error"):
            err = response.get("error")
            detail = err.get("message") if isinstance(err, dict) else err
            raise InfraError(f"{_redact(url)}: the response failed: {detail or 'no reason given'}", retryable=True)
        output = response.get("output")
        if not isinstance(output, list):
            raise InfraError(f"{_redact(url)}: the server returned no 'output' list", retryable=True)
        texts: list[str] = []
        calls: list[ToolCall] = []
        for i, item in enumerate(output):
            if not isinstance(item, dict):
                continue
            if item.get("type") == "function_call":
                name = str(item.get("name") or "")
                calls.append(ToolCall.from_wire(str(item.get("call_id") or item.get("id") or f"call_{i}"), name,
                                                item.get("arguments"), generated_id=not item.get("call_id")))
            elif item.get("type") == "message":
                for part in item.get("content") or []:
                    if isinstance(part, dict) and part.get("type") in ("output_text", "text"):
                        texts.append(str(part.get("text") or ""))
        content = "".join(texts) or None
        recovered, raw_content = False, None
        found = None if calls else calls_in_text(content, tools, tool_choice)
        if found is not None:
            calls, raw_content, content, recovered = list(found.calls), content, (found.remaining or None), True
        usage = response["usage"] if isinstance(response.get("usage"), dict) else {}
        details = usage["input_tokens_details"] if isinstance(usage.get("input_tokens_details"), dict) else {}
        return ModelOutput(content=content, tool_calls=tuple(calls),
                           usage=Usage(prompt_tokens=_int(usage.get("input_tokens")),
                                       completion_tokens=_int(usage.get("output_tokens")),
                                       cached_prompt_tokens=_int(details.get("cached_tokens"))),
                           latency_s=latency, recovered=recovered, raw_content=raw_content)

    PROBE_PATH = "/responses"

    def probe_body(self) -> dict[str, Any]:
        """A 16-token request (the API's least)."""
        return {"model": self.model, "input": "ping", "max_output_tokens": 16, "store": False}

    def probe_not_found(self, url: str, exc: Exception) -> ProviderError:
        return ProviderError(f"no Responses API for '{self.model}' at {_redact(url)}: {exc}",
                             fix="check the model name, or use openai:<model> for a chat-completions server")


__all__ = ["OpenAIResponsesProvider", "ToolListCache", "convert_tools", "input_items"]
