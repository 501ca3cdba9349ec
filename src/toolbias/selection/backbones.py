"""The paper's backbones: PROTOCOL.md section 1's per-model settings, one row per backbone.

``select run --paper --backbone B`` (or the backbone inferred from the model spec) applies a
row of :data:`BACKBONES` exactly:

==============  ====================  =====  ============  ======  ======================  ==========
backbone        presentation          max    stop          re-ask  other                   paper models
==============  ====================  =====  ============  ======  ======================  ==========
``text``        toolbench (1.3)       512    End Action    no      penalties 0             GPT-3.5, GPT-4.1 mini, DeepSeek
``function``    toolbench-functions   1024   none          12      legacy ``functions``,   GPT-3.5 "Func."
                (1.4)                                              penalties 0
``claude``      toolbench, no system  512    \\n\\nHuman:    no      one user message        Claude 3.5 Sonnet
``qwen``        toolbench             512    End Action    no      enable_thinking false   Qwen3 1.7B-235B
``toolllama``   toolbench, raw string 512    </s>          no      ``/completions``        ToolLLaMA-2-7B
==============  ====================  =====  ============  ======  ======================  ==========

Every row: the ``base`` AutoGPT template, temperature 0.5, top-p 1, no seed, no tool_choice,
3 runs. Every field can be overridden (:meth:`Backbone.with_overrides`); a backbone that
differs from its row is labelled ``name(field=value,...)``, and the label is stored in each
record's ``backbone`` field, which is part of the result group.

The wire part (stop sequences, penalties, the thinking switch, the ``functions`` parameter,
the re-ask rule, no system message, the raw completion) is sent by :class:`BackboneModel`,
which drives an :class:`~toolbias.providers.openai.OpenAIProvider`'s connection. The legacy
``functions`` parameter is only known to be honoured by api.openai.com (vLLM and SGLang
drop unknown fields silently): ``functions_param="auto"`` sends it there and ``tools``
elsewhere, with a note (:func:`resolve_functions_param`); ``functions``/``tools`` force one.

Not reproduced: ToolLLaMA's left truncation of the prompt to 8192-512-8 tokens (it needs the
model's tokenizer; the benchmark's prompts are far shorter), Claude's and Gemini's own APIs
(an OpenAI-compatible endpoint serves them here), the authors' 5 and 10 retries (the
provider wrapper's policy applies).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import Any
from urllib.parse import urlparse

from ..errors import ToolbiasError
from ..providers.base import GenerateConfig, InfraError, Message, ModelAPI, ModelOutput

STOP_TEXT = "End Action"
STOP_CLAUDE = "\n\nHuman:"
STOP_TOOLLLAMA = "</s>"
FUNCTIONS_PARAMS = ("auto", "functions", "tools")
ENDPOINTS = ("chat", "completions")


@dataclass(frozen=True)
class Backbone:
    """One backbone's settings (PROTOCOL.md 1.3-1.7); see the module doc for the table."""

    name: str
    presentation: str = "toolbench"
    prompt: str = "base"
    temperature: float = 0.5
    top_p: float | None = 1.0
    max_tokens: int = 512
    stop: tuple[str, ...] = (STOP_TEXT,)
    #: send frequency_penalty 0 and presence_penalty 0 (the OpenAI backbones)
    penalties: bool = False
    #: the function-calling backbone's tool parameter: auto, functions (legacy) or tools
    functions_param: str = "tools"
    #: at most this many calls per trial: a reply without a function call is appended and asked again
    reask: int = 1
    #: Qwen3's switch, sent as ``chat_template_kwargs: {"enable_thinking": ...}``; None: not sent
    enable_thinking: bool | None = None
    #: keep the empty system message of the text prompt (Claude: one user message only)
    system_message: bool = True
    #: chat: /chat/completions; completions: the prompt string as a raw completion (ToolLLaMA)
    endpoint: str = "chat"
    runs: int = 3

    def __post_init__(self) -> None:
        if self.functions_param not in FUNCTIONS_PARAMS:
            raise ToolbiasError(f"unknown functions parameter '{self.functions_param}'",
                                fix=f"use {', '.join(FUNCTIONS_PARAMS)}")
        if self.endpoint not in ENDPOINTS:
            raise ToolbiasError(f"unknown endpoint '{self.endpoint}'", fix=f"use {', '.join(ENDPOINTS)}")
        if self.reask < 1:
            raise ToolbiasError(f"re-ask limit must be at least 1 call, got {self.reask}")
        if self.max_tokens < 1:
            raise ToolbiasError(f"max tokens must be at least 1, got {self.max_tokens}")

    def with_overrides(self, **given: Any) -> Backbone:
        """This backbone with every option in ``given`` that is not None applied (``stop=()``: no stop)."""
        unknown = set(given) - {f.name for f in fields(self)}
        if unknown:
            raise TypeError(f"unknown backbone settings: {sorted(unknown)}")
        changes: dict[str, Any] = {k: (tuple(v) if k == "stop" else v) for k, v in given.items() if v is not None}
        return replace(self, **changes)

    @property
    def preset(self) -> Backbone:
        return BACKBONES[self.name]

    def overrides(self) -> dict[str, Any]:
        """The fields that differ from the paper's row (the number of runs aside: records carry their run)."""
        base = self.preset
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) != getattr(base, f.name)
                and f.name != "runs" and not (f.name == "functions_param" and base.functions_param == "auto")}

    @property
    def label(self) -> str:
        """``name`` for the paper's row, else ``name(field=value,...)`` (stored with every record)."""
        changed = self.overrides()
        name = self.name + (f"[{self.functions_param}]" if self.function_calling and self.functions_param != "auto"
                            else "")
        if not changed:
            return name
        return f"{name}(" + ",".join(f"{k}={_short(v)}" for k, v in sorted(changed.items())) + ")"

    @property
    def function_calling(self) -> bool:
        return self.presentation == "toolbench-functions"

    def wire(self) -> dict[str, Any]:
        """What the model sees beyond messages and sampling: hashed into the trial key (model settings)."""
        d = asdict(self)
        for k in ("presentation", "prompt", "temperature", "top_p", "max_tokens", "runs"):
            d.pop(k)
        d["stop"] = list(self.stop)
        d["label"] = self.label
        return d

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["stop"] = list(self.stop)
        d["label"] = self.label
        return d


