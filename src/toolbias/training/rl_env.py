"""A multi-turn RL environment: one task on one variant, stepped one assistant turn at a time.

``reset()`` gives the prompt (system + user) and the variant's tools; ``step(assistant)``
takes one assistant turn (a chat message with ``tool_calls``, a list of calls, or text
whose calls are recovered the way providers recover them), runs every call through the
codec session and the state engine exactly as an evaluation episode does
(:func:`toolbias.study.episode.apply_call`), and returns the tool messages for the next turn:
protocol replies (handles, reference ids, schemas) arrive in turn, rejections come back
as tool results. The episode is done when a turn has no call or the turn limit is hit.

Rewards (:class:`Reward`):

* ``exact`` (exact success only: paper Table 13's *reward ablation*, not its main reward):
  1.0 when the multiset of executed native actions equals the gold, else 0.0. It is the
  default only because the paper's main reward is not defined in the paper's text nor in the
  artifact's repository (which has no training code), so toolbias cannot reproduce it;
* ``shaped`` (ours, documented here): 1.0 on exact success; otherwise
  ``0.5 * matched / max(len(gold), len(executed)) - 0.05 * min(rejections, 4)``, where
  ``matched`` counts executed actions that are gold actions (multiset intersection, the
  scoring's normalisation). A partly right episode earns up to 0.5, each refused call
  (up to four) costs 0.05, so a failure scores in [-0.2, 0.5) and never reaches success.

Environment ablations (paper Table 13, :class:`EnvOptions`): ``explain=False`` returns a
rejection without its explanation (the tool result is only ``Error: the call was
rejected.``); ``control=Control.LENIENT`` has no rejections: an off-schema call that
decodes to one native action is executed as that action. The reward ablation "exact
success only" is ``reward="exact"``, today's default (see above).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from ..catalog.model import Catalog, Task
from ..errors import ToolbiasError
from ..providers.base import Message, ToolCall
from ..study.env import Environment
from ..study.episode import Condition, EpisodeConfig, EpisodeRecord, Termination, apply_call, system_message
from ..study.scoring import action_key, exact_success
from ..variants.codec import Codec, Control, Outcome

UNEXPLAINED = "Error: the call was rejected."


class Reward(str, Enum):
    EXACT = "exact"
    SHAPED = "shaped"


@dataclass(frozen=True)
class EnvOptions:
    """How the environment answers and scores (see the module doc)."""

    control: Control = Control.STRICT
    explain: bool = True
    reward: Reward = Reward.EXACT
    turn_limit: int = 16
    instructions: bool = False

    def __post_init__(self) -> None:
        if self.turn_limit < 1:
            raise ToolbiasError(f"turn_limit must be at least 1, got {self.turn_limit}")

    def to_dict(self) -> dict[str, Any]:
        return {"control": self.control.value, "explain": self.explain, "reward": self.reward.value,
                "turn_limit": self.turn_limit, "instructions": self.instructions}


def shaped_reward(rec: EpisodeRecord) -> float:
    """The shaped reward of a finished (or running) episode (see the module doc)."""
    if exact_success(rec.executed, rec.gold):
        return 1.0
    matched = sum((Counter(map(action_key, rec.executed)) & Counter(map(action_key, rec.gold))).values())
    denominator = max(len(rec.gold), len(rec.executed)) or 1
    return 0.5 * matched / denominator - 0.05 * min(rec.rejections, 4)


class ToolEnv:
    """One task on one variant as a multi-turn RL environment (see the module doc)."""

    def __init__(self, codec: Codec, task: Task, options: EnvOptions | None = None, *,
                 control: Control | None = None) -> None:
        opts = options or EnvOptions()
        if control is not None:  # the keyword of earlier releases
            opts = EnvOptions(control, opts.explain, opts.reward, opts.turn_limit, opts.instructions)
        self.codec = codec
        self.task = task
        self.options = opts
        self.config = EpisodeConfig(control=opts.control, turn_limit=opts.turn_limit,
                                    condition=Condition.INSTRUCTION if opts.instructions else Condition.BASE)
        self.tools: list[dict[str, Any]] = codec.schema(task.domain)
        self.reset()

    # -- episode ---------------------------------------------------------------------
    def reset(self) -> tuple[list[Message], list[dict[str, Any]]]:
        """Start the episode again; return the prompt messages and the variant's tools."""
        self.session = self.codec.session(self.task.domain, self.options.control)
        self.env = Environment(self.codec.catalog, self.task.domain)
        self.record = EpisodeRecord(task_id=self.task.id, domain=self.task.domain, variant=self.codec.name,
                                    model="rl", control=self.options.control.value,
                                    condition=self.config.condition.value, query=self.task.query,
                                    gold=list(self.task.gold))
        self.messages: list[Message] = [
            {"role": "system", "content": system_message(self.codec, self.codec.catalog, self.task, self.config)},
            {"role": "user", "content": self.task.query},
        ]
        self.done = False
        self._finished = False
        return list(self.messages), self.tools

    @property
    def executed(self) -> list[Any]:
        return self.record.executed

    def step(self, assistant: Mapping[str, Any] | Sequence[Mapping[str, Any]] | str) -> list[Message]:
        """Play one assistant turn; return the tool messages it gets (none when the turn had
        no call: the episode is then done)."""
        if self.done:
            raise ToolbiasError("step() after the episode ended", fix="call reset() to start again")
        turn = self.record.turns
        calls, content = _turn_of(assistant)
        self.record.turns = turn + 1
        self.messages.append({"role": "assistant", "content": content, **(
            {"tool_calls": [{"id": c.id, "type": "function",
                             "function": {"name": c.name, "arguments": c.raw_arguments}} for c in calls]}
            if calls else {})})
        replies: list[Message] = []
        for tc in calls:
            message = apply_call(self.record, turn, tc, self.session, self.env)
            last = self.record.calls[-1]
            refused = last.decoded is None or last.decoded.outcome is Outcome.REJECTION
            if refused and not self.options.explain:
                message = {**message, "content": UNEXPLAINED}
            replies.append(message)
        self.messages.extend(replies)
        if not calls:
            self.record.termination = Termination.ANSWERED
            self.done = True
        elif self.record.turns >= self.options.turn_limit:
            self.record.termination = Termination.TURN_LIMIT
            self.done = True
        if self.done:
            self._finish()
        return replies

    def _finish(self) -> None:
        if not self._finished:
            self.record.flags.extend(self.session.finish())
            self.record.messages = self.messages
            self._finished = True

    def reward(self) -> float:
        """The episode's reward so far (final once ``done``)."""
        if self.options.reward is Reward.SHAPED:
            return shaped_reward(self.record)
        return float(exact_success(self.record.executed, self.task.gold))


