"""SFT traces: oracle episodes played turn by turn, in the chat-with-tools format.

A trace is a real episode (:func:`~toolbias.study.episode.run_episode`: the same codec
session, state engine and tool messages as an evaluation) whose agent is
:class:`TraceAgent`. The agent plays the task's gold through the variant's
``encode``, but in turns: a turn holds the next call and every following call that
uses only what the conversation has told it so far (:mod:`.knowledge`). So a
``resolve_*`` call and the call passing its ``ref_...`` id, ``begin`` and the write
naming its handle, or a schema query and the call using the discovered arguments,
are always in separate turns, the reply in between; independent calls stay parallel.

Recovery examples start with a mistake the variant refuses (on a protocol variant, a
call that uses a handle, reference id or discovered schema before the reply that gives
it - the very mistake a trace must never teach; elsewhere the gold's native call where
the variant has no tool of that name, else the variant call missing a required
argument), then the refusal, then the corrected trace.

Rows: ``{"messages", "tools", "variant", "task_id", "domain", "recovery"}``; the
first two are TRL's conversational format with tools. ``prompt_completion`` rows
put the turns not to learn from (the system prompt, the query and, in a recovery
example, the mistake and its refusal) in ``prompt`` and the rest in ``completion``,
so the loss never teaches the mistake.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..operators.base import Call
from ..providers.base import GenerateConfig, Message, ModelAPI, ModelOutput, ToolCall
from ..study.episode import Condition, EpisodeConfig, EpisodeRecord, run_episode
from ..study.paper_env import PaperCallMap, check_paper_catalog
from ..study.paper_episode import run_paper_episode
from ..study.paper_protocol import PAPER_TURN_LIMIT, Protocol
from ..study.scoring import exact_success
from ..study.splits import PAPER_MIXTURE
from ..study.success import MatchRule
from ..variants.codec import Codec, Control, Outcome
from .knowledge import call_tokens, gold_tokens, message_tokens, tools_tokens

if TYPE_CHECKING:
    from ..catalog.model import Catalog, Task

FINAL_ANSWER = "Done."

#: names for training mixtures (``--variants``): the paper's seven variants, or native only
MIXTURES = {"mixture": ",".join(PAPER_MIXTURE), "native": "native"}
#: the artifact's seven-variant training mixture (``benchmarks/synthetic/extra_surfaces.py`` ``MIXED7``,
#: in its order: v0, curry, indirect, qualified, v9, disclose, native; its results/README.md lists the
#: same seven for Table 3's mixed columns): ``mixture`` under ``--protocol paper``, played as the
#: artifact renders each (``paper.<name>``). Table 13's caption names another mix (opaque names and a
#: one-argument enum split instead of namespaced names and fully split): toolbias's ``mixture``.
ARTIFACT_MIXTURE = ("fully_merged", "transaction", "reference_resolution", "namespaced_names", "fully_split",
                    "schema_discovery", "native")


def training_variants(selector: str, protocol: Protocol | str = Protocol.TOOLBIAS) -> str:
    """A variant selector with the mixture names expanded (``mixture`` under the paper's protocol:
    :data:`ARTIFACT_MIXTURE`)."""
    if Protocol(protocol) is Protocol.PAPER and selector == "mixture":
        return ",".join(ARTIFACT_MIXTURE)
    return MIXTURES.get(selector, selector)


def training_codecs(catalog: Catalog, selector: str, protocol: Protocol | str = Protocol.TOOLBIAS) -> list[Codec]:
    """The codecs a training selector names on ``catalog``: under the paper's protocol each variant as
    the artifact renders it where it has a rendering (as ``toolbias run --protocol paper`` plays it),
    every variant checked readable by the artifact's environment before any work."""
    from ..study.runner import paper_variants
    from ..variants import build_codec, resolve_variants

    names = training_variants(selector, protocol)
    if Protocol(protocol) is not Protocol.PAPER:
        return [build_codec(catalog, s) for s in resolve_variants(names)]
    check_paper_catalog(catalog)
    codecs = [build_codec(catalog, s) for s in paper_variants(names)]
    domains = sorted(d.name for d in catalog.domains)
    for codec in codecs:
        PaperCallMap(codec).check(domains)
    return codecs


