"""One agent conversation seen through a variant: the agent's native history on one side,
the transcript the upstream model sees under the variant on the other.

Pure logic, no I/O: :meth:`Conversation.turn` is given the upstream as a callable. It
decodes the upstream's calls with the variant's codec session (the single decoder):

- calls that decode to native actions are handed to the agent as native tool calls, and
  the agent's results, when they come back, become the upstream call's tool message;
- protocol calls (``begin``/``set``/``commit``, ``resolve``, ``list_methods``/``invoke`` ...)
  are answered here with the codec's reply, and the upstream is asked again;
- off-schema calls go back to the upstream as ``Error: ...`` tool messages it can
  recover from, exactly as in an episode, and the upstream is asked again.

Conversations are found again by a rolling hash over the agent's (normalised) messages:
after each turn the state is stored as an immutable :class:`Snapshot` under the hash of
the history the agent will send next (its request plus our reply). A history nobody
served (a restarted proxy, a hand-written few-shot) is rebuilt by encoding its native
calls into the variant, the way the oracle does.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..catalog.model import NativeAction, canonical_json
from ..operators.base import Call
from ..providers.base import Message, ModelOutput, ToolCall
from ..variants.codec import Control, Decoded, Outcome, Session
from .codecs import Bound, RequestError

#: (messages, variant tools, tool_choice) -> the upstream's answer
Upstream = Callable[[list[Message], list[dict[str, Any]], "str | None"], Awaitable[ModelOutput]]

_to_json = json.JSONEncoder(ensure_ascii=False).encode


def extend_hash(prev: bytes, message: Any) -> bytes:
    return hashlib.sha256(prev + _fingerprint(message).encode("utf-8", "surrogatepass")).digest()


def _fingerprint(m: Any) -> str:
    """What identifies a message across clients that re-serialise it (``content: null`` vs
    ``""``, arguments re-dumped with other spacing, extra fields)."""
    if type(m) is not dict:  # exact types throughout: this runs on every message of every request
        return canonical_json(repr(m))
    content = m.get("content")
    if content is None or type(content) is str:
        content = (content or "").strip()
    calls = []
    for c in m.get("tool_calls") or ():
        fn = (c.get("function") or {}) if type(c) is dict else {}
        args = fn.get("arguments") if type(fn) is dict else None
        if type(args) is str:
            try:
                args = json.loads(args) if args.strip() else {}
            except ValueError:
                pass
        calls.append([c.get("id") if type(c) is dict else None, fn.get("name") if type(fn) is dict else None, args])
    return canonical_json([m.get("role"), content, calls, m.get("tool_call_id")])


def history_hashes(messages: Sequence[Any]) -> list[bytes]:
    """``h[i]``: the hash of ``messages[:i]`` (``h[0]`` is the empty history)."""
    out = [b""]
    for m in messages:
        out.append(extend_hash(out[-1], m))
    return out


@dataclass
class CallLog:
    """What one conversation did, for the store: every upstream call and how it decoded."""

    conv_id: str
    variant: str
    domain: str
    catalog: str
    started: float = field(default_factory=time.time)
    calls: list[dict[str, Any]] = field(default_factory=list)
    turns: int = 0           # agent requests served
    rounds: int = 0          # upstream requests made
    protocol_rounds: int = 0  # upstream requests made only because of protocol replies or rejections
    native_calls: int = 0
    rejections: int = 0
    replies: int = 0
    rebuilt: int = 0         # native calls encoded from a history the proxy did not serve
    prompt_tokens: int = 0
    completion_tokens: int = 0
    last_answer: str | None = None
    termination: str = "live"
    #: the conversation this one branched from: a client retried or regenerated a turn of it
    branch_of: str | None = None
    #: the hash (hex) of the history the agent sends next: how a restarted proxy finds this row again
    head: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["calls"] = list(self.calls)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CallLog:
        """A log as :meth:`to_dict` wrote it (fields a later release added keep their defaults)."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    def copy(self) -> CallLog:
        """An independent copy (the logged calls themselves are never changed, so they are shared)."""
        return dataclasses.replace(self, calls=list(self.calls))


@dataclass(frozen=True)
class Snapshot:
    """A conversation's state after one turn. Never mutated (restored by copy: its ``log`` too,
    so a turn served again from it, a client's retry, never changes what it holds)."""

    log: CallLog
    upstream: tuple[Message, ...]
    states: tuple[Any, ...]
    pending: Mapping[str, tuple[int, int]]       # native call id -> (upstream message index, part)
    parts: Mapping[int, tuple[str | None, ...]]  # upstream tool message index -> results so far
    foreign: tuple[NativeAction, ...]            # native calls encoded into the variant so far
    seq: int
    nbytes: int = 0                              # about how many bytes its transcript holds


