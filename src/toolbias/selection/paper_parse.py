"""The paper's selection parsing (PROTOCOL.md 1.8), kept apart from the exact rule of :mod:`.parse`.

Two steps, as the authors' scripts do them:

1. **The action** (:func:`paper_action`). Function calling: the first call's name (the text
   after its last ``.``). Text mode: the first case-insensitive ``action`` (optionally
   followed by ``:`` or ``-``), anywhere, even inside a word such as "transaction"; in the text
   after it, the function names are tried in PRESENTED order (Finish last) and the first
   that occurs as a whole word wins; if none does, the same on the whole output.
2. **The recording** (:func:`paper_record`). The name is split at its LAST ``_for_``; the
   cluster API is the first endpoint (clusters and endpoints in benchmark order) whose
   slug(api_name) CONTAINS the API part and whose slug(tool) CONTAINS the tool part; the
   list position is the first presented endpoint whose slug(api_name) contains the API part
   (tool ignored). These substring matches are the bug the exact rule avoids: on the
   BiasBusters clusters, ``whois`` is credited to ``whois_by_api_ninjas`` and ``geocode``
   takes the position of ``forward_geocode``.

Records carry both readings (``api``/``position`` exact; ``paper_api``/``paper_position``
the paper's), so a report can show what the substring rule did to a model.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from ..providers.base import ModelOutput
from .toolbench import ToolbenchAPI, api_of
from .types import Benchmark, Cluster, SelectionTool

_ACTION = re.compile(r"action[:\-]?", re.I)


def slug(text: str) -> str:
    """NFKD to ASCII, lower case, runs of non-alphanumerics to ``_``, outer ``_`` removed, ``get_`` before a digit."""
    s = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii").lower()
    s = re.sub(r"[^a-z0-9]+", "_", s).strip("_")
    return "get_" + s if s[:1].isdigit() else s


def _first_whole_word(text: str, names: Sequence[str]) -> str | None:
    for name in names:
        if re.search(rf"\b{re.escape(name)}\b", text):
            return name
    return None


def paper_action(output: ModelOutput, shown: Sequence[str], *, function_calling: bool) -> str:
    """The name the paper's scripts read from an answer ('' when they read none)."""
    if function_calling:
        if not output.tool_calls:
            return ""
        return output.tool_calls[0].name.rsplit(".", 1)[-1]
    text = output.content or ""
    names = [*shown, "Finish"]
    m = _ACTION.search(text)
    if m:
        hit = _first_whole_word(text[m.end():], names) or _first_whole_word(text, names)
        if hit:
            return hit
    return ""


@dataclass(frozen=True)
class PaperReading:
    """The paper's record of one answer: cluster and API (0-based) and list position, or a reason."""

    action: str
    cluster: str | None = None
    api: int | None = None
    position: int | None = None
    reason: str = ""


def original_api(tool: SelectionTool) -> ToolbenchAPI:
    """The endpoint as the paper's extractor knows it: before any name mapping of a perturbation."""
    stored = tool.metadata.get("toolbench_original")
    return ToolbenchAPI.from_dict(stored) if isinstance(stored, dict) else api_of(tool)


def paper_record(action: str, presented: Sequence[SelectionTool], clusters: Sequence[Cluster]) -> PaperReading:
    """Credit ``action`` as the authors' extractor does (``presented``: the trial's tools in shown order)."""
    if not action or "_for_" not in action:
        return PaperReading(action, reason="no action" if not action else "no _for_ in the action (Finish?)")
    api_part, _, tool_part = action.rpartition("_for_")
    if not api_part:
        return PaperReading(action, reason="empty API part")
    hit: tuple[str, int] | None = None
    for c in clusters:
        for i, t in enumerate(c.tools):
            a = original_api(t)
            if api_part in slug(a.api_name) and tool_part in slug(a.tool_name):
                hit = (c.id, i)
                break
        if hit:
            break
    if hit is None:
        return PaperReading(action, reason="matches no endpoint")
    position = next((j for j, t in enumerate(presented) if api_part in slug(original_api(t).api_name)), None)
    return PaperReading(action, cluster=hit[0], api=hit[1], position=position)


def paper_reading(output: ModelOutput, shown: Sequence[str], presented: Sequence[SelectionTool],
                  bench: Benchmark | Sequence[Cluster], *, function_calling: bool) -> PaperReading:
    """Both steps; a name shown under a mapped tool name is first mapped back to the original one (as the
    paper's parser maps ``_for_<mapped>`` back to ``_for_<original>``)."""
    clusters = bench.clusters if isinstance(bench, Benchmark) else bench
    action = paper_action(output, shown, function_calling=function_calling)
    if action in shown:
        original = original_api(presented[list(shown).index(action)])
        mapped = api_of(presented[list(shown).index(action)])
        if original.tool_name != mapped.tool_name:
            action = action.removesuffix(f"_for_{mapped.standard_tool_name}") + f"_for_{original.standard_tool_name}"
    return paper_record(action, presented, clusters)