def _tool_names(tools: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    out: dict[str, Mapping[str, Any]] = {}
    for t in tools:
        fn = t.get("function", t)
        out[str(fn.get("name", ""))] = fn.get("parameters") or {}
    return out


def refused_call(first: Call, native: Call, tools: Sequence[Mapping[str, Any]], *,
                 premature: Call | None = None) -> Call | None:
    """A mistake the strict codec refuses: ``premature`` (a call that uses a protocol reply - a
    handle, a reference id, discovered arguments - sent before the call that gives it; the
    protocol refuses an id it never handed out or a tool not yet discovered) when there is one;
    else, by the schema alone, ``native`` (the gold's native call) when the variant lists no tool
    of that name, else ``first`` without one of its required arguments. None when none applies."""
    if premature is not None:
        return premature
    listed = _tool_names(tools)
    if native.name not in listed:
        return native
    params = listed.get(first.name) or {}
    required = [r for r in params.get("required") or [] if r in first.arguments]
    if required:
        return Call(first.name, {k: v for k, v in first.arguments.items() if k != required[0]})
    return None


class TraceAgent(ModelAPI):
    """Plays the gold through ``encode`` turn by turn (see the module doc). ``recovery``:
    open the trace with a refused call (when :func:`refused_call` finds one; under the paper's
    protocol, whose hard control refuses only names the variant lacks, only the native call
    where the variant has no tool of that name). ``paper``: traces for the paper's protocol."""

    cpu_bound = True

    def __init__(self, recovery: bool = False, paper: bool = False) -> None:
        self.spec = "trace"
        self.recovery = recovery
        self.paper = paper

    def settings(self) -> dict[str, Any]:
        return {"spec": self.spec, "recovery": self.recovery, **({"paper": True} if self.paper else {})}

    def for_episode(self, task: Task, codec: Codec) -> ModelAPI:
        return _TraceEpisode(self, task, codec)

    async def generate(self, messages: list[Message], tools: list[dict[str, Any]], tool_choice: str | None,
                       config: GenerateConfig) -> ModelOutput:
        return ModelOutput(content="The trace agent needs a task: run it through an episode.")


class _TraceEpisode(ModelAPI):
    def __init__(self, agent: TraceAgent, task: Task, codec: Codec) -> None:
        self.spec = "trace"
        self.agent = agent
        self.calls = codec.encode(task.gold)
        self.known: set[str] = gold_tokens(task.gold)  # grows with every message read
        self.read = 0  # messages read so far
        self.next = 0
        self.turn = 0
        self.native = Call(task.gold[0].tool, dict(task.gold[0].arguments)) if task.gold else None
        self.recovery = agent.recovery and bool(self.calls)

    async def generate(self, messages: list[Message], tools: list[dict[str, Any]], tool_choice: str | None,
                       config: GenerateConfig) -> ModelOutput:
        turn, self.turn = self.turn, self.turn + 1
        if self.next >= len(self.calls):
            return ModelOutput(content=FINAL_ANSWER)
        if self.read == 0:
            self.known |= tools_tokens(tools)
        for m in messages[self.read:]:
            if m.get("role") != "assistant":
                self.known |= message_tokens(m)
        self.read = len(messages)
        known = self.known
        if self.recovery and self.native is not None:
            self.recovery = False
            premature = next((c for c in self.calls[1:] if not all(t in known for t in call_tokens(c.name,
                                                                                                    c.arguments))),
                             None)
            if self.agent.paper:  # the artifact refuses only names it lacks (and runs the rest as they are)
                mistake = self.native if self.native.name not in _tool_names(tools) else None
            else:
                mistake = refused_call(self.calls[0], self.native, tools, premature=premature)
            if mistake is not None:
                return ModelOutput(content=None, tool_calls=(_tool_call(turn, 0, mistake),))
        batch = [self.calls[self.next]]
        j = self.next + 1
        while j < len(self.calls) and all(t in known for t in call_tokens(self.calls[j].name,
                                                                           self.calls[j].arguments)):
            batch.append(self.calls[j])
            j += 1
        self.next = j
        return ModelOutput(content=None, tool_calls=tuple(_tool_call(turn, i, c) for i, c in enumerate(batch)))


def _tool_call(turn: int, i: int, call: Call) -> ToolCall:
    args = dict(call.arguments)
    return ToolCall(f"call_{turn}_{i}", call.name, args, json.dumps(args, ensure_ascii=False))


def hf_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Chat messages as HF chat templates take them: tool-call arguments as objects, every
    message with the same keys (so ``datasets`` gives one column type)."""
    out = []
    for m in messages:
        calls = None
        if m.get("tool_calls"):
            calls = [{"type": "function", "id": c.get("id"),
                      "function": {"name": c["function"]["name"],
                                   "arguments": _parsed(c["function"]["arguments"])}}
                     for c in m["tool_calls"]]
        out.append({"role": m["role"], "content": m.get("content") or "", "tool_calls": calls,
                    "tool_call_id": m.get("tool_call_id"), "name": m.get("name")})
    return out


def _parsed(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments or "{}")
        except ValueError:
            return {}
    return arguments


@dataclass(frozen=True)
class TraceOptions:
    """How traces are made. ``recovery``: the fraction of traces that open with a refused
    call (spread evenly over the tasks); ``prompt_completion``: rows split into prompt and
    completion (loss on the completion only)."""

    instructions: bool = False
    recovery: float = 0.0
    prompt_completion: bool = False
    control: Control = Control.STRICT
    #: None: 32, or the artifact's 16 under the paper's protocol
    turn_limit: int | None = None
    #: ``paper``: each trace is a paper-protocol episode (the artifact's prompt, replies, limits and
    #: success rule, :func:`~toolbias.study.paper_episode.run_paper_episode`), its row labelled so
    protocol: Protocol = Protocol.TOOLBIAS


class TraceError(RuntimeError):
    """An oracle trace did not replay its gold: a codec bug, never a user error."""


def _is_recovery(i: int, fraction: float) -> bool:
    """Every task whose running share crosses a multiple of ``fraction`` (even spread)."""
    return fraction > 0 and int((i + 1) * fraction) > int(i * fraction)


def _episode_config(opts: TraceOptions) -> EpisodeConfig:
    paper = opts.protocol is Protocol.PAPER
    limit = opts.turn_limit if opts.turn_limit is not None else PAPER_TURN_LIMIT if paper else 32
    return EpisodeConfig(control=opts.control, turn_limit=limit,
                         condition=Condition.INSTRUCTION if opts.instructions else Condition.BASE,
                         match=MatchRule.PAPER if paper else MatchRule.EXACT, protocol=opts.protocol)


def sft_examples(codecs: Sequence[Codec], tasks: Sequence[Task], options: TraceOptions | None = None, *,
                 condition_instruction: bool | None = None) -> Iterator[dict[str, Any]]:
    """One trace per task, the variant rotating over ``codecs`` (a mixture).

    Raises :class:`TraceError` if a trace fails to replay its gold (the oracle guarantee)."""
    opts = options or TraceOptions()
    if condition_instruction is not None:  # the keyword of earlier releases
        opts = TraceOptions(condition_instruction, opts.recovery, opts.prompt_completion, opts.control,
                            opts.turn_limit)
    paper = opts.protocol is Protocol.PAPER
    agent_plain, agent_recovery = TraceAgent(paper=paper), TraceAgent(recovery=True, paper=paper)
    cfg = _episode_config(opts)
    maps = {c.name: PaperCallMap(c) for c in codecs} if paper else {}
    loop = asyncio.new_event_loop()  # one loop for every trace (a loop per episode costs more than the episode)
    try:
        for i, task in enumerate(tasks):
            codec = codecs[i % len(codecs)]
            recover = _is_recovery(i, opts.recovery)
            agent = agent_recovery if recover else agent_plain
            episode = run_paper_episode(task, codec, agent, cfg, maps[codec.name]) if paper \
                else run_episode(task, codec, agent, cfg)
            yield _row(task, codec, loop.run_until_complete(episode), recover, opts)
    finally:
        loop.close()


def _row(task: Task, codec: Codec, rec: EpisodeRecord, recover: bool, opts: TraceOptions) -> dict[str, Any]:
    """A trace episode as a training row (see the module doc); refuses one that missed its gold."""
    if not exact_success(rec.executed, task.gold, MatchRule(rec.match)):
        raise TraceError(f"the trace of task {task.id} on variant {codec.name} did not replay its gold "
                         f"({len(rec.executed)} of {len(task.gold)} actions executed)")
    refused = bool(rec.calls) and rec.calls[0].decoded is not None and \
        rec.calls[0].decoded.outcome is Outcome.REJECTION
    if recover and not refused:
        recover = False  # no refusable mistake for this variant (see refused_call): a plain trace
    messages = hf_messages(rec.messages)
    row: dict[str, Any] = {"tools": codec.schema(task.domain), "variant": codec.name, "task_id": task.id,
                           "domain": task.domain, "recovery": recover,
                           **({"protocol": opts.protocol.value} if opts.protocol is not Protocol.TOOLBIAS else {})}
    if opts.prompt_completion:
        cut = 2 + (2 if recover else 0)  # system, user (+ the mistake and its refusal)
        row = {"prompt": messages[:cut], "completion": messages[cut:], **row}
    else:
        row = {"messages": messages, **row}
    return row


__all__ = ["ARTIFACT_MIXTURE", "FINAL_ANSWER", "MIXTURES", "PAPER_MIXTURE", "TraceAgent", "TraceError", "TraceOptions", "hf_messages",
           "refused_call", "sft_examples", "training_codecs", "training_variants"]