class Conversation:
    """A conversation being served (one request at a time)."""

    def __init__(self, bound: Bound, log: CallLog, control: Control, instructions: bool,
                 snap: Snapshot | None = None) -> None:
        self.bound = bound
        self.log = log
        self.instructions = instructions
        self.session: Session = bound.codec.session(bound.domain, control)
        self.nbytes = snap.nbytes if snap is not None else 0
        if snap is None:
            self.upstream: list[Message] = []
            self.pending: dict[str, tuple[int, int]] = {}
            self.parts: dict[int, list[str | None]] = {}
            self.foreign: list[NativeAction] = []
            self.seq = 0
        else:
            self.session.states = copy.deepcopy(list(snap.states))
            self.upstream = list(snap.upstream)
            self.pending = dict(snap.pending)
            self.parts = {k: list(v) for k, v in snap.parts.items()}
            self.foreign = list(snap.foreign)
            self.seq = snap.seq
        self._sized = len(self.upstream)  # messages counted in nbytes

    def snapshot(self) -> Snapshot:
        for m in self.upstream[self._sized:]:
            self.nbytes += _size(m)
        self._sized = len(self.upstream)
        return Snapshot(self.log.copy(), tuple(self.upstream), tuple(self.session.states), dict(self.pending),
                        {k: tuple(v) for k, v in self.parts.items()}, tuple(self.foreign), self.seq, self.nbytes)

    def _id(self, prefix: str) -> str:
        self.seq += 1
        return f"{prefix}_{self.log.conv_id[:12]}_{self.seq}"

    # -- the agent's messages -> the upstream transcript ---------------------------------

    def add(self, message: Any, index: int) -> None:
        """Append one agent message the upstream has not seen."""
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise RequestError("each message must be an object with a 'role'", where=f"messages[{index}]")
        role = message["role"]
        if role == "tool":
            self._tool_result(message, index)
        elif role == "assistant":
            self._foreign_assistant(message, index)
        elif role in ("system", "developer") and self.instructions:
            extra = "\n\n".join(self.bound.codec.instructions())
            content = message.get("content")
            if extra and isinstance(content, str):
                message = {**message, "content": f"{content}\n\n{extra}"}
            self.upstream.append(dict(message))
        else:
            self.upstream.append(dict(message))

    def _tool_result(self, message: Mapping[str, Any], index: int) -> None:
        call_id = message.get("tool_call_id")
        where = self.pending.pop(call_id, None) if isinstance(call_id, str) else None
        if where is None:
            raise RequestError(f"tool message for an unknown tool call id {call_id!r}", where=f"messages[{index}]",
                               fix="answer each tool call of the preceding assistant message once, by its id")
        at, part = where
        content = message.get("content")
        text = content if isinstance(content, str) else _to_json(content)
        self.parts[at][part] = text
        self.nbytes += len(text)
        if all(p is not None for p in self.parts[at]):
            parts = self.parts.pop(at)
            body = parts[0] if len(parts) == 1 else "[" + ",".join(_as_json_text(p) for p in parts) + "]"
            self.upstream[at] = {**self.upstream[at], "content": body}

    def _foreign_assistant(self, message: Mapping[str, Any], index: int) -> None:
        """An assistant message the proxy did not produce: its native calls are encoded into
        the variant (protocol calls answered through a session, as the oracle plays them)."""
        calls = message.get("tool_calls") or []
        content = message.get("content")
        if not calls:
            self.upstream.append({"role": "assistant", "content": content if isinstance(content, str) else ""})
            return
        codec = self.bound.codec
        first = True
        for j, c in enumerate(calls):
            fn = c.get("function") if isinstance(c, Mapping) else None
            if not isinstance(fn, Mapping) or not isinstance(c.get("id"), str):
                raise RequestError("a tool call needs an 'id' and a 'function' object",
                                   where=f"messages[{index}].tool_calls[{j}]")
            parsed = ToolCall.from_raw(c["id"], str(fn.get("name") or ""), fn.get("arguments"))
            if parsed.arguments is None:
                raise RequestError(f"arguments of '{parsed.name}' are not a JSON object: {parsed.parse_error}",
                                   where=f"messages[{index}].tool_calls[{j}]")
            action = NativeAction(self.bound.domain, parsed.name, parsed.arguments)
            before = len(codec.encode(self.foreign))
            self.foreign.append(action)
            encoded = codec.encode(self.foreign)[before:]
            self.log.rebuilt += 1
            for k, vcall in enumerate(encoded):
                up_id = self._id("tb")
                self.upstream.append({"role": "assistant", "content": (content or "") if first else "",
                                      "tool_calls": [_wire_call(up_id, vcall.name, vcall.arguments)]})
                first = False
                decoded = self.session.decode(vcall)
                if decoded.outcome is Outcome.NATIVE and k == len(encoded) - 1:
                    self.upstream.append({"role": "tool", "tool_call_id": up_id, "content": None})
                    self.parts[len(self.upstream) - 1] = [None]
                    self.pending[c["id"]] = (len(self.upstream) - 1, 0)
                else:
                    self.upstream.append({"role": "tool", "tool_call_id": up_id,
                                          "content": _tool_text(decoded)})

    # -- one agent turn ------------------------------------------------------------------

    async def turn(self, upstream: Upstream, tool_choice: str | None, max_rounds: int) -> tuple[Message, str]:
        """Ask the upstream until it makes a native call or answers; return the agent's
        assistant message (native calls only) and the finish reason."""
        self._fill_unanswered()
        self.log.turns += 1
        tools = self.bound.tools
        for round_ in range(max_rounds):
            out = await upstream(self.upstream, tools, tool_choice if round_ == 0 else _later(tool_choice))
            self.log.rounds += 1
            self.log.prompt_tokens += out.usage.prompt_tokens
            self.log.completion_tokens += out.usage.completion_tokens
            if not out.tool_calls:
                self.upstream.append({"role": "assistant", "content": out.content or ""})
                self.log.last_answer = out.content
                return {"role": "assistant", "content": out.content or ""}, "stop"
            native = self._decode_round(out)
            if native:
                msg: Message = {"role": "assistant", "content": out.content, "tool_calls": native}
                return msg, "tool_calls"
            self.log.protocol_rounds += 1
        self.log.termination = "protocol_round_limit"
        text = (f"[toolbias proxy] the model made {max_rounds} rounds of protocol or rejected calls without a "
                f"native call; giving up on this turn")
        self.upstream.append({"role": "assistant", "content": text})
        return {"role": "assistant", "content": text}, "stop"

    def _decode_round(self, out: ModelOutput) -> list[dict[str, Any]]:
        """Record the upstream's calls; return the native tool calls for the agent."""
        wire = []
        up_ids = [self._id("tb") for _ in out.tool_calls]
        for up_id, tc in zip(up_ids, out.tool_calls, strict=True):
            wire.append({"id": up_id, "type": "function", "function": {"name": tc.name, "arguments": tc.raw_arguments}})
        self.upstream.append({"role": "assistant", "content": out.content or "", "tool_calls": wire})
        native: list[dict[str, Any]] = []
        for up_id, tc in zip(up_ids, out.tool_calls, strict=True):
            entry: dict[str, Any] = {"round": self.log.rounds, "tool_call": tc.to_dict()}
            if tc.arguments is None:
                decoded: Decoded | None = None
                text = f"Error: could not parse the arguments of '{tc.name}': {tc.parse_error}"
            else:
                decoded = self.session.decode(Call(tc.name, tc.arguments))
                text = _tool_text(decoded) if decoded.outcome is not Outcome.NATIVE else ""
            entry["decoded"] = decoded.to_dict() if decoded is not None else None
            if decoded is not None and decoded.outcome is Outcome.NATIVE:
                self.upstream.append({"role": "tool", "tool_call_id": up_id, "content": None})
                at = len(self.upstream) - 1
                self.parts[at] = [None] * len(decoded.actions)
                ids = []
                for part, action in enumerate(decoded.actions):
                    nid = self._id("call")
                    self.pending[nid] = (at, part)
                    ids.append(nid)
                    native.append(_wire_call(nid, action.tool, action.arguments))
                entry["native_ids"] = ids
                self.log.native_calls += len(ids)
            else:
                if decoded is not None and decoded.outcome is Outcome.REPLY:
                    self.log.replies += 1
                else:
                    self.log.rejections += 1
                self.upstream.append({"role": "tool", "tool_call_id": up_id, "content": text})
                entry["message"] = text
            self.log.calls.append(entry)
        return native

    def _fill_unanswered(self) -> None:
        """A native call the agent never answered (it moved on): the upstream is told so."""
        if not self.pending:
            return
        for call_id, (at, part) in list(self.pending.items()):
            self.parts[at][part] = _to_json({"error": f"the agent returned no result for call {call_id}"})
        self.pending.clear()
        for at, parts in list(self.parts.items()):
            body = parts[0] if len(parts) == 1 else "[" + ",".join(_as_json_text(p) for p in parts) + "]"
            self.upstream[at] = {**self.upstream[at], "content": body}
        self.parts.clear()


def _size(m: Message) -> int:
    """About how many bytes a transcript message holds (its text and call arguments)."""
    content = m.get("content")
    n = 64 + (len(content) if isinstance(content, str) else 0)
    for c in m.get("tool_calls") or ():
        args = (c.get("function") or {}).get("arguments")
        n += 64 + (len(args) if isinstance(args, str) else 0)
    return n


def _later(tool_choice: str | None) -> str | None:
    # "required" forces the first call of a turn only: a protocol round must be free to answer
    return None if tool_choice == "required" else tool_choice


def _tool_text(decoded: Decoded) -> str:
    return decoded.protocol_text() or ""  # a native call's text is the agent's own tool result


def _wire_call(call_id: str, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": _to_json(dict(arguments))}}


def _as_json_text(text: str | None) -> str:
    """One part of a combined tool message: the agent's JSON as is, other text as a JSON string."""
    if text is None:
        return "null"
    try:
        json.loads(text)
        return text
    except ValueError:
        return _to_json(text)
