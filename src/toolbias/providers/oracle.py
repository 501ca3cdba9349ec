"""The oracle: plays the task's gold actions through the codec's ``encode``.

It must score 100% on every variant: the end-to-end equivalence check. All encoded
calls go out in the first turn (parallel calls are decoded in order, and protocol
ids are deterministic), then it answers without a call.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from .base import GenerateConfig, Message, ModelAPI, ModelOutput, ToolCall

if TYPE_CHECKING:
    from ..catalog.model import Task
    from ..codec import Codec


class OracleProvider(ModelAPI):
    cpu_bound = True  # plays from memory: worker processes may share its episodes

    def __init__(self, arg: str = "", **options: Any) -> None:
        self.spec = "oracle"

    def for_episode(self, task: Task, codec: Codec) -> ModelAPI:
        return _OracleEpisode(task, codec)

    async def generate(self, messages: list[Message], tools: list[dict[str, Any]], tool_choice: str | None,
                       config: GenerateConfig) -> ModelOutput:
        return ModelOutput(content="The oracle needs a task: run it through an episode.")


class _OracleEpisode(ModelAPI):
    def __init__(self, task: Task, codec: Codec) -> None:
        self.spec = "oracle"
        self.calls = codec.encode(task.gold)
        self.sent = False
        #: what the task needs said to the user (tau2-bench's communicate_info), if anything
        self.answer = str(task.meta.get("oracle_answer") or "Done.")

    async def generate(self, messages: list[Message], tools: list[dict[str, Any]], tool_choice: str | None,
                       config: GenerateConfig) -> ModelOutput:
        if self.sent:
            return ModelOutput(content=self.answer)
        self.sent = True
        calls = tuple(ToolCall(f"call_{i}", c.name, dict(c.arguments), json.dumps(c.arguments))
                      for i, c in enumerate(self.calls))
        return ModelOutput(content=None, tool_calls=calls)
