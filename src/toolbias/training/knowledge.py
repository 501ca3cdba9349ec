"""What an agent can know at a point of a conversation, and what a call uses.

A training trace may only use what the agent was told before the turn it acts in:
the system prompt, the user query, the tool list and earlier tool results. Protocol
handles (``txn_1``, ``ref_669e0f05``), discovered argument names and listed method
names exist only in tool results, so a turn that uses one must come after the
result that gave it. The user's own values (the gold actions' argument values) are
taken as known: the query conveys them.

Tokens are identifier-like strings: a call uses its tool name, every argument key
(at every depth) and every string value; the context offers every JSON key and string
(and the identifier-like words of free text). Numbers and booleans are not tokens:
no protocol hands them out.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..catalog.model import NativeAction

_WORD = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_:.\-]*")


def _add_string(text: str, out: set[str]) -> None:
    out.add(text)
    if _WORD.fullmatch(text) and text[-1] not in ".:-":
        return  # one identifier (most JSON strings and keys)
    words = _WORD.findall(text)
    out.update(words)
    # identifiers end before trailing punctuation in prose ("call set_window.")
    out.update(w.rstrip(".:-") for w in words if w[-1] in ".:-")


def _add_json(value: Any, out: set[str]) -> None:
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            _add_string(v, out)
        elif isinstance(v, Mapping):
            for k, sub in v.items():
                _add_string(str(k), out)
                stack.append(sub)
        elif isinstance(v, (list, tuple)):
            stack.extend(v)


def text_tokens(text: str) -> set[str]:
    """Tokens a message's text offers: its JSON keys and strings if it is JSON, else its words."""
    out: set[str] = set()
    try:
        _add_json(json.loads(text), out)
    except (ValueError, RecursionError):
        pass
    _add_string(text, out)
    return out


def tools_tokens(tools: Sequence[Mapping[str, Any]]) -> frozenset[str]:
    """Tokens the tool list offers (names, parameter names, enum values, description words);
    remembered while the list lives (a codec builds one list per domain and shares it)."""
    hit = _TOOLS_CACHE.get(id(tools))
    if hit is not None and hit[0] is tools:
        return hit[1]
    out: set[str] = set()
    _add_json(list(tools), out)
    if len(_TOOLS_CACHE) >= 256:
        _TOOLS_CACHE.clear()
    _TOOLS_CACHE[id(tools)] = (tools, frozenset(out))
    return _TOOLS_CACHE[id(tools)][1]


_TOOLS_CACHE: dict[int, tuple[Sequence[Mapping[str, Any]], frozenset[str]]] = {}


def gold_tokens(gold: Iterable[NativeAction]) -> set[str]:
    """The user's own values: string argument values of the gold actions, at every depth."""
    out: set[str] = set()
    stack: list[Any] = [dict(a.arguments) for a in gold]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            out.add(v)
        elif isinstance(v, Mapping):
            stack.extend(v.values())
        elif isinstance(v, (list, tuple)):
            stack.extend(v)
    return out


def call_tokens(name: str, arguments: Any) -> list[str]:
    """What a call uses: its name, every argument key and every string value."""
    out = [name]
    stack = [arguments]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, Mapping):
            for k, sub in v.items():
                out.append(str(k))
                stack.append(sub)
        elif isinstance(v, (list, tuple)):
            stack.extend(v)
    return out


def message_tokens(message: Mapping[str, Any]) -> set[str]:
    """Tokens a non-assistant message offers the agent."""
    content = message.get("content")
    return text_tokens(content) if isinstance(content, str) else set()


@dataclass(frozen=True)
class UnseenUse:
    """A token an assistant turn used before any message had given it."""

    message_index: int
    tool: str
    token: str

    def __str__(self) -> str:
        return f"message {self.message_index}: call {self.tool} uses {self.token!r} before any message gave it"


def _arguments(call: Mapping[str, Any]) -> Any:
    fn = call.get("function", call)
    args = fn.get("arguments", {})
    if isinstance(args, str):
        try:
            return json.loads(args or "{}")
        except ValueError:
            return {}
    return args


def unseen_uses(messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]],
                gold: Iterable[NativeAction]) -> list[UnseenUse]:
    """Every token an assistant turn uses that neither the user's values nor an earlier
    message (system, user, tool list, earlier tool results) gave it. Empty for a trace
    that only acts on what it was told. A call the environment refused (its tool result is
    an ``Error: ...``) acts on nothing and is not checked: a recovery example's deliberate
    mistake is such a call."""
    known = set(tools_tokens(tools)) | gold_tokens(gold)
    refused = {m.get("tool_call_id") for m in messages
               if m.get("role") == "tool" and str(m.get("content") or "").startswith("Error")}
    out: list[UnseenUse] = []
    for i, m in enumerate(messages):
        if m.get("role") != "assistant":
            known |= message_tokens(m)
            continue
        for call in m.get("tool_calls") or []:
            if call.get("id") is not None and call.get("id") in refused:
                continue
            name = str(call.get("function", call).get("name", ""))
            for token in call_tokens(name, _arguments(call)):
                if token not in known:
                    out.append(UnseenUse(i, name, token))
    return out


__all__ = ["UnseenUse", "call_tokens", "gold_tokens", "message_tokens", "text_tokens", "tools_tokens",
           "unseen_uses"]
