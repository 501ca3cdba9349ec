"""Replay recorded responses: ``replay:FILE.jsonl`` of episode records (``toolbias export``).

Each episode's assistant messages are returned in order, keyed by (variant, task id),
so a recorded study re-scores exactly without a model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ProviderError
from .base import GenerateConfig, Message, ModelAPI, ModelOutput, ToolCall

if TYPE_CHECKING:
    from ..catalog.model import Task
    from ..variants.codec import Codec


class ReplayProvider(ModelAPI):
    cpu_bound = True  # plays from memory: worker processes may share its episodes

    def __init__(self, arg: str = "", **options: Any) -> None:
        if not arg:
            raise ProviderError("the replay model needs a file of recorded episodes", fix="use replay:FILE.jsonl")
        self.spec = f"replay:{Path(arg).stem}"
        self.turns: dict[tuple[str, str], list[Message]] = {}
        try:
            lines = Path(arg).read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            raise ProviderError("recording not found", where=arg, fix="check the path") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ProviderError(f"cannot read the recording: {exc}", where=arg,
                                fix="record with `toolbias export --format jsonl`") from None
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                rec = rec.get("record", rec)
                msgs = [m for m in rec["messages"] if m.get("role") == "assistant"]
                for m in msgs:  # checked now, so a bad line stops the run before any episode
                    for c in m.get("tool_calls") or []:
                        fn = c.get("function") if isinstance(c, dict) else None
                        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
                            raise TypeError("each tool call needs a function with a string name")
                self.turns[(rec["variant"], rec["task_id"])] = msgs
            except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
                detail = f"missing {exc}" if isinstance(exc, KeyError) else str(exc)
                raise ProviderError(f"not an episode record ({detail})", where=f"{arg}:{n}",
                                    fix="record with `toolbias export --format jsonl`") from None

    def for_episode(self, task: Task, codec: Codec) -> ModelAPI:
        return _ReplayEpisode(self.spec, self.turns.get((codec.name, task.id), []))

    async def generate(self, messages: list[Message], tools: list[dict[str, Any]], tool_choice: str | None,
                       config: GenerateConfig) -> ModelOutput:
        return ModelOutput(content="Done.")


class _ReplayEpisode(ModelAPI):
    def __init__(self, spec: str, turns: list[Message]) -> None:
        self.spec = spec
        self.turns = turns
        self.i = 0

    async def generate(self, messages: list[Message], tools: list[dict[str, Any]], tool_choice: str | None,
                       config: GenerateConfig) -> ModelOutput:
        if self.i >= len(self.turns):
            return ModelOutput(content="Done.")
        m = self.turns[self.i]
        self.i += 1
        calls = tuple(ToolCall.from_raw(c.get("id", f"call_{j}"), c["function"]["name"],
                                        c["function"].get("arguments"))
                      for j, c in enumerate(m.get("tool_calls") or []))
        return ModelOutput(content=m.get("content"), tool_calls=calls)
