"""``POST /v1/responses``: the OpenAI Responses API in front of the same variant proxy.

A Responses request is rewritten as the chat-completions request it means and served by
:meth:`VariantProxy.chat` (requests with tools: the variant shown upstream, native calls
back) or passed through to the upstream's chat completions (requests without tools); the
chat answer is written back as a Responses ``response`` object. So the two routes share one
variant semantics: conversations, protocol calls, rejections, the store's ``live`` rows.

- ``instructions`` becomes the first system message; ``input`` (a string, or a list of
  items) becomes messages: role messages (``input_text`` / ``output_text`` parts joined),
  ``function_call`` items an assistant turn's ``tool_calls`` and ``function_call_output``
  items ``tool`` messages; ``reasoning`` items are dropped;
- ``tools`` in the Responses form are read by the one tool reader
  (:mod:`toolbias.catalog.formats`); ``tool_choice`` keeps its meaning; ``max_output_tokens``
  is ``max_tokens``;
- ``"stream": true``: the whole answer (decoded whole, as calls must be complete to decode them) is
  sent as the API's server-sent events (created, output items with one delta each, completed);
- refused with a 400 that says why: ``previous_response_id`` (the proxy keeps no server-side
  conversations: send the whole ``input``) and items of other types (hosted tools' calls).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from .service import ProxyError

_SAMPLING = {"temperature": "temperature", "top_p": "top_p", "max_output_tokens": "max_tokens", "model": "model",
             "tool_choice": "tool_choice", "parallel_tool_calls": "parallel_tool_calls", "user": "user",
             "service_tier": "service_tier", "prompt_cache_key": "prompt_cache_key",
             "safety_identifier": "safety_identifier", "top_logprobs": "top_logprobs"}
#: fields read below, or without effect on the answer (the proxy keeps nothing server-side: ``store``)
_READ = {"input", "instructions", "tools", "stream", "reasoning", "text", "previous_response_id", "store", "metadata",
         "include", "stream_options"}
#: fields accepted only at their neutral value
_NEUTRAL = {"truncation": ("disabled",), "background": (False,)}


def _text(content: Any, where: str) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list):
        parts = []
        for i, part in enumerate(content):
            if isinstance(part, dict) and part.get("type") in ("input_text", "output_text", "text"):
                parts.append(str(part.get("text") or ""))
            elif isinstance(part, dict) and part.get("type") == "refusal":
                parts.append(str(part.get("refusal") or ""))
            else:
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise ProxyError(400, f"{where}.content[{i}]: content part of type {kind!r} is not served "
                                      "(text parts only)", code="unsupported_content")
        return "".join(parts)
    raise ProxyError(400, f"{where}.content must be a string or a list of parts", code="invalid_input")


def chat_request(body: Any) -> dict[str, Any]:
    """The chat-completions request a Responses request means (raises :class:`ProxyError`)."""
    if not isinstance(body, Mapping):
        raise ProxyError(400, "the request body must be a JSON object", code="invalid_json")
    if body.get("previous_response_id"):
        raise ProxyError(400, "previous_response_id is not served: the variant proxy keeps no conversations on "
                              "the server; send the whole conversation in 'input' (and store: false)",
                         code="unsupported_previous_response_id")
    messages: list[dict[str, Any]] = []
    if body.get("instructions"):
        messages.append({"role": "system", "content": _text(body["instructions"], "instructions")})
    items = body.get("input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    if not isinstance(items, list) or not items:
        raise ProxyError(400, "'input' must be a string or a non-empty list of items", code="invalid_input")
    for i, item in enumerate(items):
        where = f"input[{i}]"
        if not isinstance(item, dict):
            raise ProxyError(400, f"{where} must be an object", code="invalid_input")
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            if role not in ("user", "assistant", "system", "developer"):
                raise ProxyError(400, f"{where}: unknown role {role!r}", code="invalid_input")
            messages.append({"role": "system" if role == "developer" else role,
                             "content": _text(item.get("content"), where)})
        elif kind == "function_call":
            call = {"id": str(item.get("call_id") or item.get("id") or f"call_{i}"), "type": "function",
                    "function": {"name": str(item.get("name") or ""), "arguments": item.get("arguments") or "{}"}}
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant":  # the text and calls of one turn
                last.setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            output = item.get("output")
            messages.append({"role": "tool", "tool_call_id": str(item.get("call_id") or ""),
                             "content": output if isinstance(output, str) else _text(output, where)
                             if isinstance(output, list) else json.dumps(output)})
        elif kind == "reasoning":
            continue
        else:
            raise ProxyError(400, f"{where}: input item of type {kind!r} is not served (messages, function_call "
                                  "and function_call_output items only)", code="unsupported_input_item")
    out: dict[str, Any] = {"messages": messages}
    for key, chat_key in _SAMPLING.items():
        if body.get(key) is not None:
            out[chat_key] = body[key]
    if body.get("tools"):
        out["tools"] = body["tools"]
    if body.get("stream") is not None:
        out["stream"] = body["stream"]
    if isinstance(out.get("tool_choice"), Mapping) and "function" not in out["tool_choice"]:
        out["tool_choice"] = {"type": "function", "function": {"name": out["tool_choice"].get("name")}}
    out.update(_reasoning_and_text(body))
    for key, value in body.items():
        if value is None or key in _SAMPLING or key in _READ or (key in _NEUTRAL and value in _NEUTRAL[key]):
            continue
        raise ProxyError(400, f"'{key}': this Responses field is not served by the variant proxy"
                              + (f" (only {_NEUTRAL[key][0]!r})" if key in _NEUTRAL else ""),
                         code="unsupported_field", param=key)
    return out


def _reasoning_and_text(body: Mapping[str, Any]) -> dict[str, Any]:
    """``reasoning.effort`` and ``text.format`` / ``text.verbosity`` in their chat-completions form."""
    out: dict[str, Any] = {}
    reasoning, text = body.get("reasoning"), body.get("text")
    if reasoning is not None:
        if not isinstance(reasoning, Mapping) or any(v is not None for k, v in reasoning.items() if k != "effort"):
            raise ProxyError(400, "'reasoning': only {\"effort\": ...} is served (no summaries)",
                             code="unsupported_field", param="reasoning")
        if reasoning.get("effort") is not None:
            out["reasoning_effort"] = reasoning["effort"]
    if text is not None:
        if not isinstance(text, Mapping) or set(text) - {"format", "verbosity"}:
            raise ProxyError(400, "'text': only 'format' and 'verbosity' are served", code="unsupported_field",
                             param="text")
        fmt = text.get("format")
        if isinstance(fmt, Mapping) and fmt.get("type") == "json_schema":
            out["response_format"] = {"type": "json_schema", "json_schema": {
                k: fmt[k] for k in ("name", "schema", "strict", "description") if k in fmt}}
        elif isinstance(fmt, Mapping) and fmt.get("type") == "json_object":
            out["response_format"] = {"type": "json_object"}
        elif fmt is not None and not (isinstance(fmt, Mapping) and fmt.get("type") == "text"):
            raise ProxyError(400, f"'text.format': unknown format {fmt!r} (text, json_object or json_schema)",
                             code="invalid_request", param="text")
        if text.get("verbosity") is not None:
            out["verbosity"] = text["verbosity"]
    return out


def response_object(result: Mapping[str, Any], body: Mapping[str, Any], n: int) -> dict[str, Any]:
    """A chat completion as a Responses ``response`` object."""
    choice = result["choices"][0]
    message = choice.get("message") or {}
    output: list[dict[str, Any]] = []
    if message.get("content"):
        output.append({"type": "message", "id": f"msg_tb{n}", "role": "assistant", "status": "completed",
                       "content": [{"type": "output_text", "text": message["content"], "annotations": []}]})
    for j, call in enumerate(message.get("tool_calls") or []):
        fn = call.get("function") or {}
        args = fn.get("arguments")
        output.append({"type": "function_call", "id": f"fc_tb{n}_{j}", "call_id": call.get("id"),
                       "name": fn.get("name"), "status": "completed",
                       "arguments": args if isinstance(args, str) else json.dumps(args or {})})
    usage = result.get("usage") or {}
    incomplete = choice.get("finish_reason") == "length"
    out: dict[str, Any] = {
        "id": f"resp_tb{n}", "object": "response", "created_at": int(result.get("created") or time.time()),
        "status": "incomplete" if incomplete else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None, "error": None,
        "model": result.get("model") or body.get("model"), "output": output,
        "parallel_tool_calls": body.get("parallel_tool_calls", True), "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools") or [], "instructions": body.get("instructions"),
        "temperature": body.get("temperature"), "top_p": body.get("top_p"),
        "max_output_tokens": body.get("max_output_tokens"), "store": False,
        "usage": {"input_tokens": int(usage.get("prompt_tokens") or 0),
                  "output_tokens": int(usage.get("completion_tokens") or 0),
                  "total_tokens": int(usage.get("total_tokens") or 0),
                  "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}},
    }
    if "toolbias" in result:
        out["toolbias"] = result["toolbias"]
    return out


def response_events(response: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A whole response as the server-sent events of a stream (``"stream": true``): created, each
    output item added, its text or arguments in one delta, done, and completed with the response."""
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {**response, "status": "in_progress", "output": [],
                                                  "usage": None}}]
    for i, item in enumerate(response["output"]):
        if item["type"] == "message":
            events.append({"type": "response.output_item.added", "output_index": i,
                           "item": {**item, "status": "in_progress", "content": []}})
            for k, part in enumerate(item["content"]):
                common = {"item_id": item["id"], "output_index": i, "content_index": k}
                events += [{"type": "response.content_part.added", **common, "part": {**part, "text": ""}},
                           {"type": "response.output_text.delta", **common, "delta": part["text"], "logprobs": []},
                           {"type": "response.output_text.done", **common, "text": part["text"], "logprobs": []},
                           {"type": "response.content_part.done", **common, "part": part}]
        else:
            common = {"item_id": item["id"], "output_index": i}
            events += [{"type": "response.output_item.added", "output_index": i,
                        "item": {**item, "status": "in_progress", "arguments": ""}},
                       {"type": "response.function_call_arguments.delta", **common, "delta": item["arguments"]},
                       {"type": "response.function_call_arguments.done", **common, "name": item["name"],
                        "arguments": item["arguments"]}]
        events.append({"type": "response.output_item.done", "output_index": i, "item": item})
    done = "response.incomplete" if response["status"] == "incomplete" else "response.completed"
    events.append({"type": done, "response": response})
    return [{**e, "sequence_number": n} for n, e in enumerate(events)]


__all__ = ["chat_request", "response_events", "response_object"]