def _short(v: Any) -> str:
    if isinstance(v, tuple):
        return "[" + "|".join(repr(s)[1:-1] for s in v) + "]"
    return str(v)


BACKBONES: dict[str, Backbone] = {
    # GPT-3.5-turbo (main table), GPT-4.1 mini, DeepSeek: `chatgpt`, `chatgpt-4`, `deepseek` (1.3, 1.6)
    "text": Backbone("text", stop=(STOP_TEXT,), penalties=True),
    # GPT-3.5 "Func.": `chatgpt_function` (1.4): legacy functions, 1024 tokens, no stop, re-asked up to depth 12
    "function": Backbone("function", presentation="toolbench-functions", max_tokens=1024, stop=(), penalties=True,
                         functions_param="auto", reask=12),
    # Claude 3.5 Sonnet: one user message, no system prompt, stop "\n\nHuman:"
    "claude": Backbone("claude", stop=(STOP_CLAUDE,), system_message=False),
    # Qwen3 (DashScope, OpenAI-compatible): fixed 0.5 / 1, stop End Action, no thinking
    "qwen": Backbone("qwen", stop=(STOP_TEXT,), enable_thinking=False),
    # ToolLLaMA-2-7B: the raw string, 512 new tokens, stop </s>
    "toolllama": Backbone("toolllama", stop=(STOP_TOOLLLAMA,), endpoint="completions"),
}

#: (substring of the lower-cased model spec, backbone), first match wins
_INFER: tuple[tuple[str, str], ...] = (("toolllama", "toolllama"), ("claude", "claude"), ("qwen", "qwen"))


def infer_backbone(spec: str | None) -> tuple[str, str]:
    """The backbone a model spec suggests and why: ToolLLaMA, Claude or Qwen by name, else ``text``."""
    low = (spec or "").lower()
    for needle, name in _INFER:
        if needle in low:
            return name, f"inferred from '{spec}' (contains '{needle}')"
    return "text", (f"inferred from '{spec}' (no ToolLLaMA, Claude or Qwen in its name: the text backbone)"
                    if spec else "the default (no model to infer it from)")


def get_backbone(name: str | None, spec: str | None = None) -> tuple[Backbone, str]:
    """The paper's row ``name`` (None: inferred from ``spec``) and a line saying how it was chosen."""
    if name is None:
        name, why = infer_backbone(spec)
    else:
        why = "given"
    if name not in BACKBONES:
        raise ToolbiasError(f"unknown backbone '{name}'", fix=f"use one of: {', '.join(BACKBONES)}")
    return BACKBONES[name], why


