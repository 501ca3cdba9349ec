"""The registry of named variants, one module per operator family.

``VARIANT_FAMILIES`` lists each family's ``VARIANTS: list[VariantSpec]`` (one explicit
:class:`~toolbias.base.plugins.Registry`, in the order the registry shows them); names are stable
(snake_case) and unique across families. ``paper`` names the entry of the schema-bias paper's
``registry.json`` a variant reproduces. Adding a family is adding its module and a line here.
"""

from __future__ import annotations

from ...base.plugins import Registry
from ...errors import VariantError
from ..spec import VariantSpec

VARIANT_FAMILIES: Registry[list[VariantSpec]] = Registry("variant family", {
    "representation": "toolbias.variants.named.representation:VARIANTS",
    "merge": "toolbias.variants.named.merge:VARIANTS",
    "split": "toolbias.variants.named.split:VARIANTS",
    "protocol": "toolbias.variants.named.protocol:VARIANTS",
}, error=VariantError)


def _collect() -> dict[str, VariantSpec]:
    out: dict[str, VariantSpec] = {}
    for family, specs in VARIANT_FAMILIES.items():
        for spec in specs:
            if spec.name in out:
                raise VariantError(f"variant name '{spec.name}' registered twice", where=f"{__name__}.{family}")
            out[spec.name] = spec
    return out


REGISTRY: dict[str, VariantSpec] = _collect()

__all__ = ["REGISTRY", "VARIANT_FAMILIES"]
