"""The pure episode loop: model <-> codec session <-> domain environment.

No I/O of its own: the provider is passed in (and is the only thing awaited), the
environment is in memory, and the result is an :class:`EpisodeRecord` value. The
runner (``toolbias.study.runner``) does batching, storage and concurrency around it.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from enum import Enum
from functools import partial
from typing import TYPE_CHECKING, Any

from ..catalog.model import Catalog, NativeAction, Task
from ..operators.base import Call, Flag
from ..providers.base import GenerateConfig, InfraError, Message, ModelAPI, ModelOutput, ToolCall
from ..variants.codec import Codec, Control, Decoded, Outcome
from ..variants.instructions import variant_instructions
from .env import EpisodeEnvironment, PaperHarness, User, make_environment
from .paper_protocol import Protocol, Runner, paper_system_prompt, protocol_label
from .success import MatchRule, condition_label

if TYPE_CHECKING:
    from .paper_seam import AdapterEpisode

DEFAULT_SYSTEM = (
    "You are an assistant that carries out the user's request by calling the provided tools. "
    "Use only the provided tools, with exactly the names and argument structure their schemas define. "
    "Make every call the request needs, then reply briefly without calling a tool."
)


class Termination(str, Enum):
    """Why an episode ended (stored on every record)."""

    ANSWERED = "answered"        # the model replied without a tool call
    TURN_LIMIT = "turn_limit"    # the turn limit was hit
    INFRA_ERROR = "infra_error"  # the provider failed (not the model's fault; re-run on resume)


class Condition(str, Enum):
    """Training-free interventions (paper Table 3 / 11)."""

    BASE = "base"
    INSTRUCTION = "instruction"  # per-variant instruction appended to the system prompt
    REQUIRED = "required"        # first turn constrained: tool_choice="required"


@dataclass(frozen=True)
class EpisodeConfig:
    control: Control = Control.STRICT
    condition: Condition = Condition.BASE
    turn_limit: int = 16
    generate: GenerateConfig = field(default_factory=GenerateConfig)
    system_prompt: str = DEFAULT_SYSTEM
    #: the success rule episodes are scored under (toolbias.study.success); not part of play
    match: MatchRule = MatchRule.EXACT
    #: whose evaluation the episode follows (toolbias.study.paper_protocol); paper: the artifact's
    #: episode loop (toolbias.study.paper_episode), its success rule always
    protocol: Protocol = Protocol.TOOLBIAS
    #: under the paper's protocol, an environment's own harness as the artifact's adapter runs it
    #: (tau2-bench): its step and error budget replace ``turn_limit``, its greeting opens the dialogue
    harness: PaperHarness | None = None

    @property
    def condition_label(self) -> str:
        """The stored condition: the intervention, plus a non-default match rule, or ``@paper``
        under the paper's protocol."""
        if self.protocol is Protocol.PAPER:
            return protocol_label(self.condition.value, self.protocol)
        return condition_label(self.condition.value, self.match)

    def to_dict(self) -> dict[str, Any]:
        out = {"control": self.control.value, "condition": self.condition.value, "turn_limit": self.turn_limit,
               "generate": self.generate.to_dict(), "system_prompt": self.system_prompt}
        if self.match is not MatchRule.EXACT:
            out["match"] = self.match.value
        if self.protocol is not Protocol.TOOLBIAS:
            out["protocol"] = self.protocol.value
        if self.harness is not None:
            out["harness"] = {"max_steps": self.harness.max_steps, "max_errors": self.harness.max_errors,
                              "greeting": self.harness.greeting}
        return out


@dataclass
class CallRecord:
    """One model tool call: what was asked, how it decoded, what it did.

    ``results`` (the environment's answers) are kept in memory only: the stored record
    holds them once, as the tool ``message`` the model read (their JSON)."""

    turn: int
    tool_call: ToolCall
    decoded: Decoded | None
    results: list[dict[str, Any]]
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"turn": self.turn, "tool_call": self.tool_call.to_dict(),
                "decoded": self.decoded.to_dict() if self.decoded else None, "message": self.message}


