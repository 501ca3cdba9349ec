"""The Anthropic messages API: ``anthropic:<model>`` (``POST {base_url}/messages``).

The tool-selection authors run models through this API. Messages and tools arrive in the chat
form every provider takes (:mod:`.base`) and go out in the messages API's own:

- tools ``{"name", "description", "input_schema"}`` (written by :mod:`toolbias.catalog.formats`);
  ``tool_choice`` ``{"type": "auto" | "any" | "none"}`` ("required" is ``any``);
- system turns joined into ``system``; an assistant turn's text and calls as ``text`` and
  ``tool_use`` blocks (arguments as the ``input`` object); tool results as ``tool_result``
  blocks of one user turn (results of one assistant turn together, as the API requires);
  consecutive user turns are joined;
- ``seed`` is not part of this API and is left out.

The base URL is the ``base_url`` option (``--base-url``), else ``ANTHROPIC_BASE_URL`` (``/v1``
added when missing, as the SDK's variable names the host), else ``https://api.anthropic.com/v1``;
the key is ``api_key`` or ``ANTHROPIC_API_KEY``, sent as ``x-api-key`` with
``anthropic-version: 2023-06-01``. Transport, retries (429 and 529 overloaded included), cache and
concurrency are those of :class:`~.openai.OpenAIProvider` and the wrapper.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any
from urllib.parse import urlparse

from ..errors import ProviderError
from .base import GenerateConfig, InfraError, Message, ModelOutput, ToolCall, Usage
from .openai import PLACEHOLDER_KEY, OpenAIProvider, _int, _redact, _split_urls
from .responses import ToolListCache, _text

DEFAULT_BASE_URL = "https://api.anthropic.com/v1"
API_VERSION = "2023-06-01"
_CHOICE = {"auto": {"type": "auto"}, "required": {"type": "any"}, "none": {"type": "none"}}


def _is_anthropic_host(url: str) -> bool:
    host = (urlparse(url).hostname or "").lower()
    return host == "api.anthropic.com" or host.endswith(".anthropic.com")


def _input(fn: dict[str, Any]) -> dict[str, Any]:
    args = fn.get("arguments")
    if isinstance(args, dict):
        return args
    try:
        value = json.loads(args) if isinstance(args, str) and args.strip() else {}
    except ValueError:
        value = None
    # a call whose arguments were no JSON object is shown to the model as it wrote them
    return value if isinstance(value, dict) else {"raw_arguments": args}


def wire_messages(messages: list[Message]) -> tuple[str, list[dict[str, Any]]]:
    """(system text, messages) in the messages API's form."""
    system: list[str] = []
    out: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})

    for m in messages:
        role = m.get("role")
        if role in ("system", "developer"):
            system.append(_text(m.get("content")))
        elif role == "tool":
            add("user", [{"type": "tool_result", "tool_use_id": str(m.get("tool_call_id") or ""),
                          "content": _text(m.get("content"))}])
        elif role == "assistant":
            blocks: list[dict[str, Any]] = []
            text = _text(m.get("content"))
            if text:
                blocks.append({"type": "text", "text": text})
            for c in m.get("tool_calls") or []:
                fn = c.get("function") or {}
                blocks.append({"type": "tool_use", "id": str(c.get("id") or ""), "name": str(fn.get("name") or ""),
                               "input": _input(fn)})
            if blocks:
                add("assistant", blocks)
        else:
            add("user", [{"type": "text", "text": _text(m.get("content")) or "(empty)"}])
    return "\n\n".join(s for s in system if s), out


