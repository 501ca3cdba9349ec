"""The episode loop of the paper's protocol: what the artifact's ``eval/run_agentic.py`` (and its
whole-catalog runners) do with one query, on toolbias's providers and records.

Per model turn (at most ``turn_limit``, 16 by default): one request with the system prompt of
:func:`~toolbias.study.paper_protocol.paper_system_prompt`, the query as the user message and every
earlier turn; an answer without a tool call ends the episode. Calls are the API's tool calls
only: calls the provider recovered from the answer's text (a server without a tool parser, or
bare and fenced JSON from the embedded model) are not calls to the artifact, so such an answer
ends the episode with its text as written (counted as ``ignored_text_calls``). A call the server
sent without an id is named ``call_<turn>_<i>`` (turn from 1), as the artifact names it.
Otherwise the assistant message
(its text or ``""``, its calls with their argument text as the model wrote it) and one tool
message per call (``{"role": "tool", "tool_call_id", "content"}``, nothing else) are appended;
arguments that do not parse as a JSON object are executed as ``{}`` and counted. Calls are
answered by :class:`~toolbias.study.paper_env.PaperEnv`. An episode that used every turn (the
artifact's ``turns >= MAX_TURNS``, even if the last turn answered) is a livelock:
``Termination.TURN_LIMIT``.

The record is toolbias's :class:`~toolbias.study.episode.EpisodeRecord`; its ``paper`` field keeps
what the artifact reports besides the actions: ``n_calls``, ``n_rejected``, ``flags``,
``argument_parse_errors``, ``livelock`` and ``ignored_text_calls``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from ..catalog.model import Task
from ..providers.base import InfraError, Message, ModelAPI, ModelOutput, ToolCall
from ..variants.codec import Codec, Control
from ..variants.instructions import variant_instructions
from .episode import CallRecord, Condition, EpisodeConfig, EpisodeRecord, Termination
from .paper_env import PaperCallMap, PaperEnv
from .paper_protocol import Runner, paper_system_prompt, runner_of
from .paper_turns import paper_arguments, paper_turn
from .success import MatchRule


def paper_system(codec: Codec, task: Task, config: EpisodeConfig) -> str:
    """The episode's system message; the ``instruction`` condition adds the variant's instructions
    as the artifact's extra note (``SYN_NOTE``)."""
    note = " ".join(variant_instructions(codec)) if config.condition is Condition.INSTRUCTION else None
    return paper_system_prompt(codec.catalog.domain(task.domain).system, runner_of(codec.name), note or None)


