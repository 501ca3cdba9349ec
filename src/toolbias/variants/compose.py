"""Composing operator steps into a codec: the one loop behind every variant.

Each step ``{"op": ..., **params}`` names an operator (:data:`~toolbias.operators.OPERATORS`)
applied to the schema the steps before it made; the first applies to the native catalog.
:func:`toolbias.variants.resolve.build_codec` composes a named or file-given variant (recipes
expanded first); importers compose the steps they are still assembling.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..catalog.model import Catalog
from ..errors import VariantError
from ..operators import OPERATORS
from ..operators.base import Layer
from .codec import Codec


def compose(catalog: Catalog, steps: Sequence[Mapping[str, Any]], *, name: str, where: str) -> Codec:
    """The codec of ``steps`` applied in order to ``catalog``; an unknown op, a step after a
    cross-call protocol or parameters that cannot give an equivalent schema raise VariantError
    naming ``where`` and the step."""
    layers: list[Layer] = []
    tools: Sequence[Any] = catalog.tools
    for i, step in enumerate(steps):
        op = step.get("op")
        cls = OPERATORS.get(str(op))
        if cls is None:
            raise VariantError(f"unknown operator '{op}' in step {i + 1}", where=where,
                               fix=f"use one of: {', '.join(sorted(OPERATORS))}")
        params = {k: v for k, v in step.items() if k != "op"}
        for earlier in layers:  # protocols stack (the artifact's curryind: references inside transactions)
            if earlier.protocol and not cls.protocol:
                raise VariantError(f"step {i + 1} ('{op}') comes after the cross-call protocol '{earlier.op}'",
                                   where=where,
                                   fix="put protocol operators (transaction, reference, discovery) last")
        try:
            layer = cls(tools, cls.prepare(params, catalog))
        except VariantError as exc:  # name the spec (file) and the step, not only the operator
            inner = f"{exc.where}: {exc.what}" if exc.where else exc.what
            raise VariantError(inner, where=f"{where}, step {i + 1}", fix=exc.fix) from None
        layers.append(layer)
        tools = layer.tools
    return Codec(catalog, layers, name=name)


__all__ = ["compose"]
