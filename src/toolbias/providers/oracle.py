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
    from ..variants.codec import Codec


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
    """Multi-turn tasks (``meta["gold_turns"]``: gold calls per user turn) get each turn's share
    after that turn's user message. The gold is encoded as one sequence (protocol state such as
    transaction ids runs on across turns) and cut where each turn's actions end."""

    def __init__(self, task: Task, codec: Codec) -> None:
        self.spec = "oracle"
        counts = list(task.meta.get("gold_turns") or [len(task.gold)])
        self.turns: list[list[Any]] = []
        done, at = 0, 0
        for n in counts:
            at += n
            calls = codec.encode(task.gold[:at]) if len(counts) > 1 else codec.encode(task.gold)
            self.turns.append(calls[done:])
            done = len(calls)
        self.sent: set[int] = set()
        #: what the task needs said to the user (tau2-bench's communicate_info), if anything
        self.answer = str(task.meta.get("oracle_answer") or "Done.")

    async def generate(self, messages: list[Message], tools: list[dict[str, Any]], tool_choice: str | None,
                       config: GenerateConfig) -> ModelOutput:
        turn = sum(1 for m in messages if m.get("role") == "user") - 1
        if turn in self.sent or not 0 <= turn < len(self.turns) or not self.turns[turn]:
            return ModelOutput(content=self.answer)
        self.sent.add(turn)
        calls = tuple(ToolCall(f"call_{i}" if turn == 0 else f"call_{turn}_{i}", c.name, dict(c.arguments), json.dumps(c.arguments))
                      for i, c in enumerate(self.turns[turn]))
        return ModelOutput(content=None, tool_calls=calls)
