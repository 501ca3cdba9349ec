"""A multi-turn RL environment: one task on one variant, stepped one assistant turn at a time.

``reset()`` gives the prompt (system + user) and the variant's tools; ``step(assistant)``
takes one assistant turn (a chat message with ``tool_calls``, a list of calls, or text
whose calls are recovered the way providers recover them) and returns the tool messages
for the next turn: protocol replies (handles, reference ids, schemas) arrive in turn,
rejections come back as tool results. The episode is done when a turn has no call or the
turn limit is hit. Two protocols (:class:`~toolbias.study.paper_protocol.Protocol`, ``EnvOptions.protocol``):

* ``toolbias`` (default): every call runs through the codec session and the state engine
  exactly as a ``toolbias run`` episode does (:func:`toolbias.study.episode.apply_call`);
* ``paper``: the episode is the schema-bias artifact's, exactly as ``toolbias run --protocol
  paper`` plays it: the same :class:`~toolbias.study.paper_episode.PaperEpisode` (its prompt,
  its ``SimEnv`` answers through :class:`~toolbias.study.paper_env.PaperEnv`, hard / loose
  control for ``Control.STRICT`` / ``LENIENT``, unparseable arguments run as ``{}``, 16 turns
  and ``turns >= 16`` a livelock) and its success rule (``MatchRule.PAPER``). A policy turn is
  what the artifact's server would have parsed: structured calls, or calls recovered from text.

Rewards (:class:`Reward`), each on the protocol's own success rule:

* ``partial`` (the default): toolbias's reading of the paper's main reward. The paper (Table 13)
  names "a reward of exact success only" as an *ablation*, so its main reward gives more than
  exact success; neither the paper's text we have nor the artifact (which has no training code)
  says what. The reading: 1.0 on exact success, else ``0.5 * F1`` of the artifact's own
  per-episode ``recall`` and ``precision`` (``eval/run_agentic.py``: matched executed actions over
  ``max(1, gold)`` and over ``max(1, executed)``, matched as a multiset intersection under the
  success rule's action identity). A partly right episode earns up to 0.5, never success's 1.0;
  one with nothing right earns 0;
* ``exact`` (exact success only: Table 13's *reward ablation*): 1.0 when the multiset of
  executed native actions equals the gold, else 0.0;
* ``shaped`` (toolbias's own, not the paper's): 1.0 on exact success; otherwise
  ``0.5 * matched / max(len(gold), len(executed)) - 0.05 * min(rejections, 4)``: up to 0.5 for
  a partly right episode, each refused call (up to four) costs 0.05, so a failure scores in
  [-0.2, 0.5).

Environment ablations (paper Table 13, :class:`EnvOptions`): ``explain=False`` returns a
rejection without its explanation (the tool result is only :data:`UNEXPLAINED`, or under the
paper's protocol :data:`UNEXPLAINED_PAPER`, the artifact's error form); ``control=Control.LENIENT``
has no rejections (toolbias: an off-schema call that decodes to one native action is executed
as that action; paper: the artifact's loose control). The reward ablation "exact success only"
is ``reward="exact"``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

from ..catalog.model import Catalog, NativeAction, Task
from ..errors import ToolbiasError
from ..providers.base import Message, ToolCall
from ..study.env import Environment
from ..study.episode import Condition, EpisodeConfig, EpisodeRecord, Termination, apply_call, system_message
from ..study.paper_env import PaperCallMap, check_paper_catalog
from ..study.paper_episode import PaperEpisode
from ..study.paper_protocol import PAPER_TURN_LIMIT, Protocol
from ..study.scoring import exact_success
from ..study.success import MatchRule, action_key
from ..variants.codec import Codec, Control, Outcome

UNEXPLAINED = "Error: the call was rejected."
#: the unexplained rejection under the paper's protocol, in the artifact's error form (the artifact
#: has no such ablation; toolbias's wording)
UNEXPLAINED_PAPER = '{"error": "call rejected"}'


class Reward(str, Enum):
    """Which reward the environment gives (see the module doc)."""

    PARTIAL = "partial"  # default: toolbias's reading of the paper's main reward
    EXACT = "exact"      # exact success only: the paper's reward ablation (Table 13)
    SHAPED = "shaped"    # toolbias's own


@dataclass(frozen=True)
class EnvOptions:
    """How the environment answers and scores (see the module doc)."""

    control: Control = Control.STRICT
    explain: bool = True
    reward: Reward = Reward.PARTIAL
    turn_limit: int = PAPER_TURN_LIMIT
    instructions: bool = False
    protocol: Protocol = Protocol.TOOLBIAS

    def __post_init__(self) -> None:
        if self.turn_limit < 1:
            raise ToolbiasError(f"turn_limit must be at least 1, got {self.turn_limit}")

    @property
    def rule(self) -> MatchRule:
        """The success rule rewards are scored on: the paper's under its protocol, else exact."""
        return MatchRule.PAPER if self.protocol is Protocol.PAPER else MatchRule.EXACT

    def to_dict(self) -> dict[str, Any]:
        return {"control": self.control.value, "explain": self.explain, "reward": self.reward.value,
                "turn_limit": self.turn_limit, "instructions": self.instructions,
                **({"protocol": self.protocol.value} if self.protocol is not Protocol.TOOLBIAS else {})}


