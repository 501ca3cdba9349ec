"""Shared helpers for the selection tests: scripted selection models (no tests here)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from tests.support.paths import SHARED_DATA
from toolbias.providers.base import GenerateConfig, InfraError, Message, ModelAPI, ModelOutput, ToolCall
from toolbias.selection.mitigate import FILTER_SYSTEM

SHARED = SHARED_DATA / "biasbusters"
SHARED_REASON = f"BiasBusters data not found at {SHARED} (../shared/data/biasbusters)"

#: policy(presented names, query) -> index into the presented names (or a raw text answer)
Policy = Callable[[Sequence[str], str], "int | str"]

_LIST_LINE = re.compile(r"^(\d+)\. ([A-Za-z0-9_\-]+):", re.M)


def always_first(names: Sequence[str], query: str) -> int:
    return 0


def always_tool(tool: str) -> Policy:
    def policy(names: Sequence[str], query: str) -> int:
        return list(names).index(tool) if tool in names else 0
    return policy


def always_named(prefer: Callable[[str], bool]) -> Policy:
    """The first presented name for which ``prefer`` holds (else position 0)."""
    def policy(names: Sequence[str], query: str) -> int:
        return next((i for i, n in enumerate(names) if prefer(n)), 0)
    return policy


class ChooserModel(ModelAPI):
    """A scripted selection model: in the tools presentation it calls the tool ``policy`` picks; in the text
    presentation it answers the list number (or ``answer_style="name"``: the name). As a filter (the
    filter system prompt) it returns the candidates ``keep`` accepts, as JSON."""

    def __init__(self, policy: Policy, *, spec: str = "test:chooser", answer_style: str = "number",
                 keep: Callable[[str], bool] | None = None, fail_first: int = 0) -> None:
        self.policy = policy
        self.spec = spec
        self.answer_style = answer_style
        self.keep = keep
        self.fail_first = fail_first
        self.calls: list[dict[str, Any]] = []

    async def generate(self, messages: list[Message], tools: list[dict[str, Any]], tool_choice: str | None,
                       config: GenerateConfig) -> ModelOutput:
        self.calls.append({"messages": messages, "tools": tools, "tool_choice": tool_choice, "config": config})
        if self.fail_first > 0:
            self.fail_first -= 1
            raise InfraError("scripted outage")
        system = messages[0]["content"]
        user = messages[-1]["content"]
        if system == FILTER_SYSTEM:
            names = [m.group(2) for m in _LIST_LINE.finditer(user)]
            keep = self.keep or (lambda n: True)
            return ModelOutput(content=json.dumps({"tools": [n for n in names if keep(n)]}))
        if tools:
            names = [t["function"]["name"] for t in tools]
            pick = self.policy(names, user)
            if isinstance(pick, str):
                return ModelOutput(content=pick)
            return ModelOutput(content=None, tool_calls=(ToolCall(f"call_{len(self.calls)}", names[pick], {}),))
        query = user.split("\n", 1)[0].removeprefix("Request: ")
        names = [m.group(2) for m in _LIST_LINE.finditer(user)]
        pick = self.policy(names, query)
        if isinstance(pick, str):
            return ModelOutput(content=pick)
        return ModelOutput(content=str(pick + 1) if self.answer_style == "number" else f"`{names[pick]}`")
