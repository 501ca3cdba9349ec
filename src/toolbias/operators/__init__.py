"""Schema operators: one module each, all implementing :class:`~toolbias.operators.base.Layer`.

``OPERATORS`` maps the ``op`` of a variant step to its layer class. It is filled by
importing every module of this package, so adding an operator is adding a module.
"""

from __future__ import annotations

import importlib
import pkgutil

from .base import ALL_DOMAINS, Call, Flag, FlagKind, Forward, Layer, Reject, RejectionKind, Reply


def _discover() -> dict[str, type[Layer]]:
    found: dict[str, type[Layer]] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_") or info.name == "base":
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, Layer) and value.op and value.__module__ == module.__name__:
                if value.op in found and found[value.op] is not value:
                    raise RuntimeError(f"operator '{value.op}' defined twice")
                found[value.op] = value
    return found


OPERATORS: dict[str, type[Layer]] = _discover()

__all__ = ["ALL_DOMAINS", "OPERATORS", "Call", "Flag", "FlagKind", "Forward", "Layer", "Reject",
           "RejectionKind", "Reply"]
