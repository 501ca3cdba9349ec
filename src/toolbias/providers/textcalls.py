"""Recover tool calls that a model wrote as plain text.

Servers without a tool parser (llama.cpp without ``--jinja``, vLLM without
``--tool-call-parser``, Ollama with some templates) hand back the model's call as
text. :func:`recover_tool_calls` finds them, in this order:

1. Hermes blocks ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``
   (Qwen, Hermes, many fine-tunes). Lenient: several blocks, a missing closing
   tag, ``arguments`` as an object or a JSON string, ``parameters`` instead of
   ``arguments``, a code fence inside the block.
2. Fenced code blocks (```` ```json ... ``` ````) holding a call or a list of calls.
3. Bare JSON in the text: a call object ``{"name": ..., "arguments": ...}``, an
   OpenAI-shaped ``{"function": {"name": ..., "arguments": ...}}``, or a list of them
   (also after Mistral's ``[TOOL_CALLS]`` marker or Llama's ``<|python_tag|>``).

Bare and fenced JSON count only when it is shaped like a call (a string ``name``
plus ``arguments``/``parameters``), so prose with JSON in it is left alone. A
Hermes block whose body is not valid JSON still becomes a call, with a
``parse_error`` (the episode hands that back to the model as data).

Nothing here raises or evaluates code: text goes through :mod:`json` only.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from .base import ToolCall

#: texts longer than this are scanned only up to here (bounds the work on hostile input)
MAX_SCAN_CHARS = 100_000
#: at most this many places in the text are tried as the start of bare JSON
MAX_JSON_ATTEMPTS = 2_000
#: at most this many calls are recovered from one text
MAX_CALLS = 64

_HERMES_OPEN = re.compile(r"<tool_call>", re.IGNORECASE)
_HERMES_CLOSE = re.compile(r"</tool_call>", re.IGNORECASE)
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+\-]*)[ \t]*\n?(.*?)(?:```|\Z)", re.DOTALL)
_NAME_GUESS = re.compile(r"""["']name["']\s*:\s*["']([^"'\\]{1,200})["']""")
_MARKERS = ("[TOOL_CALLS]", "<|python_tag|>")
_ARG_KEYS = ("arguments", "parameters", "args", "input")

_decoder = json.JSONDecoder()
_THINK = re.compile(r"<think>.*?</think>", re.S | re.I)
_JSON_FENCE = re.compile(r"```(?:json)?")
_JSON_START = re.compile(r"[\[{]")


def strip_reasoning(text: str) -> str:
    """The answer without ``<think>...</think>`` blocks."""
    return _THINK.sub("", text).strip()


def first_json(text: str | None) -> Any:
    """The first JSON object or array in a model's answer (its reasoning and code fences left out),
    or None: an answer asked for as JSON, read as data."""
    body = _JSON_FENCE.sub("", strip_reasoning(text or ""))[:MAX_SCAN_CHARS]
    for n, m in enumerate(_JSON_START.finditer(body)):
        if n >= MAX_JSON_ATTEMPTS:
            break
        try:
            return _decoder.raw_decode(body, m.start())[0]
        except (ValueError, RecursionError):
            continue
    return None


@dataclass
class Recovery:
    """What :func:`find_tool_calls` found: the calls, the text left over, and how each was written."""

    calls: list[ToolCall] = field(default_factory=list)
    remaining: str = ""
    #: one entry per call: "hermes", "fenced" or "json"
    formats: list[str] = field(default_factory=list)


def recover_tool_calls(text: str | None) -> tuple[list[ToolCall], str]:
    """Find tool calls written as text. Returns ``(calls, remaining_text)``; never raises."""
    found = find_tool_calls(text)
    return found.calls, found.remaining


def calls_in_text(content: str | None, tools: list[dict[str, Any]], tool_choice: str | None) -> Recovery | None:
    """For a server's answer without structured calls: the calls its ``content`` writes as text
    (a model served without a tool parser), when tools were offered and not turned off; else None."""
    if not tools or tool_choice == "none" or not isinstance(content, str) or not content:
        return None
    found = find_tool_calls(content)
    return found if found.calls else None


def find_tool_calls(text: str | None, *, id_prefix: str = "call_") -> Recovery:
    """Like :func:`recover_tool_calls`, also saying which format each call used."""
    if not isinstance(text, str) or not text:
        return Recovery(remaining=text if isinstance(text, str) else "")
    try:
        return _find(text, id_prefix)
    except Exception:  # noqa: BLE001 - the contract is "never raises"; fall back to no calls
        return Recovery(remaining=text)


# --------------------------------------------------------------------------- internals


def _find(text: str, id_prefix: str) -> Recovery:
    scan = text[:MAX_SCAN_CHARS]
    rest = text[MAX_SCAN_CHARS:]
    out = Recovery()

    def add(raw: Any, fmt: str) -> bool:
        call = _to_call(raw, f"{id_prefix}{len(out.calls)}")
        if call is None or len(out.calls) >= MAX_CALLS:
            return False
        out.calls.append(call)
        out.formats.append(fmt)
        return True

    # 1. Hermes <tool_call> blocks
    spans = _hermes_spans(scan)
    if spans:
        for _, _, body in spans:
            for value, ok in _hermes_values(body):
                if ok:
                    for item in value if isinstance(value, list) else [value]:
                        if not add(item, "hermes"):
                            add(_Invalid(body, "the <tool_call> block is not a call object with a 'name'"), "hermes")
                else:
                    add(value, "hermes")
        out.remaining = _cut(scan, [(s, e) for s, e, _ in spans]) + rest
        out.remaining = _HERMES_CLOSE.sub("", out.remaining).strip()
        return out

    # 2. fenced blocks holding a call or a list of calls
    cut: list[tuple[int, int]] = []
    for m in _FENCE.finditer(scan):
        value = _loads(m.group(2).strip())
        if value is _NOTHING:
            continue
        items = value if isinstance(value, list) else [value]
        if items and all(_is_call_shaped(v) for v in items):
            for item in items:
                add(item, "fenced")
            cut.append((m.start(), m.end()))
    if out.calls:
        out.remaining = (_cut(scan, cut) + rest).strip()
        return out

    # 3. bare JSON calls anywhere in the text
    i = attempts = 0
    while i < len(scan) and len(out.calls) < MAX_CALLS and attempts < MAX_JSON_ATTEMPTS:
        j = _next_open(scan, i)
        if j < 0:
            break
        attempts += 1
        try:
            value, end = _decoder.raw_decode(scan, j)
        except (ValueError, RecursionError):
            i = j + 1
            continue
        items = value if isinstance(value, list) else [value]
        if items and all(_is_call_shaped(v) for v in items):
            for item in items:
                add(item, "json")
            start = j
            for marker in _MARKERS:  # swallow a marker right before the JSON
                k = scan.rfind(marker, 0, j)
                if k >= 0 and scan[k + len(marker):j].strip() == "":
                    start = k
            cut.append((start, end))
            i = end
        else:
            i = j + 1
    out.remaining = (_cut(scan, cut) + rest).strip() if out.calls else text
    return out


class _Nothing:
    pass


_NOTHING = _Nothing()


@dataclass
class _Invalid:
    """A Hermes block that could not be read as a call: becomes a ToolCall with a parse_error."""

    body: str
    reason: str


def _hermes_spans(text: str) -> list[tuple[int, int, str]]:
    """(start, end, body) for each <tool_call> block; a block ends at its closing tag,
    at the next opening tag, or at the end of the text."""
    opens = [m for m in _HERMES_OPEN.finditer(text)]
    spans = []
    for n, m in enumerate(opens):
        limit = opens[n + 1].start() if n + 1 < len(opens) else len(text)
        close = _HERMES_CLOSE.search(text, m.end(), limit)
        if close:
            spans.append((m.start(), close.end(), text[m.end():close.start()]))
        else:
            spans.append((m.start(), limit, text[m.end():limit]))
    return spans


def _hermes_values(body: str) -> list[tuple[Any, bool]]:
    """The JSON value(s) in one block: [(value, True)] or [(_Invalid, False)]."""
    stripped = body.strip()
    fence = _FENCE.fullmatch(stripped)
    if fence:
        stripped = fence.group(2).strip()
    if not stripped:
        return [(_Invalid(body, "empty <tool_call> block"), False)]
    value = _loads(stripped)
    if value is not _NOTHING:
        return [(value, True)]
    # leading/trailing junk around one object: take the first JSON value that parses
    j = _next_open(stripped, 0)
    if j >= 0:
        try:
            value, _ = _decoder.raw_decode(stripped, j)
            return [(value, True)]
        except (ValueError, RecursionError):
            pass
        # cut off before its closing braces (max_tokens, a missing tag): close them
        repaired = _close_brackets(stripped[j:])
        if repaired is not None:
            value = _loads(repaired)
            if value is not _NOTHING:
                return [(value, True)]
    try:
        json.loads(stripped)
    except (ValueError, RecursionError) as exc:
        reason = f"the <tool_call> block is not valid JSON: {exc}"
    else:  # pragma: no cover - _loads already failed
        reason = "the <tool_call> block is not valid JSON"
    return [(_Invalid(body, reason), False)]


def _close_brackets(text: str) -> str | None:
    """``text`` with its unclosed ``{``/``[`` closed, or None when it ends inside a string."""
    stack: list[str] = []
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]":
            if not stack or stack.pop() != ch:
                return None
    if in_string or not stack:
        return None
    return text.rstrip().rstrip(",") + "".join(reversed(stack))


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return _NOTHING


def _next_open(text: str, start: int) -> int:
    a = text.find("{", start)
    b = text.find("[", start)
    if a < 0:
        return b
    if b < 0:
        return a
    return min(a, b)


def _unwrap(value: Any) -> Any:
    """OpenAI shapes {"type": "function", "function": {...}} and {"function": {...}} -> the inner call."""
    if isinstance(value, dict) and isinstance(value.get("function"), dict):
        return value["function"]
    return value


def _is_call_shaped(value: Any) -> bool:
    value = _unwrap(value)
    return (isinstance(value, dict) and isinstance(value.get("name"), str) and bool(value["name"].strip())
            and any(k in value for k in _ARG_KEYS))


def _to_call(value: Any, call_id: str) -> ToolCall | None:
    if isinstance(value, _Invalid):
        guess = _NAME_GUESS.search(value.body)
        name = guess.group(1).strip() if guess else ""
        return ToolCall(call_id, name, None, value.body.strip()[:10000], value.reason)
    value = _unwrap(value)
    if not isinstance(value, dict):
        return None
    name = value.get("name")
    if not isinstance(name, str) or not name.strip():
        return None
    raw: Any = {}
    for key in _ARG_KEYS:
        if key in value:
            raw = value[key]
            break
    if raw is None:
        raw = {}
    return ToolCall.from_raw(call_id, name.strip(), raw)


def _cut(text: str, spans: list[tuple[int, int]]) -> str:
    if not spans:
        return text
    parts, pos = [], 0
    for start, end in sorted(spans):
        if start < pos:
            start = pos
        parts.append(text[pos:start])
        pos = max(pos, end)
    parts.append(text[pos:])
    return re.sub(r"\n{3,}", "\n\n", "".join(parts))
