"""Option sets several commands share, declared once: the model and where it is served, the
store, how many requests at once. A command adds one with a decorator (``@store_option()``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

MODEL_HELP = ("openai:<model>, openai-responses:<model>, anthropic:<model>, local, local:PATH.gguf, oracle, "
              "scripted:FILE, replay:FILE")


def model_option(*, default: str | None = None, required: bool = False, help: str = MODEL_HELP) -> Callable[[F], F]:
    """``--model`` (env TOOLBIAS_MODEL): a model spec."""
    return click.option("--model", default=default, required=required, show_default=default is not None,
                        envvar="TOOLBIAS_MODEL", help=help)


def base_url_option(fn: F) -> F:
    """``--base-url``, repeatable: OpenAI-compatible endpoints sharing the load."""
    return click.option("--base-url", multiple=True, help="OpenAI-compatible endpoint(s); repeat to share load "
                        "[env OPENAI_BASE_URL]")(fn)


def store_option(default: str | None = "toolbias.db", help: str = "SQLite file of the study") -> Callable[[F], F]:
    """``--store``: the SQLite file results go to (or are read from)."""
    return click.option("--store", default=default, show_default=default is not None, help=help)


def concurrency_option(fn: F) -> F:
    """``--concurrency``: model requests in flight at once."""
    return click.option("--concurrency", type=int, default=8, show_default=True,
                        help="model requests in flight at once")(fn)


def study_concurrency_option(fn: F) -> F:
    """``--concurrency`` of the commands that play a study (:class:`toolbias.study.StudyConfig`): left
    out, as many episodes as the model decodes at once (the embedded model: its batch), else 8."""
    return click.option("--concurrency", type=click.IntRange(min=1), default=None,
                        help="model requests in flight at once [default: 8; the embedded model: as many as it "
                             "decodes at once, 16]")(fn)


def task_file_option(fn: F) -> F:
    """``--task-file``: the catalog's tasks from a JSONL file (:mod:`toolbias.catalog.taskfile`),
    the same on every command that plays or draws tasks (``StudyConfig.task_file``)."""
    return click.option("--task-file", type=click.Path(dir_okay=False, exists=True),
                        help="the catalog's tasks from this JSONL file ({id, query, gold_calls, domain?, "
                             "check_calls?} a line) instead of its own")(fn)


#: the values of :class:`toolbias.study.paper_protocol.Protocol`, spelled here so that a command
#: taking ``--protocol`` does not import the study package to declare it (a test keeps them equal)
PROTOCOLS = ("toolbias", "paper")


def protocol_option(help: str, *, default: str = "toolbias") -> Callable[[F], F]:
    """``--protocol``: whose evaluation protocol a command plays (toolbias's own or the paper's)."""
    return click.option("--protocol", type=click.Choice(PROTOCOLS), default=default, show_default=True, help=help)


__all__ = ["MODEL_HELP", "PROTOCOLS", "base_url_option", "concurrency_option", "model_option", "protocol_option",
           "store_option", "study_concurrency_option", "task_file_option"]