def resolve_functions_param(backbone: Backbone, base_urls: Sequence[str]) -> tuple[Backbone, str | None]:
    """``auto`` made concrete for these servers: ``functions`` on api.openai.com, ``tools`` elsewhere (with a
    note saying why). Other backbones and explicit values pass unchanged (note None)."""
    if not backbone.function_calling or backbone.functions_param != "auto":
        return backbone, None
    hosts = [(urlparse(u).hostname or "").lower() for u in base_urls]
    if hosts and all(h == "api.openai.com" or h.endswith(".openai.com") for h in hosts):
        return replace(backbone, functions_param="functions"), None
    return replace(backbone, functions_param="tools"), (
        "note: the paper's function-calling backbone sent the legacy `functions` parameter; only api.openai.com is "
        "known to honour it (vLLM and SGLang ignore unknown fields silently), so the same six function dicts go "
        "in `tools` here (--functions-param functions sends `functions` anyway)")


class BackboneModel(ModelAPI):
    """A backbone's wire settings over an OpenAI-compatible provider's connection (see the module doc)."""

    #: the response cache key holds the provider's settings, the backbone's wire settings among them
    cacheable = True

    def __init__(self, inner: Any, backbone: Backbone) -> None:
        from ..providers.openai import OpenAIProvider

        if not isinstance(inner, OpenAIProvider):
            raise ToolbiasError(f"the {backbone.name} backbone's wire settings need an OpenAI-compatible server",
                                where=f"model spec '{getattr(inner, 'spec', inner)}'",
                                fix="use openai:<model> --base-url URL, or leave --paper/--backbone out")
        if backbone.functions_param == "auto":
            backbone, _ = resolve_functions_param(backbone, inner.base_urls)
        self.inner = inner
        self.backbone = backbone
        self.spec = inner.spec
        self.base_url = inner.base_url
        self.max_concurrency = inner.max_concurrency

    def settings(self) -> dict[str, Any]:
        return {**self.inner.settings(), "backbone": self.backbone.wire()}

    async def check(self) -> None:
        await self.inner.check()

    async def aclose(self) -> None:
        await self.inner.aclose()

    def request_body(self, messages: list[Message], tools: list[dict[str, Any]], tool_choice: str | None,
                     config: GenerateConfig) -> tuple[str, dict[str, Any]]:
        """(path, JSON body) of one call: the provider's chat request with the backbone's settings."""
        bb = self.backbone
        if bb.endpoint == "completions":
            prompt = "".join(str(m.get("content") or "") for m in messages if m.get("role") == "user")
            body: dict[str, Any] = {"model": self.inner.model, "prompt": prompt, "temperature": config.temperature,
                                    "max_tokens": config.max_tokens}
            if config.top_p is not None:
                body["top_p"] = config.top_p
            if config.seed is not None:
                body["seed"] = config.seed
            if self.inner.extra_body:
                body.update(self.inner.extra_body)
            path = "/completions"
        else:
            if not bb.system_message:
                messages = [m for m in messages if not (m.get("role") == "system" and not m.get("content"))]
            legacy = bb.function_calling and bb.functions_param == "functions" and tools
            body = self.inner.chat_request(messages, [] if legacy else tools, tool_choice, config)
            if legacy:
                body["functions"] = [t.get("function", t) for t in tools]
            if bb.enable_thinking is not None:
                kwargs = dict(body.get("chat_template_kwargs") or {})
                kwargs["enable_thinking"] = bb.enable_thinking
                body["chat_template_kwargs"] = kwargs
            path = "/chat/completions"
        if bb.stop:
            body["stop"] = list(bb.stop)
        if bb.penalties:
            body.setdefault("frequency_penalty", 0)
            body.setdefault("presence_penalty", 0)
        return path, body

    async def _once(self, messages: list[Message], tools: list[dict[str, Any]], tool_choice: str | None,
                    config: GenerateConfig) -> ModelOutput:
        url = self.inner.next_url()
        path, body = self.request_body(messages, tools, tool_choice, config)
        t0 = time.perf_counter()
        response = await self.inner.post_json(url, path, body)
        latency = time.perf_counter() - t0
        if path == "/completions":
            choices = response.get("choices")
            if not choices or not isinstance(choices, list) or not isinstance(choices[0], dict):
                raise InfraError(f"{url}: the server returned no choices", retryable=True)
            text = choices[0].get("text")
            return ModelOutput(content=text if isinstance(text, str) else None, latency_s=latency)
        _legacy_call_to_tool_call(response)
        return self.inner._to_output(response, tools, tool_choice, latency, url)

    async def generate(self, messages: list[Message], tools: list[dict[str, Any]], tool_choice: str | None,
                       config: GenerateConfig) -> ModelOutput:
        """One trial: up to ``reask`` calls, each reply without a function call appended before the next."""
        history = list(messages)
        out = await self._once(history, tools, tool_choice, config)
        calls = 1
        while not out.tool_calls and calls < self.backbone.reask:
            history = [*history, {"role": "assistant", "content": out.content or ""}]
            out = await self._once(history, tools, tool_choice, config)
            calls += 1
        return out


