"""Per-prompt scrambles (PROTOCOL.md 3): a fresh random 20-character string for every field of every prompt.

A perturbation condition only marks what to scramble (``metadata["scramble"]``: ``desc``,
``blurb``, ``params``; :mod:`.perturb`); :func:`scramble_tools` draws the strings when a
trial's request is built, from an RNG seeded by the trial, so a scrambled tool does not keep
one string across queries (as in the paper) and a re-run draws the same ones (unlike the
paper's unseeded runs, so results resume).

- ``desc``: the API description becomes R20: in the ToolBench text everything after the
  subfunction sentence reads ``The description of this function is: "<R20>"``; a tool
  without an API description is unchanged;
- ``blurb``: the tool description (the blurb of the ToolBench tool list) becomes R20; the
  list line is ``<n>.<tool>:<R20>`` (``blurb_spaced``: ``<n>.<tool>: <R20>``, the full and
  all-but-one scrambles);
- ``params``: every parameter description, empty ones included, becomes R20; names, types
  and example values stay;
- ``paper_spacing``: the blurb line as the authors' code writes it, one space more
  (``<n>.<tool>: <R20>``, spaced ``<n>.<tool>:  <R20>``; the ``--paper`` replays).
"""

from __future__ import annotations

import json
import random
import string
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from .toolbench import api_of
from .types import SelectionTool

R20_ALPHABET = string.ascii_letters + string.digits
MARKS = ("desc", "blurb", "blurb_spaced", "params", "paper_spacing")


def r20(rng: random.Random) -> str:
    """20 characters drawn uniformly with replacement from ASCII letters (both cases) and digits."""
    return "".join(rng.choice(R20_ALPHABET) for _ in range(20))


def _scramble_params(params: Sequence[Any], rng: random.Random) -> list[dict[str, Any]]:
    return [{**dict(p), "description": r20(rng)} for p in params]


def scramble_tool(tool: SelectionTool, rng: random.Random) -> SelectionTool:
    """The tool with fresh strings in every field its marks name (unchanged without marks)."""
    marks = set(tool.metadata.get("scramble") or ())
    if not marks:
        return tool
    api = api_of(tool)
    tool_changes: dict[str, Any] = {}
    if "desc" in marks and api.description_rest():
        s = r20(rng)
        api = replace(api, api_description=s, rest=f"The description of this function is: \"{s}\"")
        tool_changes["api_description"] = s
    if marks & {"blurb", "blurb_spaced"}:
        s = r20(rng)
        # the authors' code writes one space more: `1.tool: R20` and `1.tool:  R20` (mark ``paper_spacing``)
        sep = (" " if "blurb_spaced" in marks else "") + (" " if "paper_spacing" in marks else "")
        api = replace(api, tool_description=s, blurb_sep=sep)
        tool_changes["tool_description"] = s
    if "params" in marks:
        api = replace(api, required_parameters=tuple(_scramble_params(api.required_parameters, rng)),
                      optional_parameters=tuple(_scramble_params(api.optional_parameters, rng)))
        schema = json.loads(json.dumps(dict(tool.parameters)))
        for prop in (schema.get("properties") or {}).values():
            if isinstance(prop, dict):
                prop["description"] = r20(rng)
        tool_changes["parameters"] = schema
    return replace(tool, **tool_changes, metadata={**tool.metadata, "toolbench": api.to_dict()})


def scramble_tools(tools: Sequence[SelectionTool], rng: random.Random) -> list[SelectionTool]:
    return [scramble_tool(t, rng) for t in tools]
