"""Model providers behind one async interface, resolved from one spec string.

``openai:<model>`` (any OpenAI-compatible server), ``openai-responses:<model>`` (the OpenAI
Responses API), ``anthropic:<model>`` (the Anthropic messages API), ``local`` / ``local:PATH.gguf``
(embedded llama.cpp), ``oracle`` (plays the gold through the codec), ``scripted:FILE``
and ``replay:FILE`` (tests). ``PROVIDERS`` is one explicit table
(:class:`~toolbias.base.plugins.Registry`) of lazily imported factories, so optional back-ends
cost nothing until used.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..base.plugins import Plugin, Registry
from ..errors import ProviderError
from .base import GenerateConfig, InfraError, Message, ModelAPI, ModelOutput, ToolCall, Usage

#: provider kind -> factory(arg: str, **options) -> ModelAPI
PROVIDERS: Registry[Callable[..., ModelAPI]] = Registry("model kind", {
    "openai": "toolbias.providers.openai:OpenAIProvider",
    "openai-responses": "toolbias.providers.responses:OpenAIResponsesProvider",
    "anthropic": "toolbias.providers.anthropic:AnthropicProvider",
    "local": Plugin("toolbias.providers.local:LocalProvider", extra="local"),
    "oracle": "toolbias.providers.oracle:OracleProvider",
    "scripted": "toolbias.providers.scripted:ScriptedProvider",
    "replay": "toolbias.providers.replay:ReplayProvider",
}, error=ProviderError)


def make_provider(spec: str, **options: Any) -> ModelAPI:
    """Build the provider a model spec names (``openai:gpt-4o-mini``, ``local``, ``oracle`` ...)."""
    kind, _, arg = spec.partition(":")
    factory = PROVIDERS.resolve(kind, where=f"model spec '{spec}'",
                                fix="use openai:<model>, openai-responses:<model>, anthropic:<model>, local, "
                                    "local:PATH.gguf, oracle, scripted:FILE or replay:FILE")
    return factory(arg, **options)


__all__ = ["PROVIDERS", "GenerateConfig", "InfraError", "Message", "ModelAPI", "ModelOutput", "ToolCall",
           "Usage", "make_provider"]
