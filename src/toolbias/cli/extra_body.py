"""``--extra-body JSON``: fields merged into every request body a model provider sends (for example
``{"chat_template_kwargs": {"enable_thinking": false}}`` for vLLM/SGLang Qwen3). Part of the
provider's settings, so a study with other extras is another study."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from ..errors import ProviderError

if TYPE_CHECKING:
    from ..study.runner import StudyConfig

#: the model kinds that send HTTP request bodies (and so take extra fields)
HTTP_KINDS = ("openai", "openai-responses", "anthropic")
HELP = ('JSON object merged into every model request body, e.g. \'{"chat_template_kwargs": '
        '{"enable_thinking": false}}\' (openai:, openai-responses: and anthropic: models)')


def extra_body_option() -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return click.option("--extra-body", "extra_body", default=None, metavar="JSON", help=HELP)


def parse_extra_body(text: str | None, model: str) -> dict[str, Any] | None:
    """The ``--extra-body`` object, or None; refuses malformed JSON, a non-object and a model kind
    that sends no request body."""
    if text is None or not text.strip():
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ProviderError(f"--extra-body is not valid JSON: {exc}", where="--extra-body",
                            fix='write one JSON object, e.g. \'{"chat_template_kwargs": {"enable_thinking": false}}\''
                            ) from None
    if not isinstance(value, dict):
        raise ProviderError(f"--extra-body must be a JSON object, got {type(value).__name__}", where="--extra-body",
                            fix='write one JSON object, e.g. \'{"top_k": 20}\'')
    kind = model.partition(":")[0]
    if kind not in HTTP_KINDS:
        raise ProviderError(f"model '{model}' sends no request body to add fields to", where="--extra-body",
                            fix=f"use --extra-body with {', '.join(k + ':<model>' for k in HTTP_KINDS)}")
    return value


def with_extra_body(options: dict[str, Any], text: str | None, model: str) -> dict[str, Any]:
    """``options`` (provider options) with ``extra_body`` added when ``--extra-body`` is given."""
    body = parse_extra_body(text, model)
    return {**options, "extra_body": body} if body is not None else options


def apply_extra_body(cfg: StudyConfig, text: str | None) -> StudyConfig:
    """The study config with ``--extra-body`` added to its provider options."""
    if text is None:
        return cfg
    return dataclasses.replace(cfg, provider_options=with_extra_body(dict(cfg.provider_options), text, cfg.model))


__all__ = ["HTTP_KINDS", "apply_extra_body", "extra_body_option", "parse_extra_body", "with_extra_body"]
