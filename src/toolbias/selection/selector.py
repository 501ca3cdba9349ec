"""An offline, rule-driven selection model: ``chooser:RULE`` drives ``select run`` without a model.

It reads the candidates from the request the way a model would (the ``tools`` list, the
function list of the ToolBench prompt, the numbered list of the ``text`` presentation, or
the filter prompt's candidates) and answers in the form the presentation asks for (a tool
call, ``Action: <name>``, or the bare name; a JSON list as a filter).

Rules (``chooser:RULE``):

- ``first`` / ``last``: the first / last listed candidate (pure position bias);
- ``position=N``: the N-th listed candidate (1-based; the last when N > k);
- ``contains=TEXT``: the first listed candidate whose name contains TEXT (case-insensitive),
  else the first listed one (pure API bias towards TEXT);
- ``random`` or ``random=SEED``: uniform at random, seeded by SEED, the request and the
  sampling seed, so a re-run gives the same answers and runs with different seeds differ.

As a filter (mitigation) it keeps every candidate, or with ``contains=TEXT`` only those whose
name contains TEXT (possibly none: an empty filter answer).
"""

from __future__ import annotations

import ast
import hashlib
import json
import random
import re
from dataclasses import dataclass
from typing import Any

from ..errors import ProviderError
from ..providers.base import GenerateConfig, Message, ModelAPI, ModelOutput, ToolCall
from .toolbench import FUNCTIONS_INTRO

RULES = ("first", "last", "position=N", "contains=TEXT", "random[=SEED]")
_LIST_LINE = re.compile(r"^\s*(\d+)\. ([A-Za-z0-9_\-]+):", re.M)
_PAPER_FILTER_INTRO = "\nThese are the APIs: "
FILTER_MARKERS = ("You filter tools for a user request.", "You are an API subset selector.")


@dataclass(frozen=True)
class Rule:
    kind: str
    arg: str = ""

    @classmethod
    def parse(cls, text: str) -> Rule:
        kind, _, arg = text.partition("=")
        kind = kind.strip().lower()
        if kind in ("first", "last") and not arg:
            return cls(kind)
        if kind == "position" and arg.strip().isdigit() and int(arg) >= 1:
            return cls(kind, arg.strip())
        if kind == "contains" and arg:
            return cls(kind, arg)
        if kind == "random" and (not arg or arg.strip().lstrip("-").isdigit()):
            return cls(kind, arg.strip() or "0")
        raise ProviderError(f"unknown chooser rule '{text}'", where=f"chooser:{text}",
                            fix=f"use chooser:RULE with RULE one of {', '.join(RULES)}")


def _python_list(text: str, intro: str) -> list[str]:
    """Names from the Python ``str()`` of a function list that follows ``intro`` (literal data only)."""
    at = text.rfind(intro)
    if at < 0:
        return []
    body = text[at + len(intro):].strip()
    end = body.rfind("]")
    try:
        value = ast.literal_eval(body[: end + 1])
    except (ValueError, SyntaxError):
        return []
    return [str(f.get("name")) for f in value if isinstance(f, dict) and f.get("name")] if isinstance(value, list) \
        else []


def candidates(messages: list[Message], tools: list[dict[str, Any]]) -> list[str]:
    """The candidate names a request lists, in listed order (ToolBench's Finish left out)."""
    if tools:
        names = [str(t.get("function", t).get("name", "")) for t in tools]
    else:
        text = "\n".join(str(m.get("content") or "") for m in messages)
        names = (_python_list(text, FUNCTIONS_INTRO) or _python_list(text, _PAPER_FILTER_INTRO)
                 or [m.group(2) for m in _LIST_LINE.finditer(text)])
    return [n for n in names if n and n != "Finish"]


def _is_filter(messages: list[Message]) -> bool:
    """A filter request: this project's filter system prompt, or the paper's (inside its one user turn)."""
    texts = [str(m.get("content") or "") for m in messages]
    return any(t.startswith(FILTER_MARKERS) or t.startswith(f"System: {FILTER_MARKERS[1]}") for t in texts)


class SelectorModel(ModelAPI):
    """``chooser:RULE``: answers every selection request by a fixed rule (see the module doc)."""

    cpu_bound = True

    def __init__(self, arg: str = "", **options: Any) -> None:
        self.rule = Rule.parse(arg or "first")
        self.spec = f"chooser:{arg or 'first'}"
        self.calls = 0

    def settings(self) -> dict[str, Any]:
        return {"spec": self.spec}

    def pick(self, names: list[str], messages: list[Message], config: GenerateConfig) -> int:
        r = self.rule
        if r.kind == "first":
            return 0
        if r.kind == "last":
            return len(names) - 1
        if r.kind == "position":
            return min(int(r.arg), len(names)) - 1
        if r.kind == "contains":
            return next((i for i, n in enumerate(names) if r.arg.casefold() in n.casefold()), 0)
        digest = hashlib.sha256(json.dumps([r.arg, config.seed, messages], sort_keys=True, default=str)
                                .encode()).hexdigest()
        return random.Random(int(digest[:16], 16)).randrange(len(names))

    async def generate(self, messages: list[Message], tools: list[dict[str, Any]], tool_choice: str | None,
                       config: GenerateConfig) -> ModelOutput:
        self.calls += 1
        names = candidates(messages, tools)
        if _is_filter(messages):
            keep = [n for n in names if self.rule.kind != "contains" or self.rule.arg.casefold() in n.casefold()]
            return ModelOutput(content=json.dumps(keep))
        if not names:
            return ModelOutput(content="I see no tool to choose from.")
        name = names[self.pick(names, messages, config)]
        if tools:
            return ModelOutput(content=None, tool_calls=(ToolCall(f"call_{self.calls}", name, {}),))
        if FUNCTIONS_INTRO in "".join(str(m.get("content") or "") for m in messages):
            return ModelOutput(content=f"Thought: I will use {name}.\nAction: {name}\nAction Input: {{}}")
        return ModelOutput(content=name)


#: provider kinds that play schema-bias episodes (a task's gold or recording) and cannot choose among tools
EPISODE_ONLY_KINDS = ("oracle", "scripted", "replay")


def make_selection_model(spec: str, **options: Any) -> ModelAPI:
    """The model a spec names for tool selection: ``chooser:RULE`` here, any provider otherwise
    (``oracle``, ``scripted:`` and ``replay:`` are refused with the offline alternative)."""
    kind, _, arg = spec.partition(":")
    if kind == "chooser":
        return SelectorModel(arg)
    if kind in EPISODE_ONLY_KINDS:
        raise ProviderError(f"the {kind} model plays schema-bias episodes (a task's gold or a recording) and "
                            "has no selection to make", where=f"model spec '{spec}'",
                            fix="for an offline selection run use chooser:first, chooser:contains=TEXT or "
                                "chooser:random=SEED")
    from ..providers import make_provider

    return make_provider(spec, **options)