def matched_actions(executed: Sequence[NativeAction], gold: Sequence[NativeAction],
                    rule: MatchRule = MatchRule.EXACT) -> int:
    """Executed actions that are gold actions: the multiset intersection under ``rule``'s identity
    (the artifact's ``hit``)."""
    return sum((Counter(action_key(a, rule) for a in executed) & Counter(action_key(a, rule) for a in gold)).values())


def partial_reward(executed: Sequence[NativeAction], gold: Sequence[NativeAction],
                   rule: MatchRule = MatchRule.EXACT) -> float:
    """The ``partial`` reward (see the module doc): 1.0 on exact success, else half the F1 of the
    artifact's recall and precision."""
    if exact_success(executed, gold, rule):
        return 1.0
    hit = matched_actions(executed, gold, rule)
    recall, precision = hit / max(1, len(gold)), hit / max(1, len(executed))
    return 0.0 if hit == 0 else 0.5 * 2 * recall * precision / (recall + precision)


def shaped_reward(rec: EpisodeRecord, rule: MatchRule = MatchRule.EXACT) -> float:
    """The shaped reward of a finished (or running) episode (see the module doc)."""
    if exact_success(rec.executed, rec.gold, rule):
        return 1.0
    denominator = max(len(rec.gold), len(rec.executed)) or 1
    return 0.5 * matched_actions(rec.executed, rec.gold, rule) / denominator - 0.05 * min(rec.rejections, 4)