class PaperEpisode:
    """One paper-protocol episode, played one model turn at a time: the state and bookkeeping of
    :func:`run_paper_episode`'s loop (which feeds it a model's answers) and of the RL environment
    under ``--protocol paper`` (:class:`toolbias.training.rl_env.ToolEnv`, which feeds it a policy's
    turns). ``messages`` is the conversation so far (the next request's), ``tools`` the variant's
    tools, ``done`` whether the episode is over; :meth:`finish` gives the record."""

    def __init__(self, task: Task, codec: Codec, config: EpisodeConfig, calls: PaperCallMap, model: str) -> None:
        self.config = config
        # the whole-catalog runners qualify native names by class: an unknown name run under loose
        # control is unqualified there (domain ""), and never matches the gold
        agentic = runner_of(codec.name) is Runner.AGENTIC
        hard = config.control is Control.STRICT
        self.env = PaperEnv(calls.reader(task.domain, hard), task.domain, hard,
                            unknown_domain=None if agentic else "")
        self.tools: list[dict[str, Any]] = codec.schema(task.domain)
        self.record = EpisodeRecord(task_id=task.id, domain=task.domain, variant=codec.name, model=model,
                                    control=config.control.value, condition=config.condition_label,
                                    query=task.query, gold=list(task.gold), match=MatchRule.PAPER.value)
        self.messages: list[Message] = [{"role": "system", "content": paper_system(codec, task, config)},
                                        {"role": "user", "content": task.query}]
        self.record.messages = self.messages
        #: model turns begun (a turn whose request failed counts: the artifact's ``turns``)
        self.turns = 0
        self.parse_errors = 0
        #: calls a provider recovered from an answer's text, left unread (:func:`paper_turn`)
        self.text_calls = 0
        self.infra = False
        self.done = config.turn_limit < 1

    def play(self, content: str | None, tool_calls: Sequence[ToolCall]) -> list[Message]:
        """One model turn: its text and calls. Returns the tool messages it got (none when it made no
        call: the episode is then over, as it is once every turn is used)."""
        self.turns += 1
        self.record.turns = self.turns
        assistant: Message = {"role": "assistant", "content": content or ""}
        self.messages.append(assistant)
        if not tool_calls:  # the transcript's last turn; no request follows it
            self.done = True
            return []
        assistant["tool_calls"] = [{"id": c.id, "type": "function",
                                    "function": {"name": c.name, "arguments": c.raw_arguments}}
                                   for c in tool_calls]
        replies: list[Message] = []
        for tc in tool_calls:
            args, failed = paper_arguments(tc.raw_arguments)
            self.parse_errors += failed
            text, decoded = self.env.call(tc.name, args)
            self.record.calls.append(CallRecord(self.turns - 1, tc, decoded, [], text))
            replies.append({"role": "tool", "tool_call_id": tc.id, "content": text})
        self.messages.extend(replies)
        self.done = self.turns >= self.config.turn_limit
        return replies

    def fail(self, exc: InfraError) -> None:
        """The model's request of the next turn failed: the episode ends as an infrastructure error."""
        self.turns += 1
        self.record.termination, self.record.infra_error = Termination.INFRA_ERROR, str(exc) or type(exc).__name__
        self.infra = self.done = True

    def finish(self) -> EpisodeRecord:
        """The episode's record: executed actions, termination, and what the artifact reports."""
        rec = self.record
        flags = self.env.finish()
        rec.executed = list(self.env.executed)
        livelock = self.turns >= self.config.turn_limit
        if not self.infra:
            rec.termination = Termination.TURN_LIMIT if livelock else Termination.ANSWERED
        rec.paper = {"n_calls": self.env.n_calls, "n_rejected": self.env.n_rejected, "flags": [f for f, _ in flags],
                     "flag_details": [[f, d if isinstance(d, str) else json.dumps(d)] for f, d in flags],
                     "argument_parse_errors": self.parse_errors, "livelock": livelock,
                     "ignored_text_calls": self.text_calls}
        return rec


async def run_paper_episode(task: Task, codec: Codec, model: ModelAPI, config: EpisodeConfig,
                            calls: PaperCallMap) -> EpisodeRecord:
    """Play one task on one variant under the paper's protocol (see the module doc). Never raises
    for model behaviour; provider failures end the episode with ``Termination.INFRA_ERROR``."""
    started = time.perf_counter()
    agent = model.for_episode(task, codec)
    episode = PaperEpisode(task, codec, config, calls, model.spec)
    rec = episode.record
    while not episode.done:
        first = episode.turns == 0
        tool_choice = "required" if (first and config.condition is Condition.REQUIRED) else None
        try:
            out: ModelOutput = await agent.generate(episode.messages, episode.tools, tool_choice, config.generate)
        except InfraError as exc:
            episode.fail(exc)
            break
        rec.prompt_tokens += out.usage.prompt_tokens
        rec.completion_tokens += out.usage.completion_tokens
        rec.cached_prompt_tokens += out.usage.cached_prompt_tokens
        rec.model_latency_s += out.latency_s
        calls_read, content = paper_turn(out, episode.turns + 1)
        episode.text_calls += len(out.tool_calls) - len(calls_read)
        episode.play(content, calls_read)
    episode.finish()
    rec.wall_s = time.perf_counter() - started
    return rec


__all__ = ["PaperEpisode", "paper_arguments", "paper_system", "paper_turn", "run_paper_episode"]