@dataclass
class EpisodeRecord:
    task_id: str
    domain: str
    variant: str
    model: str
    control: str
    condition: str
    query: str
    gold: list[NativeAction]
    messages: list[Message] = field(default_factory=list)
    calls: list[CallRecord] = field(default_factory=list)
    executed: list[NativeAction] = field(default_factory=list)
    flags: list[Flag] = field(default_factory=list)
    turns: int = 0
    termination: Termination = Termination.ANSWERED
    infra_error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    model_latency_s: float = 0.0
    wall_s: float = 0.0
    recovered_calls: int = 0
    #: an external evaluator's verdict (``{"reward": r, ...}``, e.g. tau2-bench's), when the
    #: environment has one: success is then ``reward == 1``
    evaluation: dict[str, Any] | None = None
    #: the task's answer sets (``Task.meta["accept"]``), if any, and the match rule (toolbias.study.success)
    accept: list[dict[str, Any]] | None = None
    match: str = MatchRule.EXACT.value
    #: an environment's own success check (BFCL multi-turn: state per user turn), if it has one
    state_check: dict[str, Any] | None = None
    #: under the paper's protocol, what the artifact reports besides the actions (n_calls,
    #: n_rejected, flags, argument_parse_errors, livelock: toolbias.study.paper_episode)
    paper: dict[str, Any] | None = None

    @property
    def rejections(self) -> int:
        return sum(1 for c in self.calls if c.decoded is None or c.decoded.outcome is Outcome.REJECTION)

    def to_dict(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id, "domain": self.domain, "variant": self.variant, "model": self.model,
            "control": self.control, "condition": self.condition, "query": self.query,
            "gold": [a.to_dict() for a in self.gold], "messages": self.messages,
            "calls": [c.to_dict() for c in self.calls], "executed": [a.to_dict() for a in self.executed],
            "flags": [f.to_dict() for f in self.flags], "turns": self.turns,
            "termination": self.termination.value, "infra_error": self.infra_error,
            "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
            "cached_prompt_tokens": self.cached_prompt_tokens, "model_latency_s": self.model_latency_s,
            "wall_s": self.wall_s, "recovered_calls": self.recovered_calls,
            **({"evaluation": self.evaluation} if self.evaluation is not None else {}),
            # only when they say something: records of the default rule keep their old form
            **({"accept": self.accept} if self.accept else {}),
            **({"match": self.match} if self.match != MatchRule.EXACT.value else {}),
            **({"state_check": self.state_check} if self.state_check is not None else {}),
            **({"paper": self.paper} if self.paper is not None else {}),
        }


def system_message(codec: Codec, catalog: Catalog, task: Task, config: EpisodeConfig,
                   instruction: str | None = None) -> str:
    """toolbias's system prompt, the domain's and (``instruction``) the variant's instructions; under
    the paper's protocol the artifact's composition instead (the domain's prompt, a blank line, its
    tool instruction, or ``instruction``, the adapter seam's own: what its tau2 adapter appends to
    tau2's agent prompt), never toolbias's prompt."""
    if config.protocol is Protocol.PAPER:
        note = " ".join(variant_instructions(codec)) if config.condition is Condition.INSTRUCTION else None
        return paper_system_prompt(catalog.domain(task.domain).system, Runner.AGENTIC, note or None, instruction)
    parts = [config.system_prompt]
    domain_system = catalog.domain(task.domain).system
    if domain_system:
        parts.append(domain_system)
    if config.condition is Condition.INSTRUCTION:
        parts.extend(variant_instructions(codec))
    return "\n\n".join(parts)


#: ``json.dumps(value, ensure_ascii=False)``, without building an encoder per message
_to_json = json.JSONEncoder(ensure_ascii=False).encode


def tool_message(decoded: Decoded, results: list[dict[str, Any]], env: EpisodeEnvironment | None = None) -> str:
    """The text the model reads for one decoded call: ``Error: ...`` for a rejection, the
    protocol's reply, else the environment's wording of the executed results (their JSON by
    default). The proxy words its replies with this same function."""
    text = decoded.protocol_text()
    if text is None and env is not None:
        text = env.tool_text(results)
    if text is not None:
        return text
    body: Any = results[0] if len(results) == 1 else results
    return _to_json(body)


