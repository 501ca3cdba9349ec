"""Strip descriptions: remove tool and parameter descriptions (names and types stay)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..catalog.model import Tool
from .base import Layer, outer_tool


class StripDescriptions(Layer):
    op = "strip"
    PARAMS = ()

    def __init__(self, inner: Sequence[Tool], params: Mapping[str, Any]) -> None:
        super().__init__(inner, params)
        # properties are names, not keywords: only strip keyword-level descriptions
        self.tools = tuple(outer_tool(t, description="", parameters=_strip_params(t.parameters)) for t in self.inner)


def _strip_params(params: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in params.items() if k not in ("description", "title", "examples")}
    if "properties" in out:
        out["properties"] = {name: _strip_params(sub) for name, sub in out["properties"].items()}
    if isinstance(out.get("items"), Mapping):
        out["items"] = _strip_params(out["items"])
    return out
