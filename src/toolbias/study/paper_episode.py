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
from dataclasses import replace
from typing import Any

from ..catalog.model import Task
from ..providers.base import InfraError, Message, ModelAPI, ModelOutput, ToolCall
from ..variants.codec import Codec, Control
from ..variants.instructions import variant_instructions
from .episode import CallRecord, Condition, EpisodeConfig, EpisodeRecord, Termination
from .paper_env import PaperCallMap, PaperEnv
from .paper_protocol import Runner, paper_system_prompt, runner_of
from .success import MatchRule


def paper_arguments(raw: str) -> tuple[Any, bool]:
    """The arguments the artifact executes for a call's argument text, and whether it failed to
    read them (text that is not JSON, or JSON that is not an object, runs as ``{}``)."""
    try:
        value = json.loads(raw or "{}")
    except (ValueError, RecursionError):
        return {}, True
    return (value, False) if isinstance(value, dict) else ({}, True)


def paper_system(codec: Codec, task: Task, config: EpisodeConfig) -> str:
    """The episode's system message; the ``instruction`` condition adds the variant's instructions
    as the artifact's extra note (``SYN_NOTE``)."""
    note = " ".join(variant_instructions(codec)) if config.condition is Condition.INSTRUCTION else None
    return paper_system_prompt(codec.catalog.domain(task.domain).system, runner_of(codec.name), note or None)


def paper_turn(out: ModelOutput, turn: int) -> tuple[tuple[ToolCall, ...], str | None]:
    """The calls and the text of one answer as the artifact reads them on turn ``turn`` (from 1):
    only the calls the API returned as tool calls (calls the provider recovered from the text are
    none: the text stays as the model wrote it), each with the server's id, or ``call_<turn>_<i>``
    where the server sent none."""
    if out.recovered:
        return (), out.raw_content if out.raw_content is not None else out.content
    calls = tuple(replace(c, id=f"call_{turn}_{i}", generated_id=False) if c.generated_id else c
                  for i, c in enumerate(out.tool_calls))
    return calls, out.content


async def run_paper_episode(task: Task, codec: Codec, model: ModelAPI, config: EpisodeConfig,
                            calls: PaperCallMap) -> EpisodeRecord:
    """Play one task on one variant under the paper's protocol (see the module doc). Never raises
    for model behaviour; provider failures end the episode with ``Termination.INFRA_ERROR``."""
    started = time.perf_counter()
    agent = model.for_episode(task, codec)
    hard = config.control is Control.STRICT
    # the whole-catalog runners qualify native names by class: an unknown name run under loose
    # control is unqualified there (domain ""), and never matches the gold
    agentic = runner_of(codec.name) is Runner.AGENTIC
    env = PaperEnv(calls.reader(task.domain, hard), task.domain, hard, unknown_domain=None if agentic else "")
    tools = codec.schema(task.domain)
    rec = EpisodeRecord(task_id=task.id, domain=task.domain, variant=codec.name, model=model.spec,
                        control=config.control.value, condition=config.condition_label, query=task.query,
                        gold=list(task.gold), match=MatchRule.PAPER.value)
    messages: list[Message] = [{"role": "system", "content": paper_system(codec, task, config)},
                               {"role": "user", "content": task.query}]
    rec.messages = messages
    parse_errors = text_calls = 0
    turns = 0
    infra = False
    while turns < config.turn_limit:
        turns += 1
        tool_choice = "required" if (turns == 1 and config.condition is Condition.REQUIRED) else None
        try:
            out: ModelOutput = await agent.generate(messages, tools, tool_choice, config.generate)
        except InfraError as exc:
            rec.termination, rec.infra_error, infra = Termination.INFRA_ERROR, str(exc) or type(exc).__name__, True
            break
        rec.turns = turns
        rec.prompt_tokens += out.usage.prompt_tokens
        rec.completion_tokens += out.usage.completion_tokens
        rec.cached_prompt_tokens += out.usage.cached_prompt_tokens
        rec.model_latency_s += out.latency_s
        turn_calls, content = paper_turn(out, turns)
        text_calls += len(out.tool_calls) - len(turn_calls)
        assistant: Message = {"role": "assistant", "content": content or ""}
        if not turn_calls:
            messages.append(assistant)  # the transcript's last turn; no request follows it
            break
        assistant["tool_calls"] = [{"id": c.id, "type": "function",
                                    "function": {"name": c.name, "arguments": c.raw_arguments}}
                                   for c in turn_calls]
        messages.append(assistant)
        for tc in turn_calls:
            args, failed = paper_arguments(tc.raw_arguments)
            parse_errors += failed
            text, decoded = env.call(tc.name, args)
            rec.calls.append(CallRecord(turns - 1, tc, decoded, [], text))
            messages.append({"role": "tool", "tool_call_id": tc.id, "content": text})
    flags = env.finish()
    rec.executed = list(env.executed)
    livelock = turns >= config.turn_limit
    if not infra:
        rec.termination = Termination.TURN_LIMIT if livelock else Termination.ANSWERED
    rec.paper = {"n_calls": env.n_calls, "n_rejected": env.n_rejected, "flags": [f for f, _ in flags],
                 "flag_details": [[f, d if isinstance(d, str) else json.dumps(d)] for f, d in flags],
                 "argument_parse_errors": parse_errors, "livelock": livelock,
                 "ignored_text_calls": text_calls}
    rec.wall_s = time.perf_counter() - started
    return rec


__all__ = ["paper_arguments", "paper_system", "paper_turn", "run_paper_episode"]
