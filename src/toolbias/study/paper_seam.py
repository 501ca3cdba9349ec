"""The artifact's tau2 adapter (``adapters/tau2/tau2_schema_seam.patch``), played in process.

Under ``--protocol paper`` an environment with its own harness (tau2-bench) plays each agent turn
as the artifact's patch to tau2's ``generate()`` does, for the agent's calls only:

1. the variant's tools replace the native ones and the seam's instruction is appended to the
   system message after a blank line (:data:`~toolbias.study.paper_protocol.TOOL_INSTRUCTION` for
   the ladder and spec variants, the protocol's own note for the stateful seams);
2. after the response every call is decoded to native *before* it is recorded: tau2's trajectory,
   and so the history the model reads on its next turn, holds the native calls (their arguments
   as ``json.dumps`` of the native arguments), never the variant's;
3. ladder and spec variants (:data:`Seam.CALL_MAP`) read each call with the artifact's
   classification (:func:`toolbias.operators.paper.classify`): under hard control a call it
   rejects is dropped without a word to the model, and a turn whose calls were all dropped and
   that has no text says :data:`NO_ACTION`; under loose control an unknown name runs as native;
   a dispatcher call naming no operation runs as written;
4. the stateful seams (:data:`Seam.TRANSACTION`, :data:`Seam.DISCOVERY`, :data:`Seam.REFERENCE`)
   answer their meta calls (begin/set/commit, list_methods, resolvers) here, asking the model
   again within the same tau2 turn (at most :data:`MAX_META_ROUNDS` times); the meta traffic
   never enters the trajectory, only the decoded native calls do; a turn that surfaces none and
   has no text says :data:`UNFINISHED`;
5. a turn with neither calls nor text says :data:`NO_RESPONSE`.

A transaction stays open across tau2 turns (the artifact keeps its decoder per conversation);
discovery and reference state is per turn, as there. The variants the patch plays are the merge/
split ladder (``SCHEMA_VARIANT``), a ``paper`` step with inline ``ops`` (``SCHEMA_SPEC``) and the
three seams (``paper.transaction``, ``paper.schema_discovery``, ``paper.reference_resolution``);
any other variant is refused (:func:`adapter_plan`).

Two readings differ from the artifact on purpose: its transaction decoder is cached per
(system prompt, first user message) across conversations, so a task replayed in one process
would continue its handles (``txn_3`` ...); here each episode starts at ``txn_1``. And argument
text that is not JSON runs as ``{}`` on the ladder path (tau2 itself raises there).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from ..operators.paper import (
    Route,
    Transactions,
    answer,
    canonical,
    classify,
    compile_ops,
    hierarchy,
    ladder,
    openai_tool,
)
from ..providers.base import Message, ModelOutput, ToolCall
from ..variants.paper import ladder_step
from ..variants.spec import VariantSpec
from .paper_protocol import (
    TOOL_INSTRUCTION,
    TRANSACTION_INSTRUCTION,
    ProtocolNotImplemented,
    unknown_function,
)
from .paper_turns import paper_arguments, paper_turn

#: the assistant's words when hard control dropped every call of a turn that had no text
NO_ACTION = ("I can only use the tools provided to me, but the action I attempted is not available among "
             "them.")
#: the assistant's words when a seam surfaced no native call and the turn had no text
UNFINISHED = "I attempted a schema-mediated action but did not complete it; let me continue."
#: the assistant's words for a turn with neither calls nor text
NO_RESPONSE = "(no response)"
#: re-asks of the model within one tau2 turn while it makes only meta calls
MAX_META_ROUNDS = 8
DISCOVERY_INSTRUCTION = ("Tool argument schemas are progressively disclosed. First call `list_methods` for the "
                         "available class, then call `invoke` using the exact method name and argument schema "
                         "returned by that result.")
REFERENCE_INSTRUCTION = ("Some tool arguments require opaque references. Call the corresponding "
                         "`resolve_<tool>__<parameter>` function with the user-mentioned value first, then pass its "
                         "returned `handle` in the tool's `<parameter>_ref` argument. Never pass the raw value where "
                         "a reference is required.")
#: the reference seam's own wordings: an unknown name under hard control, a refused handle's hint
REFERENCE_UNKNOWN = "Unknown function `{name}`. Use only provided tools."
REFERENCE_HINT = "resolve the value first and use the returned handle"
#: argument names the reference seam prefers to put behind a handle
_PREFERRED = ("_id", "id", "_number", "email", "phone", "username", "name")


class Seam(str, Enum):
    """Which of the patch's hooks plays a variant."""

    CALL_MAP = "call_map"        # SCHEMA_VARIANT / SCHEMA_SPEC: the variant's call map
    TRANSACTION = "transaction"  # SCHEMA_TAU2_CURRY
    DISCOVERY = "discovery"      # SCHEMA_TAU2_DISCLOSE
    REFERENCE = "reference"      # SCHEMA_TAU2_INDIRECT