class AnthropicProvider(OpenAIProvider):
    """``anthropic:<model>``. Options: ``base_url`` / ``base_urls``, ``api_key``, ``timeout``,
    ``max_connections``, ``extra_body`` (merged into every request; part of the settings hash)."""

    def __init__(self, arg: str = "", *, base_url: str | list[str] | None = None,
                 base_urls: list[str] | tuple[str, ...] | None = None, api_key: str | None = None,
                 **options: Any) -> None:
        if not arg.strip():
            raise ProviderError("no model name given", where="model spec 'anthropic:'",
                                fix="name the model, e.g. anthropic:claude-sonnet-4-5")
        urls = _split_urls(base_url) + _split_urls(base_urls)
        if not urls:
            env = _split_urls(os.environ.get("ANTHROPIC_BASE_URL"))
            urls = [u if u.endswith("/v1") else u + "/v1" for u in env] or [DEFAULT_BASE_URL]
        key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        if not key:
            if any(_is_anthropic_host(u) for u in urls):
                raise ProviderError(f"no API key for anthropic:{arg.strip()}",
                                    fix="set ANTHROPIC_API_KEY, or pass --base-url for another server")
            key = PLACEHOLDER_KEY
        super().__init__(arg, base_urls=urls, api_key=key, **options)
        self.spec = f"anthropic:{self.model}"
        self._headers = {"x-api-key": key, "anthropic-version": API_VERSION, "Content-Type": "application/json"}
        self._converted = ToolListCache("anthropic")

    def __repr__(self) -> str:
        return f"AnthropicProvider(model={self.model!r}, base_urls={[_redact(u) for u in self.base_urls]!r})"

    def request(self, messages: list[Message], tools: list[dict[str, Any]], tool_choice: str | None,
                config: GenerateConfig) -> dict[str, Any]:
        system, wire = wire_messages(messages)
        body: dict[str, Any] = {"model": self.model, "max_tokens": config.max_tokens, "messages": wire,
                                "temperature": config.temperature}
        if system:
            body["system"] = system
        if config.top_p is not None:
            body["top_p"] = config.top_p
        if tools:
            body["tools"] = self._converted.get(tools)
            if tool_choice is not None:
                body["tool_choice"] = _CHOICE.get(tool_choice, {"type": "auto"})
        if self.extra_body:
            body.update(self.extra_body)
        return body

    async def generate(self, messages: list[Message], tools: list[dict[str, Any]], tool_choice: str | None,
                       config: GenerateConfig) -> ModelOutput:
        url = self.next_url()
        body = self.request(messages, tools, tool_choice, config)
        t0 = time.perf_counter()
        response = await self.post_json(url, "/messages", body)
        return self.to_output(response, time.perf_counter() - t0, url)

    def to_output(self, response: dict[str, Any], latency: float, url: str) -> ModelOutput:
        if response.get("type") == "error":
            err = response.get("error")
            detail = err.get("message") if isinstance(err, dict) else err
            raise InfraError(f"{_redact(url)}: the server returned an error: {detail}", retryable=True)
        blocks = response.get("content")
        if not isinstance(blocks, list):
            raise InfraError(f"{_redact(url)}: the server returned no 'content' list", retryable=True)
        texts: list[str] = []
        calls: list[ToolCall] = []
        for i, block in enumerate(blocks):
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use":
                name = str(block.get("name") or "")
                raw = block.get("input")
                calls.append(ToolCall.from_wire(str(block.get("id") or f"toolu_{i}"), name,
                                                raw if raw is not None else {}))
            elif block.get("type") == "text":
                texts.append(str(block.get("text") or ""))
        usage = response["usage"] if isinstance(response.get("usage"), dict) else {}
        cached = _int(usage.get("cache_read_input_tokens"))
        return ModelOutput(content="".join(texts) or None, tool_calls=tuple(calls),
                           usage=Usage(prompt_tokens=_int(usage.get("input_tokens")) + cached
                                       + _int(usage.get("cache_creation_input_tokens")),
                                       completion_tokens=_int(usage.get("output_tokens")),
                                       cached_prompt_tokens=cached),
                           latency_s=latency)

    async def _check_url(self, url: str) -> None:
        try:
            await super()._check_url(url)
        except ProviderError as exc:  # the shared check names OpenAI's variables in its fixes
            fix = (exc.fix or "").replace("OPENAI_API_KEY", "ANTHROPIC_API_KEY").replace(
                "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL").replace("openai:", "anthropic:")
            raise ProviderError(exc.what, where=exc.where, fix=fix or None) from None

    PROBE_PATH = "/messages"
    KEY_ENV = "ANTHROPIC_API_KEY"
    URL_ENV = "ANTHROPIC_BASE_URL"

    def probe_body(self) -> dict[str, Any]:
        return {"model": self.model, "max_tokens": 1, "messages": [{"role": "user", "content": "ping"}]}


__all__ = ["AnthropicProvider", "wire_messages"]
