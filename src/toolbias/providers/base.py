"""The one provider interface, and the values that cross it.

Messages and tools are plain OpenAI chat dicts. A provider returns a
:class:`ModelOutput`; a malformed tool call is a :class:`ToolCall` with a
``parse_error``, never an exception. Infrastructure failures (network, HTTP 5xx,
timeouts) raise :class:`InfraError`, which the wrapper retries and the runner
stores apart from model failures.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..variants.codec import MAX_ARGUMENT_DEPTH, too_deep

if TYPE_CHECKING:
    from ..catalog.model import Task
    from ..variants.codec import Codec

Message = dict[str, Any]


@dataclass(frozen=True)
class GenerateConfig:
    """Sampling settings: part of the cache key and the provider settings hash."""

    temperature: float = 0.0
    max_tokens: int = 512
    top_p: float | None = None
    seed: int | None = None
    #: request fields sent as they are (the proxy forwards a client's ``stop``, ``response_format`` ...);
    #: the ``openai:`` kind merges them into its request body; absent from :meth:`to_dict` when empty,
    #: so the settings hash of every config without them is unchanged
    extra: Mapping[str, Any] | None = field(default=None, hash=False)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if not self.extra:
            del out["extra"]
        return out


@dataclass(frozen=True)
class ToolCall:
    """A tool call as the model produced it. ``arguments`` is None when ``parse_error`` is set."""

    id: str
    name: str
    arguments: dict[str, Any] | None
    raw_arguments: str = ""
    parse_error: str | None = None
    #: the server sent no id for the call (none, null or ``""``): ``id`` is the provider's own
    #: (``call_<i>``); a loop that names such calls its own way (the paper's protocol) reads this
    generated_id: bool = False

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "name": self.name, "arguments": self.arguments,
                               "raw_arguments": self.raw_arguments, "parse_error": self.parse_error}
        if self.generated_id:  # only when it says something: cached calls with ids keep their old form
            out["generated_id"] = True
        return out

    @classmethod
    def from_wire(cls, id: str, name: str, raw: Any, *, generated_id: bool = False) -> ToolCall:
        """:meth:`from_raw` for a call a server sent: one without a function name is a parse error too.
        ``generated_id``: ``id`` is the provider's, the server sent none."""
        call = cls.from_raw(id, name, raw)
        if not name and call.parse_error is None:
            call = cls(call.id, "", call.arguments, call.raw_arguments, "the tool call has no function name")
        return replace(call, generated_id=True) if generated_id else call

    @classmethod
    def from_raw(cls, id: str, name: str, raw: Any) -> ToolCall:
        """Parse raw arguments (a JSON string or object) without ever raising."""
        if isinstance(raw, dict):
            try:
                text = json.dumps(raw, ensure_ascii=False)
            except (TypeError, ValueError, RecursionError) as exc:
                return cls(id, name, None, repr(raw)[:10000], f"arguments are not JSON data: {exc}")
            if too_deep(raw, MAX_ARGUMENT_DEPTH):
                return cls(id, name, None, text[:10000], f"arguments nest deeper than {MAX_ARGUMENT_DEPTH} levels")
            return cls(id, name, raw, text)
        try:
            text = raw if isinstance(raw, str) else json.dumps(raw)
        except (TypeError, ValueError, RecursionError) as exc:
            return cls(id, name, None, repr(raw)[:10000], f"arguments are not JSON data: {exc}")
        if text is None or text.strip() == "":
            return cls(id, name, {}, "")
        try:
            value = json.loads(text)
        except (ValueError, RecursionError) as exc:  # ValueError: also integers past the digit limit
            return cls(id, name, None, text[:10000], f"arguments are not valid JSON: {exc}")
        if not isinstance(value, dict):
            return cls(id, name, None, text[:10000], f"arguments must be a JSON object, got {type(value).__name__}")
        if too_deep(value, MAX_ARGUMENT_DEPTH):
            return cls(id, name, None, text[:10000], f"arguments nest deeper than {MAX_ARGUMENT_DEPTH} levels")
        return cls(id, name, value, text)


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0


@dataclass(frozen=True)
class ModelOutput:
    content: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    latency_s: float = 0.0
    #: the calls were recovered from text (Hermes <tool_call>, bare or fenced JSON)
    recovered: bool = False
    cached: bool = False
    #: when the calls were recovered from text: that text as the model wrote it (``content`` is
    #: what is left without the calls); None otherwise
    raw_content: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"content": self.content, "tool_calls": [c.to_dict() for c in self.tool_calls],
                               "usage": asdict(self.usage), "latency_s": self.latency_s,
                               "recovered": self.recovered, "cached": self.cached}
        if self.raw_content is not None:
            out["raw_content"] = self.raw_content
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ModelOutput:
        return cls(content=d.get("content"), tool_calls=tuple(ToolCall(**c) for c in d.get("tool_calls", [])),
                   usage=Usage(**d.get("usage", {})), latency_s=d.get("latency_s", 0.0),
                   recovered=d.get("recovered", False), cached=d.get("cached", False),
                   raw_content=d.get("raw_content"))


class InfraError(Exception):
    """The provider could not produce an answer (network, server, timeout): not the model's fault."""

    def __init__(self, message: str, *, retryable: bool = True, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after


class ModelAPI(ABC):
    """One model behind one interface. Subclasses implement ``generate``."""

    #: the model spec string (``openai:gpt-4o``, ``local``, ``oracle`` ...)
    spec: str = ""
    #: where requests go; part of the cache key and the concurrency-limit key
    base_url: str | None = None
    #: the most episodes worth running at once (None: no limit beyond --concurrency)
    max_concurrency: int | None = None
    #: its work is this process's CPU (no I/O, no threads or server of its own), so a study
    #: may play its episodes in forked worker processes (``StudyConfig.workers``)
    cpu_bound: bool = False
    #: its answer is a function of the request (messages, tools, tool_choice, config), so the
    #: wrapper may keep it in a response cache; False for agents bound to a task (oracle, scripted)
    cacheable: bool = False
    #: the wire form of its requests where two differ: ``"toolbias"``, or ``"paper"`` (the
    #: schema-bias artifact's, set by a study under ``--protocol paper``: its Responses API requests
    #: carry no ``temperature`` or ``store`` and mark every tool ``"strict": false``)
    request_form: str = "toolbias"

    @property
    def caches_responses(self) -> bool:
        """It keeps answers in a response cache file, which forked worker processes would share."""
        return False

    @abstractmethod
    async def generate(self, messages: list[Message], tools: list[dict[str, Any]], tool_choice: str | None,
                       config: GenerateConfig) -> ModelOutput:
        """One completion. ``tool_choice`` is None (auto), "auto", "required" or "none"."""

    def settings(self) -> dict[str, Any]:
        """What identifies this provider's behaviour (no secrets): hashed into episode keys."""
        return {"spec": self.spec}

    def behaviour(self) -> dict[str, Any]:
        """:meth:`settings` minus where requests go: replicas, ports and extra --base-url servers
        may change between a study's runs (resume, shards) without changing its episodes."""
        return {k: v for k, v in self.settings().items() if k not in ("base_url", "base_urls")}

    def for_episode(self, task: Task, codec: Codec) -> ModelAPI:
        """The agent for one episode. Models ignore this; the oracle and scripted
        providers bind to the task (its gold, its id) here."""
        return self

    async def check(self) -> None:
        """Raise ProviderError with a clear message if the model cannot be used (before any episode)."""

    async def aclose(self) -> None:
        """Release connections or model memory."""
