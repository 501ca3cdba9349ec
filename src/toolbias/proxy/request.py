"""What a chat request may carry through the proxy, checked before any work.

Every field of a ``POST /v1/chat/completions`` body is one of three kinds:

- **handled** by the proxy itself (:data:`HANDLED`): the conversation (``messages``,
  ``tools``, ``tool_choice``), how the answer is sent (``stream``, ``stream_options``) and
  the sampling settings the proxy maps onto each upstream request. Each is checked here
  (type and range), so ``"stream": "false"``, ``max_tokens: -5``, ``temperature: NaN`` or a
  ``tool_choice`` naming a tool the request does not carry is a 400 that says which field is
  wrong, not a request served some other way;
- **refused** (:data:`REFUSED`): what the proxy cannot honour under a variant: log
  probabilities (they would be the variant's tokens, over several upstream rounds, not the
  agent's calls), ``n`` > 1, and the legacy ``functions`` / ``function_call`` (they would
  reach the model as the agent's native tools, bypassing the variant);
- **forwarded** (everything else: ``stop``, ``response_format``, ``parallel_tool_calls``,
  ``presence_penalty``, ``frequency_penalty``, ``logit_bias``, ``user``,
  ``reasoning_effort``, a server's own extensions such as ``top_k`` ...): sent as they are on
  every upstream request of the turn, because the client meant the model to see them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any


class ProxyError(Exception):
    """An error the client receives as ``{"error": {...}}`` with an HTTP status."""

    def __init__(self, status: int, message: str, kind: str = "invalid_request_error",
                 code: str | None = None, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.kind, self.code, self.param = status, message, kind, code, param

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}


#: fields the proxy reads itself (never forwarded as they are)
HANDLED = frozenset({"model", "messages", "tools", "tool_choice", "stream", "stream_options", "n", "temperature",
                     "top_p", "seed", "max_tokens", "max_completion_tokens"})

#: field -> why the proxy refuses it (when set to anything but its neutral value)
REFUSED = {
    "logprobs": "log probabilities are not served under a variant: they would be those of the variant's calls, "
                "over several upstream requests, not of the native calls the agent receives",
    "top_logprobs": "log probabilities are not served under a variant (see 'logprobs')",
    "functions": "the legacy 'functions' field is not served: the model would see the agent's native functions, "
                 "bypassing the variant; send them as 'tools'",
    "function_call": "the legacy 'function_call' field is not served; send 'tool_choice' with 'tools'",
}

#: number fields: (lowest, highest) allowed, both inclusive
_RANGES: dict[str, tuple[float, float]] = {
    "temperature": (0.0, 2.0), "top_p": (0.0, 1.0), "presence_penalty": (-2.0, 2.0),
    "frequency_penalty": (-2.0, 2.0)}


def _bad(field: str, message: str, code: str = "invalid_request") -> ProxyError:
    return ProxyError(400, f"'{field}': {message}", code=code, param=field)


def _number(body: Mapping[str, Any], field: str) -> None:
    value = body.get(field)
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _bad(field, f"must be a finite number, not {value!r}", "invalid_sampling")
    low, high = _RANGES[field]
    if not low <= value <= high:
        raise _bad(field, f"must be between {low:g} and {high:g}, not {value!r}", "invalid_sampling")


def _integer(body: Mapping[str, Any], field: str, low: int | None) -> None:
    value = body.get(field)
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise _bad(field, f"must be an integer, not {value!r}", "invalid_sampling")
    if low is not None and value < low:
        raise _bad(field, f"must be at least {low}, not {value}", "invalid_sampling")


def check_request(body: Mapping[str, Any]) -> None:
    """Raise a 400 :class:`ProxyError` naming the first field of a chat request that is
    malformed or that the proxy cannot honour (see the module docstring)."""
    for field in ("stream", "parallel_tool_calls"):
        if body.get(field) is not None and not isinstance(body[field], bool):
            raise _bad(field, f"must be true or false, not {body[field]!r}")
    options = body.get("stream_options")
    if options is not None and (not isinstance(options, Mapping)
                                or not isinstance(options.get("include_usage", False), bool)):
        raise _bad("stream_options", f"must be an object like {{\"include_usage\": true}}, not {options!r}")
    for field in _RANGES:
        _number(body, field)
    for field in ("max_tokens", "max_completion_tokens"):
        _integer(body, field, 1)
    _integer(body, "seed", None)
    _integer(body, "n", 1)
    if body.get("user") is not None and not isinstance(body["user"], str):
        raise _bad("user", f"must be a string, not {body['user']!r}")
    tools = body.get("tools")
    if tools:
        if body.get("n") not in (1, None):
            raise _bad("n", "the variant proxy serves n=1 only", "unsupported_n")
        for field, why in REFUSED.items():
            if body.get(field) not in (None, False, 0):
                raise _bad(field, why, "unsupported_field")
    else:
        for field in ("functions", "function_call"):
            if body.get(field) is not None:
                raise _bad(field, REFUSED[field], "unsupported_field")
    if tools is not None and not isinstance(tools, list):
        raise _bad("tools", f"must be a list of tools, not {type(tools).__name__}")
    check_tool_choice(body.get("tool_choice"), tools or [])


def check_tool_choice(value: Any, tools: Sequence[Any]) -> None:
    """A tool_choice is ``auto``, ``none``, ``required`` or names one of the request's tools."""
    if value is None or value in ("auto", "none", "required"):
        return
    from .codecs import tool_names

    name = None
    if isinstance(value, Mapping):
        fn = value.get("function")
        name = fn.get("name") if isinstance(fn, Mapping) else value.get("name")
    if not isinstance(name, str):
        raise _bad("tool_choice", f"must be 'auto', 'none', 'required' or "
                                  f"{{\"type\": \"function\", \"function\": {{\"name\": ...}}}}, not {value!r}",
                   "invalid_tool_choice")
    known = tool_names(tools)
    if tools and name not in known:
        raise _bad("tool_choice", f"names the tool {name!r}, which is not among the request's tools "
                                  f"({', '.join(sorted(n for n in known if n)) or 'none'})", "invalid_tool_choice")


def forwarded(body: Mapping[str, Any]) -> dict[str, Any]:
    """The fields sent to the upstream as they are (neither handled nor refused; null ones dropped)."""
    return {k: v for k, v in body.items() if k not in HANDLED and k not in REFUSED and v is not None}


__all__ = ["HANDLED", "ProxyError", "REFUSED", "check_request", "check_tool_choice", "forwarded"]
