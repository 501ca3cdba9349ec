"""A scripted model for tests and demos: returns given turns (tool calls or text).

Script format (JSON file for ``scripted:FILE``, or a dict/callable in Python)::

    {"default": [TURN, ...], "tasks": {"<task id>": [TURN, ...]}}
    TURN = {"content": "text", "tool_calls": [{"name": "...", "arguments": {...} or "raw json"}]}

When a task's turns run out, the model answers "Done." without a call. A callable
script ``fn(task, codec, messages, turn) -> TURN`` computes turns instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base.jsonfile import read_json
from ..errors import ProviderError
from .base import GenerateConfig, InfraError, Message, ModelAPI, ModelOutput, ToolCall

if TYPE_CHECKING:
    from ..catalog.model import Task
    from ..variants.codec import Codec

Turn = Mapping[str, Any]
ScriptFn = Callable[[Any, Any, list[Message], int], Turn | None]


def output_from_turn(turn: Turn | None) -> ModelOutput:
    if turn is None:
        return ModelOutput(content="Done.")
    if turn.get("infra_error"):  # a provider failure; "retryable": false for one that would recur
        raise InfraError(str(turn["infra_error"]), retryable=bool(turn.get("retryable", True)))
    calls = tuple(ToolCall.from_raw(c.get("id", f"call_{i}"), str(c.get("name", "")), c.get("arguments", {}))
                  for i, c in enumerate(turn.get("tool_calls", [])))
    return ModelOutput(content=turn.get("content"), tool_calls=calls)


SCRIPT_FIX = ('write {"default": [TURN, ...], "tasks": {"<task id>": [TURN, ...]}} with '
              'TURN = {"content": "...", "tool_calls": [{"name": "...", "arguments": {...}}]} '
              'or {"infra_error": "...", "retryable": false}')


def check_script(script: Any, where: str) -> None:
    """Raise ProviderError naming the place of the first malformed part of a script
    (checked when loaded, so a bad script stops the run before any episode)."""
    if not isinstance(script, Mapping):
        raise ProviderError(f"a script must be a JSON object, got {type(script).__name__}", where=where, fix=SCRIPT_FIX)
    tasks = script.get("tasks", {})
    if not isinstance(tasks, Mapping):
        raise ProviderError("'tasks' must map task ids to lists of turns", where=f"{where}: tasks", fix=SCRIPT_FIX)
    lists = [("default", script.get("default", []))] + [(f"tasks.{k}", v) for k, v in tasks.items()]
    for path, turns in lists:
        if not isinstance(turns, list):
            raise ProviderError("must be a list of turns", where=f"{where}: {path}", fix=SCRIPT_FIX)
        for i, turn in enumerate(turns):
            at = f"{where}: {path}[{i}]"
            if not isinstance(turn, Mapping):
                raise ProviderError(f"a turn must be an object, got {type(turn).__name__}", where=at, fix=SCRIPT_FIX)
            calls = turn.get("tool_calls", [])
            if not isinstance(calls, list) or not all(isinstance(c, Mapping) for c in calls):
                raise ProviderError("'tool_calls' must be a list of {name, arguments} objects", where=at,
                                    fix=SCRIPT_FIX)


class ScriptedProvider(ModelAPI):
    def __init__(self, arg: str = "", *, script: Mapping[str, Any] | ScriptFn | None = None,
                 name: str | None = None, **options: Any) -> None:
        if script is None:
            if not arg:
                raise ProviderError("the scripted model needs a script", fix="use scripted:FILE.json")
            script = read_json(arg, error=ProviderError)
        if not callable(script):
            check_script(script, arg or "<script>")
        self.script = script
        self.spec = name or (f"scripted:{Path(arg).stem}" if arg else "scripted")
        # a script of data plays from memory, so worker processes may share its episodes; a
        # callable is the caller's code, whose effects (counters, I/O) belong in this process
        self.cpu_bound = not callable(script)

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