def _legacy_call_to_tool_call(response: Mapping[str, Any]) -> None:
    """A legacy ``message.function_call`` read as one tool call (in place), so the provider's mapping applies."""
    choices = response.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return
    message = choices[0].get("message")
    if not isinstance(message, dict) or message.get("tool_calls"):
        return
    fc = message.get("function_call")
    if isinstance(fc, dict) and fc.get("name"):
        message["tool_calls"] = [{"id": "call_0", "type": "function",
                                  "function": {"name": fc["name"], "arguments": fc.get("arguments") or "{}"}}]


def for_backbone(model: ModelAPI, backbone: Backbone) -> tuple[ModelAPI, str | None]:
    """``model`` sending the backbone's wire settings, and a note for the user (or None).

    ``chooser:`` models read the prompt only and pass unchanged; other non-OpenAI providers get the prompt and
    sampling settings but not the wire settings (a note says so)."""
    from ..providers.openai import OpenAIProvider

    if isinstance(model, OpenAIProvider):
        bb, note = resolve_functions_param(backbone, model.base_urls)
        return BackboneModel(model, bb), note
    if model.spec.startswith("chooser:"):
        return model, None
    return model, (f"note: {model.spec} is not an OpenAI-compatible server: the {backbone.name} backbone's prompt "
                   "and sampling apply, its stop sequences, penalties, thinking switch and re-ask rule do not")


def paper_settings(backbone: Backbone, **given: Any) -> Any:
    """The :class:`~toolbias.selection.settings.RunSettings` of a backbone, with ``given`` (not None) applied."""
    from .settings import PAPER

    base = replace(PAPER, presentation=backbone.presentation, prompt=backbone.prompt,
                   temperature=backbone.temperature, top_p=backbone.top_p, max_tokens=backbone.max_tokens,
                   runs=backbone.runs, seed=None, tool_choice=None)
    changes = {k: v for k, v in given.items() if v is not None}
    if changes.get("tool_choice") == "unset":
        changes["tool_choice"] = None
    if changes.get("seed") == -1:
        changes["seed"] = None
    settings = replace(base, **changes)
    # the run's own max_tokens and sampling are the backbone's too (one label for what was sent)
    bb = backbone.with_overrides(presentation=settings.presentation, prompt=settings.prompt,
                                 temperature=settings.temperature, top_p=settings.top_p,
                                 max_tokens=settings.max_tokens, runs=settings.runs)
    return replace(settings, backbone=bb)


def resolve_paper(model: str | None, *, backbone: str | None = None, stop: Sequence[str] | None = None,
                  reask: int | None = None, thinking: str | None = None, functions_param: str | None = None,
                  **given: Any) -> tuple[Any, str]:
    """``--paper``'s settings for a model spec: the backbone named (or inferred from ``model``) with the wire
    overrides (``stop``: ``["none"]`` for no stop; ``thinking``: on, off or unset) and the run settings in
    ``given`` applied; and a line saying how the backbone was chosen."""
    bb, why = get_backbone(backbone, model)
    stops = None if not stop else (() if list(stop) == ["none"] else tuple(stop))
    bb = bb.with_overrides(stop=stops, reask=reask, functions_param=functions_param)
    if thinking is not None:
        switches = {"on": True, "off": False, "unset": None}
        if thinking not in switches:
            raise ToolbiasError(f"unknown thinking switch '{thinking}'", fix="use on, off or unset")
        bb = replace(bb, enable_thinking=switches[thinking])
    return paper_settings(bb, **given), why


BACKBONE_NAMES = tuple(BACKBONES)

__all__ = ["BACKBONES", "BACKBONE_NAMES", "Backbone", "BackboneModel", "for_backbone", "get_backbone",
           "infer_backbone", "paper_settings", "resolve_functions_param", "resolve_paper"]
