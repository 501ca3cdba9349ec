"""The registry of named variants, one module per operator family.

Each module of this package exports ``VARIANTS: list[VariantSpec]``; names are
stable (snake_case) and unique across modules. ``paper`` names the entry of the
schema-bias paper's ``registry.json`` a variant reproduces. Modules are collected
in file-name order, so adding a family is adding a module.
"""

from __future__ import annotations

import importlib
import pkgutil

from ..errors import VariantError
from ..variants import VariantSpec

#: family modules listed first keep the registry's order stable and readable
_ORDER = ("representation", "merge", "split", "protocol")


def _collect() -> dict[str, VariantSpec]:
    names = [m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")]
    names.sort(key=lambda n: (_ORDER.index(n) if n in _ORDER else len(_ORDER), n))
    out: dict[str, VariantSpec] = {}
    for name in names:
        module = importlib.import_module(f"{__name__}.{name}")
        for spec in getattr(module, "VARIANTS", []):
            if spec.name in out:
                raise VariantError(f"variant name '{spec.name}' registered twice", where=module.__name__)
            out[spec.name] = spec
    return out


REGISTRY: dict[str, VariantSpec] = _collect()
