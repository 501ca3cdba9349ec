"""``toolbias proxy --protocol paper``: the schema-bias artifact's proxy (``toolschema/proxy.py``).

A separate mode of the proxy, for setting a model run through any harness beside the paper's
real-benchmark runs (τ², BFCL, AutomationBench, MCP-Atlas). Per chat request with tools:

1. the conversation is found by its first two system/user messages and its tool names (the
   variant is built on its first request, :func:`~toolbias.proxy.paper_tools.build_variant`);
2. the assistant turns the harness echoes back (native calls, or text) are replaced by what the
   model really said in the variant's vocabulary, with the tool answers the proxy gave it;
3. the artifact's tool instruction (and, for transaction and schema discovery, its protocol
   note) is appended to the first system message after a blank line (a system message is added
   when there is none);
4. the request goes upstream as the harness sent it, with the variant's tools and that
   transcript (``stream`` and ``stream_options`` dropped, a ``tool_choice`` that names a tool
   dropped, ``model`` replaced by ``--model`` when given);
5. each call the model makes is decoded: a native call goes back to the harness (the argument
   text ``json.dumps`` of the native arguments, the model's call id); transaction and discovery
   steps are answered here; a call the variant refuses is handled by the feedback protocol.

Feedback protocols (the artifact's ``--protocol``):

* ``feedback``: a refused call is answered with the artifact's error and the model asked again,
  at most ``max_rounds`` (16) model calls per harness turn;
* ``nofeedback`` (the paper's real-benchmark runs): a refused call is dropped, with no error and
  no retry; a turn whose calls were all dropped ends as text (the model's own text, ``""`` when
  it wrote none); the transaction and discovery steps are still answered, for at most
  :data:`NOFEEDBACK_ROUNDS` (8) model calls per turn.

A turn that runs out of model calls ends as the text ``I was unable to complete the tool calls.``
The response is the last upstream response with the native calls in its message, the usage of
every model call of the turn summed, and ``"proxy": {"variant": OP, "protocol": ...}``.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from ..operators.paper import Route, Transactions, answer, classify
from ..providers.base import InfraError
from ..providers.openai import OpenAIProvider
from ..study.paper_protocol import TOOL_INSTRUCTION, unknown_function
from ..variants.spec import VariantSpec
from .conversation import CallLog
from .paper_tools import OPERATORS, PROTOCOL_NOTES, ProxyVariant, Settings, build_variant, operator_of
from .request import ProxyError
from .service import ProxyConfig, VariantProxy, upstream_error


class Feedback(str, Enum):
    """What a call the variant refuses gets (the artifact's ``--protocol``)."""

    FEEDBACK = "feedback"
    NOFEEDBACK = "nofeedback"


#: model calls per harness turn under ``nofeedback``
NOFEEDBACK_ROUNDS = 8
UNABLE = "I was unable to complete the tool calls."
#: conversations kept (least recently used out)
MAX_CONVERSATIONS = 4096


@dataclass
class Turn:
    """The decoding of one model message: native calls for the harness, answers for the model, and
    the ids of the calls the variant refused."""

    natives: list[tuple[str, Any, dict[str, Any]]] = field(default_factory=list)
    answers: list[dict[str, Any]] = field(default_factory=list)
    refused: set[str] = field(default_factory=set)
    #: each call as the stored row keeps it: the call, its outcome, its native call or answer
    entries: list[dict[str, Any]] = field(default_factory=list)


def _answer(call_id: str, payload: Mapping[str, Any] | str) -> dict[str, Any]:
    text = payload if isinstance(payload, str) else json.dumps(payload)
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def _content_key(content: Any) -> str:
    return hashlib.sha1(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()


class PaperConversation:
    """One harness conversation: its variant, transactions, and the variant-form transcript segments
    that stand for the turns handed to the harness."""

    def __init__(self, variant: ProxyVariant, hard: bool) -> None:
        self.variant = variant
        self.hard = hard
        self.log = CallLog(conv_id=uuid.uuid4().hex[:16], variant=f"paper:{variant.op}", domain="", catalog="request")
        self.txns = Transactions()
        self.by_call: dict[str, list[dict[str, Any]]] = {}
        self.by_text: dict[str, list[dict[str, Any]]] = {}

    def splice(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The harness's messages with each assistant turn the proxy served replaced by its segment."""
        out: list[dict[str, Any]] = []
        for m in messages:
            if m.get("role") == "assistant":
                calls = m.get("tool_calls") or []
                seg = None
                if calls:
                    seg = self.by_call.get(calls[0].get("id"))
                elif m.get("content"):
                    seg = self.by_text.get(_content_key(m["content"]))
                if seg is not None:
                    out.extend(json.loads(json.dumps(seg)))
                    continue
            out.append(m)
        return out

    def decode(self, calls: list[dict[str, Any]]) -> Turn:
        turn = Turn()
        for c in calls:
            cid = c.get("id") or f"call_{uuid.uuid4().hex[:12]}"
            name = c["function"]["name"]
            natives = len(turn.natives)
            self._one(turn, cid, name, c["function"].get("arguments"))
            entry: dict[str, Any] = {"round": self.log.rounds, "tool_call": {
                "id": cid, "name": name, "arguments": c["function"].get("arguments")}}
            if len(turn.natives) > natives:
                entry.update(outcome="native", native=list(turn.natives[-1][1:]))
                self.log.native_calls += 1
            else:
                entry.update(outcome="rejection" if cid in turn.refused else "reply",
                             message=turn.answers[-1]["content"])
                self.log.rejections += cid in turn.refused
                self.log.replies += cid not in turn.refused
            turn.entries.append(entry)
        return turn

    def _one(self, turn: Turn, cid: str, name: str, raw: Any) -> None:
        try:
            args = json.loads(raw or "{}")
            if not isinstance(args, dict):
                raise ValueError("arguments must be an object")
        except Exception as exc:  # noqa: BLE001 - the artifact's text names the reader's error
            self._refuse(turn, cid, {"error": f"Could not parse arguments: {exc}"})
            return
        if self.variant.discovery:
            self._discover(turn, cid, name, args)
        else:
            self._call(turn, cid, name, args)

    def _refuse(self, turn: Turn, cid: str, payload: Mapping[str, Any] | str) -> None:
        turn.refused.add(cid)
        turn.answers.append(_answer(cid, payload))

    def _route(self, turn: Turn, cid: str, name: str, args: dict[str, Any]) -> Route | None:
        """The variant's route of ``name``; a name it does not expose is refused under hard control
        and passed on as a native call under loose control (None either way)."""
        route = self.variant.routes.get(name)
        if route is None:
            if self.hard:
                self._refuse(turn, cid, unknown_function(name))
            else:
                turn.natives.append((cid, name, args))
        return route

    def _call(self, turn: Turn, cid: str, name: str, args: dict[str, Any]) -> None:
        route = self.variant.routes.get(name)
        action, op, native = classify(route, name, args, hard=self.hard)
        if action == "reject":
            self._refuse(turn, cid, unknown_function(name) if route is None else
                         {"error": f"Invalid call to `{name}`: arguments do not match its schema."})
        elif action == "meta" and route is not None:
            self._transaction(turn, cid, name, route.kind, route.op, args)
        else:
            turn.natives.append((cid, op, native))

    def _transaction(self, turn: Turn, cid: str, name: str, kind: str, op: str, args: dict[str, Any]) -> None:
        """begin answers its handle; set answers ok; commit hands the native call to the harness
        (required arguments are not checked here); a wrong handle is refused with its flag."""
        txns = self.txns
        if kind == "begin":
            txns.opened += 1
            opened = f"txn_{txns.opened}"
            txns.txns[opened] = {"op": op, "args": {}, "done": False}
            turn.answers.append(_answer(cid, {"txn_id": opened}))
            return
        rest = dict(args)
        handle = rest.pop("txn_id", None) if kind == "set" else rest.get("txn_id")
        txn = txns.txns.get(handle) if isinstance(handle, str) else None
        if kind == "set":
            if txn is None or txn["op"] != op:
                self._refuse(turn, cid, {"error": f"set_unknown_txn: {name}({handle})"})
            elif txn["done"]:
                self._refuse(turn, cid, {"error": f"set_after_commit: {name}({handle})"})
            else:
                txn["args"].update(rest)
                turn.answers.append(_answer(cid, {"status": "ok"}))
            return
        if txn is None or txn["op"] != op:
            self._refuse(turn, cid, {"error": f"commit_unknown_txn: {name}({handle})"})
        elif txn["done"]:
            self._refuse(turn, cid, {"error": f"double_commit: {name}({handle})"})
        else:
            txn["done"] = True
            turn.natives.append((cid, op, dict(txn["args"])))

    def _discover(self, turn: Turn, cid: str, name: str, args: dict[str, Any]) -> None:
        """Schema discovery, answered as the artifact's whole-catalog environment answers it; a valid
        ``invoke`` becomes the method's native call."""
        route = self._route(turn, cid, name, args)
        if route is None:
            return
        got = answer(route, name, args, self.txns, loose=not self.hard, hierarchy=True)
        if got.actions:
            action = got.actions[-1]
            turn.natives.append((cid, action.tool, dict(action.arguments)))
        elif got.rejected:
            self._refuse(turn, cid, got.payload)
        else:
            turn.answers.append(_answer(cid, got.payload))


class PaperProxy(VariantProxy):
    """The proxy's request handling under the paper's protocol (see the module doc); upstream
    connections, pass-through, ``/v1/models`` and ``/health`` are :class:`VariantProxy`'s."""

    def __init__(self, config: ProxyConfig, feedback: Feedback = Feedback.FEEDBACK,
                 settings: Settings | None = None, recorder: Any | None = None) -> None:
        self.op = operator_of(config.variant)
        super().__init__(ProxyConfig(**{**config.__dict__, "variant": "native"}), recorder)
        self.config = config
        self.feedback = Feedback(feedback)
        self.settings = settings or Settings()
        self.hard = config.control.value == "strict"
        self.conversations: OrderedDict[str, PaperConversation] = OrderedDict()
        self.variant = VariantSpec(f"paper:{self.op}", description=f"the artifact's proxy operator {self.op}",
                                   paper=OPERATORS[self.op])

    @property
    def rounds(self) -> int:
        return min(self.config.max_rounds, NOFEEDBACK_ROUNDS) if self.feedback is Feedback.NOFEEDBACK \
            else self.config.max_rounds

    def _conversation(self, messages: list[Any], tools: list[Any]) -> PaperConversation:
        first = [m for m in messages if isinstance(m, Mapping) and m.get("role") in ("system", "user")][:2]
        names = sorted(str(t.get("function", t).get("name")) for t in tools)
        key = _content_key([first, names])
        conv = self.conversations.get(key)
        if conv is None:
            conv = self.conversations[key] = PaperConversation(build_variant(self.op, tools, self.settings), self.hard)
            while len(self.conversations) > MAX_CONVERSATIONS:
                self.conversations.popitem(last=False)
        self.conversations.move_to_end(key)
        return conv

    def _prompt(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        note = TOOL_INSTRUCTION + (f"\n\n{PROTOCOL_NOTES[self.op]}" if self.op in PROTOCOL_NOTES else "")
        if messages and messages[0].get("role") == "system":
            return [dict(messages[0], content=f"{messages[0].get('content') or ''}\n\n{note}"), *messages[1:]]
        return [{"role": "system", "content": note}, *messages]

    async def chat(self, body: Any) -> dict[str, Any]:
        """The response to a chat request with native tools (raises ProxyError)."""
        if not isinstance(body, Mapping):
            raise ProxyError(400, "the request body must be a JSON object")
        messages, tools = body.get("messages"), body.get("tools")
        if not isinstance(messages, list) or not messages:
            raise ProxyError(400, "'messages' must be a non-empty list", code="invalid_messages")
        if not isinstance(tools, list) or not tools:
            raise ProxyError(400, "chat() needs native 'tools'; requests without tools pass through")
        request = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
        if self.config.model:
            request["model"] = self.config.model
        conv = self._conversation(messages, tools)
        conv.log.turns += 1
        transcript = self._prompt(conv.splice(messages))
        request["tools"], request["messages"] = conv.variant.tools, transcript
        if request.get("tool_choice") not in (None, "auto", "none", "required"):
            request.pop("tool_choice", None)
        provider = self._provider(self.upstream_model(request)).inner
        assert isinstance(provider, OpenAIProvider)
        pending: list[dict[str, Any]] = []
        usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
        data: dict[str, Any] = {}
        for _ in range(self.rounds):
            try:
                data = await provider.post_json(provider.next_url(), "/chat/completions",
                                                dict(request, messages=transcript + pending))
            except InfraError as exc:
                conv.log.termination = "upstream_error"
                self._record(conv.log)
                raise upstream_error(exc) from None
            if not isinstance(data.get("choices"), list) or not data["choices"]:
                raise ProxyError(502, "upstream model server: a response without choices", kind="upstream_error",
                                 code="upstream_bad_response")
            for k in usage:
                usage[k] += (data.get("usage") or {}).get(k, 0) or 0
            conv.log.rounds += 1
            conv.log.prompt_tokens += (data.get("usage") or {}).get("prompt_tokens", 0) or 0
            conv.log.completion_tokens += (data.get("usage") or {}).get("completion_tokens", 0) or 0
            msg = data["choices"][0].get("message") or {}
            calls = msg.get("tool_calls") or []
            said: dict[str, Any] = {"role": "assistant", "content": msg.get("content"),
                                    **({"tool_calls": calls} if calls else {})}
            if not calls:
                conv.by_text[_content_key(msg.get("content"))] = [*pending, said]
                conv.log.last_answer = msg.get("content")
                break
            turn = conv.decode(calls)
            answers = turn.answers
            if self.feedback is Feedback.NOFEEDBACK:
                for entry in turn.entries:
                    if entry["outcome"] == "rejection":
                        entry["outcome"] = "dropped"
                        entry.pop("message")
            conv.log.calls.extend(turn.entries)
            if self.feedback is Feedback.NOFEEDBACK and turn.refused:
                kept = [c for c in calls if c.get("id") not in turn.refused]
                said = {"role": "assistant", "content": msg.get("content"), **({"tool_calls": kept} if kept else {})}
                answers = [a for a in answers if a["tool_call_id"] not in turn.refused]
                if not kept:  # no valid call: the turn ends as text
                    text = msg.get("content") or ""
                    conv.by_text[_content_key(text)] = [*pending, {"role": "assistant", "content": text}]
                    data["choices"][0]["message"] = {"role": "assistant", "content": text}
                    data["choices"][0]["finish_reason"] = "stop"
                    conv.log.last_answer = text
                    break
            if turn.natives:
                conv.by_call[turn.natives[0][0]] = [*pending, said, *answers]
                data["choices"][0]["message"] = {"role": "assistant", "content": msg.get("content"), "tool_calls": [
                    {"id": cid, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
                    for cid, n, a in turn.natives]}
                data["choices"][0]["finish_reason"] = "tool_calls"
                break
            pending += [said, *answers]
            conv.log.protocol_rounds += 1
        else:
            data["choices"][0]["message"] = {"role": "assistant", "content": UNABLE}
            data["choices"][0]["finish_reason"] = "stop"
            conv.log.termination = "protocol_round_limit"
        self._record(conv.log)
        data["usage"] = usage
        data.setdefault("proxy", {})["variant"] = self.op
        data["proxy"]["protocol"] = self.feedback.value
        return data

    def memory(self) -> dict[str, int]:
        return {"conversations": len(self.conversations)}


__all__ = ["NOFEEDBACK_ROUNDS", "UNABLE", "Feedback", "PaperConversation", "PaperProxy", "Turn"]
