"""Training data and an RL reward for variant mixtures (paper section 8).

* :func:`sft_examples` - oracle episodes over a variant mixture as chat messages + tools,
  the conversational format TRL's ``SFTTrainer`` and HF ``datasets`` read
  (``{"messages": [...], "tools": [...]}``, one JSON object per line).
* :class:`ToolEnv` - an RL environment: reset to (messages, tools), step with the
  agent's tool calls, reward = exact success at the end.
* :func:`exact_success_reward` - a GRPO reward function (TRL's ``reward_funcs``
  signature: ``fn(completions, **columns) -> list[float]``) for single-turn rollouts.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .catalog.model import Catalog, Task
from .codec import Codec, Control, Outcome
from .env import Environment
from .episode import EpisodeConfig, run_episode, system_message
from .operators.base import Call
from .providers.base import ToolCall
from .providers.oracle import OracleProvider
from .success import succeeded


def _hf_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI chat messages with tool-call arguments as objects (what HF chat templates expect)."""
    out = []
    for m in messages:
        m2 = dict(m)
        if m2.get("tool_calls"):
            m2["tool_calls"] = [
                {"type": "function", "id": c.get("id"),
                 "function": {"name": c["function"]["name"], "arguments": json.loads(c["function"]["arguments"] or "{}")}}
                for c in m2["tool_calls"]
            ]
        out.append(m2)
    return out


def sft_examples(codecs: Sequence[Codec], tasks: Sequence[Task], *, condition_instruction: bool = False
                 ) -> Iterator[dict[str, Any]]:
    """One oracle trace per task, the variant rotating over ``codecs`` (a mixture)."""
    from .episode import Condition

    cfg = EpisodeConfig(condition=Condition.INSTRUCTION if condition_instruction else Condition.BASE)
    oracle = OracleProvider()
    for i, task in enumerate(tasks):
        codec = codecs[i % len(codecs)]
        rec = asyncio.run(run_episode(task, codec, oracle, cfg))
        yield {"messages": _hf_messages(rec.messages), "tools": codec.schema(task.domain),
               "variant": codec.name, "task_id": task.id}


@dataclass
class ToolEnv:
    """One task on one variant as an RL environment (reward: exact success)."""

    codec: Codec
    task: Task
    control: Control = Control.STRICT
    config: EpisodeConfig = field(default_factory=EpisodeConfig)

    def reset(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        self.session = self.codec.session(self.task.domain, self.control)
        self.env = Environment(self.codec.catalog, self.task.domain)
        self.executed: list[Any] = []
        messages = [{"role": "system", "content": system_message(self.codec, self.codec.catalog, self.task, self.config)},
                    {"role": "user", "content": self.task.query}]
        return messages, self.codec.schema(self.task.domain)

    def step(self, tool_calls: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Apply the agent's calls (``{"name", "arguments"}``, arguments object or JSON text);
        return the tool messages to append."""
        replies = []
        for i, c in enumerate(tool_calls):
            tc = ToolCall.from_raw(str(c.get("id", f"call_{i}")), str(c.get("name", "")), c.get("arguments", {}))
            if tc.arguments is None:
                replies.append({"role": "tool", "tool_call_id": tc.id, "content": f"Error: {tc.parse_error}"})
                continue
            d = self.session.decode(Call(tc.name, tc.arguments))
            if d.outcome is Outcome.NATIVE:
                results = [self.env.execute(a) for a in d.actions]
                self.executed.extend(a for a, r in zip(d.actions, results, strict=True) if r.get("ok"))
                content = json.dumps(results[0] if len(results) == 1 else results)
            elif d.outcome is Outcome.REPLY:
                content = json.dumps(d.reply)
            else:
                content = f"Error: {d.message}"
            replies.append({"role": "tool", "tool_call_id": tc.id, "content": content})
        return replies

    def reward(self) -> float:
        return float(succeeded(self.executed, self.task.gold, self.task.meta.get("accept")))


def exact_success_reward(catalog: Catalog, codecs: Mapping[str, Codec]) -> Any:
    """A TRL GRPO reward: each completion's tool calls (structured, or recovered from text)
    are decoded on its row's variant and executed; 1.0 for exact success, else 0.0.
    The dataset needs ``task_id`` and ``variant`` columns."""
    tasks = {t.id: t for t in catalog.tasks}

    def reward(completions: Sequence[Any], task_id: Sequence[str], variant: Sequence[str], **_: Any) -> list[float]:
        scores = []
        for completion, tid, vname in zip(completions, task_id, variant, strict=True):
            env = ToolEnv(codecs[vname], tasks[tid])
            env.reset()
            env.step(_calls_of(completion))
            scores.append(env.reward())
        return scores

    return reward


def _calls_of(completion: Any) -> list[dict[str, Any]]:
    """Tool calls in a completion: a list of chat messages, one message, or plain text."""
    if isinstance(completion, str):
        from .providers.textcalls import recover_tool_calls

        calls, _ = recover_tool_calls(completion)
        return [{"name": c.name, "arguments": c.arguments if c.arguments is not None else c.raw_arguments}
                for c in calls]
    messages = completion if isinstance(completion, list) else [completion]
    out: list[dict[str, Any]] = []
    for m in messages:
        if not isinstance(m, Mapping):
            continue
        for c in m.get("tool_calls") or []:
            fn = c.get("function", c)
            out.append({"name": fn.get("name", ""), "arguments": fn.get("arguments", {})})
        if not m.get("tool_calls") and isinstance(m.get("content"), str) and m.get("role") == "assistant":
            out.extend(_calls_of(m["content"]))
    return out


__all__ = ["ToolEnv", "exact_success_reward", "sft_examples"]