_SEAMS = {"paper.transaction": Seam.TRANSACTION, "paper.schema_discovery": Seam.DISCOVERY,
          "paper.reference_resolution": Seam.REFERENCE}
_INSTRUCTIONS = {Seam.CALL_MAP: TOOL_INSTRUCTION, Seam.TRANSACTION: TRANSACTION_INSTRUCTION,
                 Seam.DISCOVERY: DISCOVERY_INSTRUCTION, Seam.REFERENCE: REFERENCE_INSTRUCTION}
SUPPORTED = ("the merge/split ladder (paper.native, paper.fully_merged, paper.fully_split, paper.merge_domain_*, "
             "paper.split_enum_*), a paper ops step with inline \"ops\", paper.transaction, paper.schema_discovery, "
             "paper.reference_resolution")


@dataclass(frozen=True)
class AdapterPlan:
    """How the patch plays one variant: its seam, and the ladder index or spec ops of a call map."""

    variant: str
    seam: Seam
    k: int | None = None
    ops: str | None = None  # the spec's ops, as JSON text (hashable)

    @property
    def instruction(self) -> str:
        return _INSTRUCTIONS[self.seam]

    def codec_spec(self, spec: VariantSpec, tools: AdapterTools) -> VariantSpec:
        """The variant the study's codec is built from (its stored steps and tool count): the variant
        itself for a call map; for a seam, the ``paper`` step that builds the adapter's ``tools`` (the
        artifact's seam files are not a catalog's spec files)."""
        if self.seam is Seam.CALL_MAP:
            return spec
        return VariantSpec(spec.name, (tools.step,), spec.description, spec.paper, spec.tags, spec.source)


def adapter_plan(spec: VariantSpec) -> AdapterPlan:
    """How the artifact's tau2 adapter plays ``spec``, or :class:`ProtocolNotImplemented` naming what it plays."""
    if spec.name in _SEAMS:
        return AdapterPlan(spec.name, _SEAMS[spec.name])
    k = ladder_step(spec.steps)
    if k is not None:
        return AdapterPlan(spec.name, Seam.CALL_MAP, k=k)
    if len(spec.steps) == 1:
        step = dict(spec.steps[0])
        if step.get("op") == "paper" and step.get("build") == "ops" and isinstance(step.get("ops"), list):
            return AdapterPlan(spec.name, Seam.CALL_MAP, ops=json.dumps(step["ops"]))
    raise ProtocolNotImplemented(
        what=f"the artifact's tau2 adapter cannot play variant '{spec.name}' (its patch plays {SUPPORTED})",
        where="--variants", fix="choose one of those variants for a tau2 catalog under --protocol paper, or run "
                                "this one under --protocol toolbias")


def reference_ops(functions: Sequence[Mapping[str, Any]],
                  observed: Mapping[tuple[str, str], set[Any]]) -> list[dict[str, Any]]:
    """The reference seam's spec: per tool, one argument behind a handle, chosen among those with two
    or more known values (the gold values ``observed`` for it, and its enum): an identifier-like
    string or number first, then by name; its table is those values in text order."""
    ops = []
    for fn in functions:
        name = str(fn["name"])
        candidates = []
        for param, schema in (fn.get("parameters", {}).get("properties", {}) or {}).items():
            values = set(observed.get((name, param), set())) | set(schema.get("enum", []))
            if len(values) < 2:
                continue
            preferred = schema.get("type") in ("string", "integer", "number") and any(
                token in param.lower() for token in _PREFERRED)
            candidates.append((0 if preferred else 1, param, values))
        if candidates:
            _, param, values = min(candidates, key=lambda c: (c[0], c[1]))
            ops.append({"op": "indirect", "tool": name, "param": param, "values": sorted(values, key=str)})
    return ops


