"""Variants as data: an ordered list of operator steps, composed into a codec.

A :class:`~toolbias.variant_spec.VariantSpec` is JSON-serialisable (``{"name", "steps":
[{"op", ...params}]}``); :func:`build_codec` turns a spec plus a catalog into a
:class:`~toolbias.codec.Codec`. Named variants live in the registry (``toolbias.registry``),
one file per operator family; :func:`resolve_variants` finds them by name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .catalog.model import Catalog
from .codec import Codec
from .errors import VariantError
from .operators import OPERATORS
from .operators.base import Layer
from .registry import REGISTRY
from .variant_spec import VariantSpec


def build_codec(catalog: Catalog, spec: VariantSpec) -> Codec:
    """Apply ``spec``'s steps to ``catalog``; refuse unknown ops and impossible compositions."""
    layers: list[Layer] = []
    tools: Sequence[Any] = catalog.tools
    where = f"{spec.source}: variant '{spec.name}'" if spec.source else f"variant '{spec.name}'"
    steps = spec.steps
    if any(s.get("op") == "recipe" for s in steps):  # steps a rule gives on this catalog (the paper's composed)
        from .recipes import expand

        steps = expand(steps, catalog, where)
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
    return Codec(catalog, layers, name=spec.name)


def registry() -> dict[str, VariantSpec]:
    """All named variants, by stable name."""
    return REGISTRY


def get_variant(name: str) -> VariantSpec:
    reg = registry()
    if name in reg:
        return reg[name]
    raise VariantError(f"unknown variant '{name}'", fix=f"use one of: {', '.join(reg)}")


def resolve_variants(selector: str | Sequence[str]) -> list[VariantSpec]:
    """``all``, ``representative``, a comma list of names, or spec files (``*.json``)."""
    reg = registry()
    names = selector.split(",") if isinstance(selector, str) else list(selector)
    out: list[VariantSpec] = []
    for raw in names:
        name = raw.strip()
        if not name:
            continue
        if name == "all":
            out.extend(reg.values())
        elif name == "representative":
            out.extend(v for v in reg.values() if "representative" in v.tags)
        elif name.endswith(".json"):
            out.append(VariantSpec.from_file(name))
        else:
            out.append(get_variant(name))
    seen: dict[str, VariantSpec] = {}
    for v in out:
        seen.setdefault(v.name, v)
    return list(seen.values())


__all__ = ["VariantSpec", "build_codec", "get_variant", "registry", "resolve_variants"]