def exact_success_reward(catalog: Catalog, codecs: Mapping[str, Codec], options: EnvOptions | None = None) -> Any:
    """A TRL reward function for completions generated without the environment (earlier
    releases' single-turn GRPO): each completion's assistant turns are played in a fresh
    :class:`ToolEnv` of its row's ``task_id`` and ``variant``, and the environment's reward comes
    back. A completion cannot read protocol replies this way (it could only guess handles), so
    protocol variants need the multi-turn :class:`~toolbias.training.grpo.Rollout` with
    ``env_reward`` instead."""
    tasks = {t.id: t for t in catalog.tasks}

    def reward(completions: Sequence[Any], task_id: Sequence[str], variant: Sequence[str], **_: Any) -> list[float]:
        scores = []
        for completion, tid, name in zip(completions, task_id, variant, strict=True):
            env = ToolEnv(codecs[name], tasks[tid], options)
            turns = completion if isinstance(completion, list) else [completion]
            for turn in turns:
                if env.done:
                    break
                if isinstance(turn, str) or turn.get("role", "assistant") == "assistant":
                    env.step(turn)
            scores.append(env.reward())
        return scores

    return reward


def _turn_of(assistant: Any) -> tuple[list[ToolCall], str]:
    """The calls and the text of one assistant turn: a message (structured ``tool_calls``, else
    calls recovered from its text, which then leave the text), a list of ``{"name", "arguments"}``
    calls, or plain text."""
    if isinstance(assistant, str) or (isinstance(assistant, Mapping) and not assistant.get("tool_calls")):
        from ..providers.textcalls import recover_tool_calls

        text = assistant if isinstance(assistant, str) else str(assistant.get("content") or "")
        calls, remaining = recover_tool_calls(text)
        return list(calls), remaining if calls else text
    if isinstance(assistant, Mapping):
        return _turn_of(list(assistant["tool_calls"]))[0], str(assistant.get("content") or "")
    out = []
    for i, c in enumerate(assistant):
        fn = c.get("function", c) if isinstance(c, Mapping) else {}
        out.append(ToolCall.from_raw(str(c.get("id") or f"call_{i}") if isinstance(c, Mapping) else f"call_{i}",
                                     str(fn.get("name", "")), fn.get("arguments", {})))
    return out, ""


__all__ = ["UNEXPLAINED", "EnvOptions", "Reward", "ToolEnv", "exact_success_reward", "shaped_reward"]
