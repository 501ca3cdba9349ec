"""Reorder arguments: a seeded permutation of each tool's parameter order.

``{"op": "reorder", "seed": 13}``: every tool's ``properties`` (and ``required``, which
follows the new order) are permuted by a generator seeded with ``seed`` and the tool's
uid, so a tool's order does not depend on the rest of the catalog. A tool with two or
more arguments always gets an order different from its own (a draw that happens to
keep it is rotated by one). ``deep=true`` also permutes nested objects' properties.

Names and values are unchanged, so decoding is the identity; encoding writes the
arguments in the variant's order (as a model reading the schema would).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from ..catalog.model import Tool
from .base import Call, Layer, outer_tool
from .rename import ToolIndex


def _permute(schema: Mapping[str, Any], rng: random.Random, deep: bool) -> dict[str, Any]:
    out = dict(schema)
    props = schema.get("properties")
    if isinstance(props, Mapping) and props:
        names = list(props)
        order = names[:]
        rng.shuffle(order)
        if len(order) > 1 and order == names:
            order = order[1:] + order[:1]
        out["properties"] = {n: _permute(props[n], rng, deep) if deep else props[n] for n in order}
        if "required" in schema:
            req = set(schema.get("required") or [])
            out["required"] = [n for n in order if n in req]
    if deep and isinstance(schema.get("items"), Mapping):
        out["items"] = _permute(schema["items"], rng, deep)
    return out


class Reorder(Layer):
    op = "reorder"
    PARAMS = ("seed", "deep")

    def __init__(self, inner: Sequence[Tool], params: Mapping[str, Any]) -> None:
        super().__init__(inner, params)
        seed = params.get("seed", 0)
        deep = bool(params.get("deep", False))
        self._index = ToolIndex(self.inner)
        self._order: dict[str, tuple[str, ...]] = {}
        tools = []
        for t in self.inner:
            schema = _permute(t.parameters, random.Random(f"reorder:{seed}:{t.uid}"), deep)
            tools.append(outer_tool(t, parameters=schema))
            self._order[t.uid] = tuple(schema.get("properties", {}) or {})
        self.tools = tuple(tools)

    def encode(self, call: Call, domain: str, state: Any) -> list[Call]:
        t = self._index.find(domain, call.name)
        if t is None:
            return [call]
        args = call.arguments
        order = self._order[t.uid]
        out = {k: args[k] for k in order if k in args}
        out.update({k: v for k, v in args.items() if k not in out})
        return [Call(call.name, out)]
