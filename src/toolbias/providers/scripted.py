"""A scripted model for tests and demos: returns given turns (tool calls or text).

Script format (JSON file for ``scripted:FILE``, or a dict/callable in Python)::

    {"default": [TURN, ...], "tasks": {"<task id>": [TURN, ...]}}
    TURN = {"content": "text", "tool_calls": [{"name": "...", "arguments": {...} or "raw json"}]}

When a task's turns run out, the model answers "Done." without a call. A callable
script ``fn(task, codec, messages, turn) -> TURN`` computes turns instead.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ProviderError
from .base import GenerateConfig, InfraError, Message, ModelAPI, ModelOutput, ToolCall

if TYPE_CHECKING:
    from ..catalog.model import Task
    from ..codec import Codec

Turn = Mapping[str, Any]
ScriptFn = Callable[[Any, Any, list[Message], int], Turn | None]


def output_from_turn(turn: Turn | None) -> ModelOutput:
    if turn is None:
        return ModelOutput(content="Done.")
    if turn.get("infra_error"):
        raise InfraError(str(turn["infra_error"]))
    calls = tuple(ToolCall.from_raw(c.get("id", f"call_{i}"), str(c.get("name", "")), c.get("arguments", {}))
                  for i, c in enumerate(turn.get("tool_calls", [])))
    return ModelOutput(content=turn.get("content"), tool_calls=calls)


class ScriptedProvider(ModelAPI):
    def __init__(self, arg: str = "", *, script: Mapping[str, Any] | ScriptFn | None = None,
                 name: str | None = None, **options: Any) -> None:
        if script is None:
            if not arg:
                raise ProviderError("the scripted model needs a script", fix="use scripted:FILE.json")
            try:
                script = json.loads(Path(arg).read_text(encoding="utf-8"))
            except FileNotFoundError:
                raise ProviderError("script file not found", where=arg) from None
            except json.JSONDecodeError as exc:
                raise ProviderError(f"invalid JSON: {exc.msg}", where=f"{arg}:{exc.lineno}") from None
        self.script = script
        self.spec = name or (f"scripted:{Path(arg).stem}" if arg else "scripted")

    def for_episode(self, task: Task, codec: Codec) -> ModelAPI:
        return _ScriptedEpisode(self, task, codec)

    async def generate(self, messages: list[Message], tools: list[dict[str, Any]], tool_choice: str | None,
                       config: GenerateConfig) -> ModelOutput:
        return ModelOutput(content="Done.")


class _ScriptedEpisode(ModelAPI):
    def __init__(self, parent: ScriptedProvider, task: Task, codec: Codec) -> None:
        self.spec = parent.spec
        self.parent, self.task, self.codec = parent, task, codec
        self.turn = 0

    async def generate(self, messages: list[Message], tools: list[dict[str, Any]], tool_choice: str | None,
                       config: GenerateConfig) -> ModelOutput:
        script = self.parent.script
        turn_no = self.turn
        self.turn += 1
        if callable(script):
            return output_from_turn(script(self.task, self.codec, messages, turn_no))
        turns = script.get("tasks", {}).get(self.task.id, script.get("default", []))
        return output_from_turn(turns[turn_no] if turn_no < len(turns) else None)
