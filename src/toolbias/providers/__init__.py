"""Model providers behind one async interface, resolved from one spec string.

``openai:<model>`` (any OpenAI-compatible server), ``local`` / ``local:PATH.gguf``
(embedded llama.cpp), ``oracle`` (plays the gold through the codec), ``scripted:FILE``
and ``replay:FILE`` (tests). Kinds map to ``module:Class`` paths and are imported
lazily, so optional back-ends cost nothing until used.
"""

from __future__ import annotations

import importlib
from typing import Any

from ..errors import ProviderError
from .base import GenerateConfig, InfraError, Message, ModelAPI, ModelOutput, ToolCall, Usage

#: provider kind -> "module:factory"; factory(arg: str, **options) -> ModelAPI
PROVIDER_KINDS: dict[str, str] = {
    "openai": "toolbias.providers.openai:OpenAIProvider",
    "local": "toolbias.providers.local:LocalProvider",
    "oracle": "toolbias.providers.oracle:OracleProvider",
    "scripted": "toolbias.providers.scripted:ScriptedProvider",
    "replay": "toolbias.providers.replay:ReplayProvider",
}


def make_provider(spec: str, **options: Any) -> ModelAPI:
    """Build the provider a model spec names (``openai:gpt-4o-mini``, ``local``, ``oracle`` ...)."""
    kind, _, arg = spec.partition(":")
    target = PROVIDER_KINDS.get(kind)
    if target is None:
        raise ProviderError(f"unknown model kind '{kind}'", where=f"model spec '{spec}'",
                            fix="use openai:<model>, local, local:PATH.gguf, oracle, scripted:FILE or replay:FILE")
    module_name, _, attr = target.partition(":")
    factory = getattr(importlib.import_module(module_name), attr)
    provider: ModelAPI = factory(arg, **options)
    return provider


__all__ = ["PROVIDER_KINDS", "GenerateConfig", "InfraError", "Message", "ModelAPI", "ModelOutput", "ToolCall",
           "Usage", "make_provider"]
