"""Schema operators: one module each, all implementing :class:`~toolbias.operators.base.Layer`.

``OPERATORS`` maps the ``op`` of a variant step to its layer class: one explicit table
(:class:`~toolbias.base.plugins.Registry`), each module imported when its op is first used.
Adding an operator is adding its module and a line here.
"""

from __future__ import annotations

from ..base.plugins import Registry
from ..errors import VariantError
from .base import ALL_DOMAINS, Call, Flag, FlagKind, Forward, Layer, Reject, RejectionKind, Reply

OPERATORS: Registry[type[Layer]] = Registry("operator", {
    "discovery": "toolbias.operators.discovery:Discovery",
    "merge": "toolbias.operators.merge:Merge",
    "nest": "toolbias.operators.nest:Nest",
    "paper": "toolbias.operators.paper.layer:PaperSurface",  # the paper artifact's own renderings
    "flatten": "toolbias.operators.nest:Flatten",
    "reference": "toolbias.operators.reference:Reference",
    "rename": "toolbias.operators.rename:Rename",
    "reorder": "toolbias.operators.reorder:Reorder",
    "split": "toolbias.operators.split:Split",
    "strip": "toolbias.operators.strip:StripDescriptions",
    "transaction": "toolbias.operators.transaction:Transaction",
}, error=VariantError)

__all__ = ["ALL_DOMAINS", "OPERATORS", "Call", "Flag", "FlagKind", "Forward", "Layer", "Reject",
           "RejectionKind", "Reply"]