async def run_episode(task: Task, codec: Codec, model: ModelAPI, config: EpisodeConfig, *,
                      env: EpisodeEnvironment | None = None, user: User | None = None,
                      adapter: AdapterEpisode | None = None) -> EpisodeRecord:
    """Play one task on one variant. Never raises for model behaviour; provider
    failures end the episode with ``Termination.INFRA_ERROR``.

    ``env``: the environment the decoded native actions run in (default: the state engine of
    the task's domain); it may also word tool messages (``tool_text(results)``) and judge the
    episode (``evaluate(record) -> {"reward": ...}``). ``user``: a user simulator for
    multi-turn tasks; without one the task's query is the only user message. ``adapter``: the
    artifact's tau2 adapter (:mod:`toolbias.study.paper_seam`) reads the model's calls instead of
    the codec: its tools and instruction are sent, and only the native calls it decodes enter the
    conversation and run."""
    started = time.perf_counter()
    catalog = codec.catalog
    agent = model.for_episode(task, codec)
    session = codec.session(task.domain, config.control)
    env = env if env is not None else make_environment(catalog, task)
    user = user if user is not None else env.user
    tools = codec.schema(task.domain) if adapter is None else adapter.tools.tools
    rec = EpisodeRecord(task_id=task.id, domain=task.domain, variant=codec.name, model=model.spec,
                        control=config.control.value, condition=config.condition_label, query=task.query,
                        gold=list(task.gold), accept=_accept(task), match=config.match.value)
    instruction = adapter.instruction if adapter is not None else None
    messages: list[Message] = [{"role": "system", "content": system_message(codec, catalog, task, config, instruction)}]
    rec.messages = messages
    harness = config.harness
    if harness is not None and harness.greeting:
        messages.append({"role": "assistant", "content": harness.greeting})
    try:
        messages.append({"role": "user", "content": await user.open() if user is not None else task.query})
    except InfraError as exc:
        rec.termination, rec.infra_error = Termination.INFRA_ERROR, f"user simulator: {exc}"
        rec.wall_s = time.perf_counter() - started
        return rec
    rec.termination = Termination.TURN_LIMIT
    # multi-turn tasks (BFCL multi-turn): later user turns, each fed when the agent answers the
    # one before without a tool call; the turn limit applies to each user turn
    pending = [str(t) for t in task.meta.get("turns") or []] if user is None else []
    turn, used = -1, 0
    # a harness's budget instead (tau2's orchestrator): steps (the user's opening was the first) and tool errors
    budget = _Budget(harness) if harness is not None else None
    while used < config.turn_limit or budget is not None:
        if budget is not None and budget.spent(rec):
            break
        turn += 1
        used += 1
        tool_choice = "required" if (turn == 0 and config.condition is Condition.REQUIRED) else None
        try:
            if adapter is None:
                out: ModelOutput = await agent.generate(messages, tools, tool_choice, config.generate)
                outputs, content, calls = [out], out.content or "", out.tool_calls
            else:
                played = await adapter.turn(partial(_generate, agent, tools, tool_choice, config.generate),
                                            messages, turn + 1)
                outputs, content, calls = played.outputs, played.content, tuple(played.calls)
        except InfraError as exc:
            rec.termination = Termination.INFRA_ERROR
            rec.infra_error = str(exc) or type(exc).__name__
            break
        rec.turns = turn + 1
        for out in outputs:
            rec.prompt_tokens += out.usage.prompt_tokens
            rec.completion_tokens += out.usage.completion_tokens
            rec.cached_prompt_tokens += out.usage.cached_prompt_tokens
            rec.model_latency_s += out.latency_s
            if out.recovered and adapter is None:
                rec.recovered_calls += len(out.tool_calls)
        assistant: Message = {"role": "assistant", "content": content}
        if calls:
            assistant["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.raw_arguments}}
                for c in calls
            ]
        messages.append(assistant)
        if not calls:
            env.end_turn()
            if pending:
                messages.append({"role": "user", "content": pending.pop(0)})
                used = 0
                continue
            if budget is not None:
                budget.steps += 1  # the agent's answer
                if budget.spent(rec):
                    break
            try:
                reply = await user.respond(messages) if user is not None else None
            except InfraError as exc:
                rec.termination, rec.infra_error = Termination.INFRA_ERROR, f"user simulator: {exc}"
                break
            if reply is None:
                rec.termination = Termination.ANSWERED
                break
            messages.append({"role": "user", "content": reply})
            if budget is not None:
                budget.steps += 1  # the user's reply
            continue
        for tc in calls:  # parallel calls are handled in order
            messages.append(apply_call(rec, turn, tc, session, env) if adapter is None else
                            apply_native(rec, turn, tc, task.domain, env))
        if budget is not None:
            budget.steps += 2  # the agent's calls, the environment's reply
    rec.flags.extend(session.finish())
    if adapter is not None:
        rec.paper = adapter.summary()
    rec.state_check = env.check()
    rec.messages = messages
    if rec.termination is not Termination.INFRA_ERROR:
        rec.evaluation = env.evaluate(rec)
    rec.wall_s = time.perf_counter() - started
    return rec