class ToolEnv:
    """One task on one variant as a multi-turn RL environment (see the module doc). Under the
    paper's protocol ``calls`` is the variant's reading as the artifact's call map (shared by the
    environments of one variant; built here when not given)."""

    def __init__(self, codec: Codec, task: Task, options: EnvOptions | None = None, *,
                 control: Control | None = None, calls: PaperCallMap | None = None) -> None:
        opts = options or EnvOptions()
        if control is not None:  # the keyword of earlier releases
            opts = replace(opts, control=control)
        self.codec = codec
        self.task = task
        self.options = opts
        self.config = EpisodeConfig(control=opts.control, turn_limit=opts.turn_limit,
                                    condition=Condition.INSTRUCTION if opts.instructions else Condition.BASE,
                                    match=opts.rule, protocol=opts.protocol)
        self.paper_calls: PaperCallMap | None = None
        if opts.protocol is Protocol.PAPER:
            check_paper_catalog(codec.catalog)
            self.paper_calls = calls or PaperCallMap(codec)
            self.paper_calls.check([task.domain])  # a variant the artifact's reading misses: refused now
        self.tools: list[dict[str, Any]] = codec.schema(task.domain)
        self.reset()

    # -- episode ---------------------------------------------------------------------
    def reset(self) -> tuple[list[Message], list[dict[str, Any]]]:
        """Start the episode again; return the prompt messages and the variant's tools."""
        self.paper: PaperEpisode | None = None
        if self.paper_calls is not None:
            self.paper = PaperEpisode(self.task, self.codec, self.config, self.paper_calls, "rl")
            self.record, self.messages = self.paper.record, self.paper.messages
        else:
            self.session = self.codec.session(self.task.domain, self.options.control)
            self.env = Environment(self.codec.catalog, self.task.domain)
            self.record = EpisodeRecord(task_id=self.task.id, domain=self.task.domain, variant=self.codec.name,
                                        model="rl", control=self.options.control.value,
                                        condition=self.config.condition.value, query=self.task.query,
                                        gold=list(self.task.gold))
            self.messages = [
                {"role": "system", "content": system_message(self.codec, self.codec.catalog, self.task, self.config)},
                {"role": "user", "content": self.task.query},
            ]
        self.done = False
        self._finished = False
        return list(self.messages), self.tools

    @property
    def executed(self) -> list[Any]:
        """The native actions executed so far."""
        return list(self.paper.env.executed) if self.paper is not None else self.record.executed

    def step(self, assistant: Mapping[str, Any] | Sequence[Mapping[str, Any]] | str) -> list[Message]:
        """Play one assistant turn; return the tool messages it gets (none when the turn had
        no call: the episode is then done)."""
        if self.done:
            raise ToolbiasError("step() after the episode ended", fix="call reset() to start again")
        calls, content = _turn_of(assistant)
        if self.paper is not None:
            replies = self.paper.play(content, calls)
            self._unexplain(replies, self.record.calls[len(self.record.calls) - len(replies):], UNEXPLAINED_PAPER)
            self.done = self.paper.done
        else:
            replies = self._step_toolbias(calls, content)
        if self.done:
            self._finish()
        return replies

    def _step_toolbias(self, calls: list[ToolCall], content: str) -> list[Message]:
        turn = self.record.turns
        self.record.turns = turn + 1
        self.messages.append({"role": "assistant", "content": content, **(
            {"tool_calls": [{"id": c.id, "type": "function",
                             "function": {"name": c.name, "arguments": c.raw_arguments}} for c in calls]}
            if calls else {})})
        replies: list[Message] = []
        for tc in calls:
            replies.append(apply_call(self.record, turn, tc, self.session, self.env))
        self._unexplain(replies, self.record.calls[len(self.record.calls) - len(replies):], UNEXPLAINED)
        self.messages.extend(replies)
        if not calls:
            self.record.termination = Termination.ANSWERED
            self.done = True
        elif self.record.turns >= self.options.turn_limit:
            self.record.termination = Termination.TURN_LIMIT
            self.done = True
        return replies

    def _unexplain(self, replies: list[Message], calls: Sequence[Any], text: str) -> None:
        """The no-explanation ablation: each refused call's tool message says only ``text``."""
        if self.options.explain:
            return
        for reply, call in zip(replies, calls, strict=True):
            if call.decoded is None or call.decoded.outcome is Outcome.REJECTION:
                reply["content"] = text

    def _finish(self) -> None:
        if not self._finished:
            if self.paper is not None:
                self.paper.finish()
            else:
                self.record.flags.extend(self.session.finish())
                self.record.messages = self.messages
            self._finished = True

    def reward(self) -> float:
        """The episode's reward so far (final once ``done``), on the protocol's success rule."""
        rule, executed = self.options.rule, self.executed
        if self.options.reward is Reward.SHAPED:
            return shaped_reward(replace(self.record, executed=executed), rule)
        if self.options.reward is Reward.PARTIAL:
            return partial_reward(executed, self.task.gold, rule)
        return float(exact_success(executed, self.task.gold, rule))


def exact_success_reward(catalog: Catalog, codecs: Mapping[str, Codec], options: EnvOptions | None = None) -> Any:
    """A TRL reward function for completions generated without the environment (earlier
    releases' single-turn GRPO): each completion's assistant turns are played in a fresh
    :class:`ToolEnv` of its row's ``task_id`` and ``variant``, and the environment's reward comes
    back (the name is earlier releases': the reward is ``options.reward``, ``partial`` by default;
    ``EnvOptions(reward=Reward.EXACT)`` gives exact success only). A completion cannot read protocol replies this way (it could only guess handles), so
    protocol variants need the multi-turn :class:`~toolbias.training.grpo.Rollout` with
    ``env_reward`` instead."""
    tasks = {t.id: t for t in catalog.tasks}
    paper = options is not None and options.protocol is Protocol.PAPER
    maps = {name: PaperCallMap(c) for name, c in codecs.items()} if paper else {}

    def reward(completions: Sequence[Any], task_id: Sequence[str], variant: Sequence[str], **_: Any) -> list[float]:
        scores = []
        for completion, tid, name in zip(completions, task_id, variant, strict=True):
            env = ToolEnv(codecs[name], tasks[tid], options, calls=maps.get(name))
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


__all__ = ["UNEXPLAINED", "UNEXPLAINED_PAPER", "EnvOptions", "Reward", "ToolEnv", "exact_success_reward",
           "matched_actions", "partial_reward", "shaped_reward"]
