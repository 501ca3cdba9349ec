"""Cross-call protocol variants (transaction, reference resolution, schema discovery)
and the composed variant (several operators in one catalog)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..operators import OPERATORS
from ..variants import VariantSpec

#: the paper's "composed" arm (artifact ``specs/mixed.json``) mixes a partial merge, enum
#: splits, interval splits and reference resolution in one catalog. Ours stacks the same
#: families over any catalog: class-semantic merges down to half the function count
#: (tools left unmerged stay native), one enum argument folded into the names of what
#: is left plus interval splits of its numeric arguments, then reference resolution.
#: Each step is kept only if its operator is installed; the protocol comes last.
_COMPOSED_CANDIDATES: tuple[Mapping[str, Any], ...] = (
    {"op": "merge", "groups": "class", "ratio": 0.5},
    {"op": "split", "method": "one_enum", "interval": True},
    {"op": "reference"},
)


def composed_steps() -> tuple[dict[str, Any], ...]:
    return tuple(dict(s) for s in _COMPOSED_CANDIDATES if s["op"] in OPERATORS)


def _composed_description(steps: tuple[dict[str, Any], ...]) -> str:
    ops = " + ".join(str(s["op"]) for s in steps)
    return f"several operators in one catalog: {ops}"


_STEPS = composed_steps()

VARIANTS: list[VariantSpec] = [
    VariantSpec("transaction", ({"op": "transaction"},),
                "every action is begin(tool) -> write_<tool>(handle, ...) -> commit(handle)",
                paper="transaction", tags=("representative",)),
    VariantSpec("reference_resolution", ({"op": "reference"},),
                "each tool's instance argument is passed as a ref_... id from resolve_<argument>(value)",
                paper="reference resolution", tags=("representative",)),
    VariantSpec("schema_discovery", ({"op": "discovery"},),
                "tools listed without argument schemas; get_tool_schema(name) before invoking",
                paper="schema discovery", tags=("representative",)),
    VariantSpec("composed", _STEPS, _composed_description(_STEPS), paper="composed", tags=("composition",)),
]