@dataclass
class AdapterTools:
    """One variant's tools for one domain of the harness, as the patch sends them, and their routes."""

    plan: AdapterPlan
    domain: str
    tools: list[dict[str, Any]]
    routes: dict[str, Route]
    #: the ``paper`` operator step that builds the same variant on a catalog
    step: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def build(cls, plan: AdapterPlan, domain: str, native: Sequence[Mapping[str, Any]],
              observed: Mapping[tuple[str, str], set[Any]] | None = None) -> AdapterTools:
        """``native``: the harness's own tools for its agent (OpenAI form); ``observed``: the values of
        each (tool, argument) in the harness's gold actions (the reference seam's tables)."""
        functions = [dict(t.get("function", t)) for t in native]
        where = f"tau2 adapter {plan.variant}"
        step: dict[str, Any]
        if plan.seam is Seam.CALL_MAP:  # the adapter's canonical form of each tool, markers dropped when sent
            canon = [canonical(t) for t in native]
            surface = ladder(domain, canon, plan.k) if plan.k is not None else \
                compile_ops(domain, canon, json.loads(plan.ops or "[]"), where)
            step = {"op": "paper", "build": "ladder", "k": plan.k} if plan.k is not None else \
                {"op": "paper", "build": "ops", "ops": json.loads(plan.ops or "[]")}
            return cls(plan, domain, [openai_tool(s) for s, _ in surface.tools],
                       {str(s["name"]): r for s, r in surface.tools}, step)
        if plan.seam is Seam.TRANSACTION:  # every tool of two or more arguments
            ops = [{"op": "curry", "tool": f["name"]} for f in functions
                   if len(f.get("parameters", {}).get("properties", {})) >= 2]
            surface = compile_ops(domain, functions, ops, where)
            step = {"op": "paper", "build": "ops", "ops": ops}
        elif plan.seam is Seam.DISCOVERY:  # one class: the domain
            surface = hierarchy([(domain, f) for f in functions], "disclose")
            step = {"op": "paper", "build": "hierarchy", "arm": "disclose"}
        else:
            ops = reference_ops(functions, observed or {})
            surface = compile_ops(domain, functions, ops, where)
            step = {"op": "paper", "build": "ops", "ops": ops}
        return cls(plan, domain, [{"type": "function", "function": s} for s, _ in surface.tools],
                   {str(s["name"]): r for s, r in surface.tools}, step)


@dataclass
class AdapterTurn:
    """One tau2 turn as the adapter leaves it: the assistant's text, its native calls (tau2's
    trajectory), every model output of the turn, and what the adapter kept from tau2."""

    content: str
    calls: list[ToolCall]
    outputs: list[ModelOutput]
    dropped: int = 0
    meta: int = 0


Generate = Callable[[list[Message]], Awaitable[ModelOutput]]


