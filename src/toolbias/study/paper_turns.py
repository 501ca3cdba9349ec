"""How the schema-bias artifact reads one model answer (``eval/run_agentic.py``): which calls
count and what arguments they run with. Shared by its episode loop (:mod:`.paper_episode`) and its
tau2 adapter (:mod:`.paper_seam`), and kept apart from both so neither imports the other."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from ..providers.base import ModelOutput, ToolCall


def paper_arguments(raw: str) -> tuple[Any, bool]:
    """The arguments the artifact executes for a call's argument text, and whether it failed to
    read them (text that is not JSON, or JSON that is not an object, runs as ``{}``)."""
    try:
        value = json.loads(raw or "{}")
    except (ValueError, RecursionError):
        return {}, True
    return (value, False) if isinstance(value, dict) else ({}, True)


def paper_turn(out: ModelOutput, turn: int) -> tuple[tuple[ToolCall, ...], str | None]:
    """The calls and the text of one answer as the artifact reads them on turn ``turn`` (from 1):
    only the calls the API returned as tool calls (calls the provider recovered from the text are
    none: the text stays as the model wrote it), each with the server's id, or ``call_<turn>_<i>``
    where the server sent none."""
    if out.recovered:
        return (), out.raw_content if out.raw_content is not None else out.content
    calls = tuple(replace(c, id=f"call_{turn}_{i}", generated_id=False) if c.generated_id else c
                  for i, c in enumerate(out.tool_calls))
    return calls, out.content


__all__ = ["paper_arguments", "paper_turn"]