async def _generate(agent: ModelAPI, tools: list[dict[str, Any]], tool_choice: str | None, config: GenerateConfig,
                    messages: list[Message]) -> ModelOutput:
    """One request of a turn the adapter plays (it may ask again with the meta traffic of the turn)."""
    return await agent.generate(messages, tools, tool_choice, config)


@dataclass
class _Budget:
    """A harness's budget over one dialogue (:class:`~toolbias.study.env.PaperHarness`): steps so
    far (the user's opening is the first) and whether they, or the tool errors, are spent."""

    harness: PaperHarness
    steps: int = 1

    def spent(self, rec: EpisodeRecord) -> bool:
        errors = sum(1 for c in rec.calls for r in c.results if not r.get("ok", True))
        return self.steps >= self.harness.max_steps or errors >= self.harness.max_errors


def _accept(task: Task) -> list[dict[str, Any]] | None:
    accept = task.meta.get("accept")
    return list(accept) if isinstance(accept, list) and accept else None


def apply_native(rec: EpisodeRecord, turn: int, tc: ToolCall, domain: str, env: EpisodeEnvironment) -> Message:
    """Run one native call (the artifact's tau2 adapter decoded it) in ``env``, record it on ``rec`` and
    return the tool message the model reads: the environment's own answer."""
    action = NativeAction(domain, tc.name, dict(tc.arguments or {}))
    result = env.execute(action)
    if result.get("ok"):
        rec.executed.append(action)
    decoded = Decoded(Call(tc.name, dict(tc.arguments or {})), Outcome.NATIVE, actions=(action,))
    msg = tool_message(decoded, [result], env)
    rec.calls.append(CallRecord(turn, tc, decoded, [result], msg))
    return {"role": "tool", "tool_call_id": tc.id, "name": tc.name, "content": msg}


def apply_call(rec: EpisodeRecord, turn: int, tc: ToolCall, session: Any, env: EpisodeEnvironment) -> Message:
    """Decode one model call in ``session``, execute what it decodes to in ``env``, record it on
    ``rec`` and return the tool message the model reads (the RL environment shares this step)."""
    if tc.arguments is None:
        msg = f"Error: could not parse the arguments of '{tc.name}': {tc.parse_error}"
        rec.calls.append(CallRecord(turn, tc, None, [], msg))
        return {"role": "tool", "tool_call_id": tc.id, "name": tc.name, "content": msg}
    decoded = session.decode(Call(tc.name, tc.arguments))
    # trusted: the session's level-0 check validated every native action it decoded
    native = decoded.outcome is Outcome.NATIVE
    results = [env.execute(a, trusted=True) for a in decoded.actions] if native else []
    rec.executed.extend(a for a, r in zip(decoded.actions, results, strict=False) if r.get("ok"))
    rec.flags.extend(decoded.flags)
    msg = tool_message(decoded, results, env)
    rec.calls.append(CallRecord(turn, tc, decoded, results, msg))
    return {"role": "tool", "tool_call_id": tc.id, "name": tc.name, "content": msg}