@dataclass
class AdapterEpisode:
    """The adapter's state over one episode (its open transactions) and its counts."""

    tools: AdapterTools
    hard: bool
    txns: Transactions = field(default_factory=Transactions)
    model_calls: int = 0
    dropped: int = 0
    meta: int = 0

    @property
    def instruction(self) -> str:
        return self.tools.plan.instruction

    async def turn(self, generate: Generate, messages: list[Message], turn: int) -> AdapterTurn:
        """One tau2 turn (``turn`` from 1): ask the model, decode its calls, and for the seams answer
        its meta calls and ask again (the requests after the first carry the meta traffic; tau2's
        history ``messages`` never does)."""
        out = await generate(messages)
        outputs = [out]
        calls_read, text = paper_turn(out, turn)
        seam = self.tools.plan.seam
        natives: list[tuple[str, Any, dict[str, Any]]] = []
        dropped = meta = 0
        if seam is Seam.CALL_MAP:
            for tc in calls_read:
                args, _ = paper_arguments(tc.raw_arguments)
                action, name, native = classify(self.tools.routes.get(tc.name), tc.name, args, hard=self.hard)
                if action == "reject":
                    dropped += 1
                    continue
                natives.append((tc.id, tc.name, args) if name is None else (tc.id, name, native))
            content = text or ""
            if dropped and not natives and not content.strip():
                content = NO_ACTION
        else:
            view = list(messages)
            for _ in range(MAX_META_ROUNDS):
                if not calls_read:
                    break
                answered, found = self._process(calls_read)
                natives += found
                meta += len(answered)
                if not answered:
                    break
                view += [{"role": "assistant", "content": text or "", "tool_calls": [
                    {"id": tc.id, "type": "function", "function": {"name": tc.name, "arguments": tc.raw_arguments}}
                    for tc, _ in answered]}]
                view += [{"role": "tool", "tool_call_id": tc.id, "content": reply} for tc, reply in answered]
                if natives:  # no re-ask past a surfaced action
                    break
                out = await generate(view)
                outputs.append(out)
                calls_read, text = paper_turn(out, turn)
            content = text or ""
            if not natives and not content.strip():
                content = UNFINISHED
        if not natives and not content.strip():
            content = NO_RESPONSE
        calls = [ToolCall(cid, name if isinstance(name, str) else json.dumps(name), args, json.dumps(args))
                 for cid, name, args in natives]
        self.model_calls += len(outputs)
        self.dropped += dropped
        self.meta += meta
        return AdapterTurn(content, calls, outputs, dropped, meta)

    def _process(self, calls: Sequence[ToolCall]) -> tuple[list[tuple[ToolCall, str]],
                                                           list[tuple[str, Any, dict[str, Any]]]]:
        """A seam's reading of one response: the meta calls with their answers, the native calls."""
        seam = self.tools.plan.seam
        answered: list[tuple[ToolCall, str]] = []
        natives: list[tuple[str, Any, dict[str, Any]]] = []
        for tc in calls:
            args, _ = paper_arguments(tc.raw_arguments)
            route = self.tools.routes.get(tc.name)
            if route is None:
                if not self.hard:
                    natives.append((tc.id, tc.name, args))
                else:
                    refusal = {"error": REFERENCE_UNKNOWN.format(name=tc.name)} if seam is Seam.REFERENCE \
                        else unknown_function(tc.name)
                    answered.append((tc, json.dumps(refusal)))
                continue
            got = answer(route, tc.name, args, self.txns, loose=not self.hard, hierarchy=seam is Seam.DISCOVERY)
            payload: Mapping[str, Any] = got.payload
            if seam is Seam.TRANSACTION and route.kind == "set" and got.rejected and not self.hard:
                payload = {"status": "set"}  # loose control says so, and sets nothing
            elif seam is Seam.REFERENCE and route.kind != "resolver" and got.flags and self.hard:
                answered.append((tc, json.dumps({"error": got.flags[-1][1], "hint": REFERENCE_HINT})))
                continue
            if got.actions:
                action = got.actions[-1]
                name = action.tool if action.domain == self.tools.domain else f"{action.domain}.{action.tool}"
                natives.append((tc.id, name, dict(action.arguments)))
            else:
                answered.append((tc, json.dumps(payload)))
        return answered, natives

    def summary(self) -> dict[str, Any]:
        """What the record keeps of the adapter's work."""
        return {"adapter": self.tools.plan.seam.value, "model_calls": self.model_calls,
                "dropped_calls": self.dropped, "meta_calls": self.meta}


__all__ = ["DISCOVERY_INSTRUCTION", "MAX_META_ROUNDS", "NO_ACTION", "NO_RESPONSE", "REFERENCE_INSTRUCTION",
           "SUPPORTED", "UNFINISHED", "AdapterEpisode", "AdapterPlan", "AdapterTools", "AdapterTurn", "Seam",
           "adapter_plan", "reference_ops"]
