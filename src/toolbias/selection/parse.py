"""Exact parsing of a model's selection: a whole tool name or a list index, never a substring.

The original BiasBusters code matched names as substrings, so an answer naming
``forward_geocode`` also counted as ``geocode`` (1-9% of selections mislabelled).
Here a name matches only as a whole token: the characters around it must not be
name characters (``[A-Za-z0-9_-]``). Anything that does not identify exactly one
candidate is *unparsed*, with a reason; it is recorded, counted and left out of
the denominators of every rate.

Accepted forms, in order (the first that applies decides):

1. a function call (tools presentation): the called names must all be one candidate;
2. the whole answer, stripped of quotes, backticks, markdown emphasis and a final
   period, is a candidate name (exact, then case-insensitive) or a list number
   (``3``, ``#3``, ``3.``, ``(3)``, ``[3]``, ``option 3``, ``tool 3``);
3. a JSON object with ``tool``/``name``/``api``/``choice`` (a name) or ``index``/
   ``number`` (a list number);
4. an explicit choice phrase (``answer: 3``, ``I choose tool 2``, ``selected: NAME``);
5. exactly one distinct candidate name occurring as a whole token in the text.

Reasoning inside ``<think>...</think>`` is ignored.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..providers.base import ModelOutput
from ..providers.textcalls import strip_reasoning

NAME_CHARS = "A-Za-z0-9_\\-"
_STRIP = " \t\r\n'\"`*_.:;!,()[]{}<>"
_INDEX_FORMS = re.compile(r"^(?:(?:option|tool|choice|number|no\.?|api|#)\s*)?#?\s*(\d{1,3})\s*$", re.I)
_CHOICE_PHRASE = re.compile(
    r"\b(?:answer|choice|choose|chose|select|selected|selection|pick|picked|use|using|final)\s*"
    r"(?:is|would be|will be|:|=|-)?\s*(?:tool|option|number|api)?\s*(?:#|no\.?)?\s*[`'\"*]*"
    r"([A-Za-z0-9_\-]+)", re.I)


@dataclass(frozen=True)
class Parsed:
    """A parsed answer: ``index`` is the 0-based position in the presented list, or None."""

    index: int | None
    via: str = ""
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.index is not None


def _whole_token(name: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![{NAME_CHARS}]){re.escape(name)}(?![{NAME_CHARS}])")


def match_name(candidate: str, names: Sequence[str]) -> int | None:
    """Index of the name ``candidate`` is, exactly, then case-insensitively (names differ in more than case)."""
    for i, n in enumerate(names):
        if candidate == n:
            return i
    folded = candidate.casefold()
    hits = [i for i, n in enumerate(names) if n.casefold() == folded]
    return hits[0] if len(hits) == 1 else None


def _index(text: str, k: int) -> int | None:
    m = _INDEX_FORMS.match(text.strip())
    if m:
        n = int(m.group(1))
        if 1 <= n <= k:
            return n - 1
    return None


_clean = strip_reasoning


def parse_text(text: str | None, names: Sequence[str], *, allow_index: bool = True) -> Parsed:
    """Parse a free-text answer against the presented names (in presented order, numbered from 1)."""
    if text is None or not text.strip():
        return Parsed(None, reason="empty answer")
    body = _clean(text)
    if not body:
        return Parsed(None, reason="only reasoning, no answer")
    k = len(names)
    whole = body.strip(_STRIP)
    # 2. the whole answer is a name or a number
    hit = match_name(whole, names)
    if hit is not None:
        return Parsed(hit, via="name")
    if allow_index:
        hit = _index(body.strip(" \t\r\n'\"`*.:)]}(["), k)
        if hit is not None:
            return Parsed(hit, via="index")
    # 3. a JSON object
    parsed_json = _parse_json(body, names, k, allow_index)
    if parsed_json is not None:
        return parsed_json
    # 4. an explicit choice phrase
    choices = set()
    for m in _CHOICE_PHRASE.finditer(body):
        token = m.group(1)
        hit = match_name(token, names)
        if hit is None and allow_index and token.isdigit() and 1 <= int(token) <= k:
            hit = int(token) - 1
        if hit is not None:
            choices.add(hit)
    if len(choices) == 1:
        return Parsed(choices.pop(), via="phrase")
    # 5. exactly one whole-token name in the text
    found = {i for i, n in enumerate(names) if _whole_token(n).search(body)}
    if not found:
        folded = body.casefold()
        found = {i for i, n in enumerate(names) if _whole_token(n.casefold()).search(folded)}
    if len(found) == 1:
        return Parsed(found.pop(), via="mention")
    if len(found) > 1:
        return Parsed(None, reason=f"ambiguous: names {sorted(names[i] for i in found)}")
    return Parsed(None, reason="no candidate name or list number in the answer")


def _parse_json(body: str, names: Sequence[str], k: int, allow_index: bool) -> Parsed | None:
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        value = json.loads(body[start:end + 1])
    except (json.JSONDecodeError, RecursionError):
        return None
    if not isinstance(value, dict):
        return None
    for key in ("tool", "name", "api", "choice", "selection", "tool_name"):
        v = value.get(key)
        if isinstance(v, str):
            hit = match_name(v.strip(), names)
            if hit is not None:
                return Parsed(hit, via="json")
            if allow_index:
                idx = _index(v, k)
                if idx is not None:
                    return Parsed(idx, via="json")
            return Parsed(None, reason=f"JSON names unknown tool '{v[:80]}'")
        if isinstance(v, int) and allow_index and 1 <= v <= k:
            return Parsed(v - 1, via="json")
    if allow_index:
        for key in ("index", "number", "option"):
            v = value.get(key)
            if isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= k:
                return Parsed(v - 1, via="json")
    return None


def parse_output(output: ModelOutput, names: Sequence[str], presentation: str) -> Parsed:
    """Parse a model output for either presentation.

    ``tools``: the called function names decide (several calls must all name one tool);
    without a call the text is parsed by name only (list numbers mean nothing there).
    ``text``: the answer text is parsed by name or list number.
    """
    if presentation == "tools":
        calls = [c.name for c in output.tool_calls]
        if calls:
            hits = [match_name(n.strip(), names) for n in calls]
            if any(h is None for h in hits):
                bad = next(n for n, h in zip(calls, hits, strict=True) if h is None)
                return Parsed(None, reason=f"called unknown tool '{bad[:80]}'")
            distinct = set(hits)
            if len(distinct) > 1:
                return Parsed(None, reason=f"called several tools: {sorted(set(calls))}")
            only = distinct.pop()
            return Parsed(only, via="call")
        parsed = parse_text(output.content, names, allow_index=False)
        if parsed.ok:
            return Parsed(parsed.index, via=f"text-{parsed.via}")
        return Parsed(None, reason=f"no tool call; {parsed.reason}")
    if presentation == "text":
        return parse_text(output.content, names, allow_index=True)
    raise ValueError(f"unknown presentation '{presentation}'")
