"""Cross-call protocol variants (transaction, reference resolution, schema discovery)
and the composed variant (several operators in one catalog)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..operators import OPERATORS
from ..variant_spec import VariantSpec

#: the paper's "composed" arm (artifact ``specs/mixed.json``) applies a partial merge, enum
#: splits, interval splits and reference resolution to different tools of one catalog. Ours
#: does the same on any catalog without naming tools: class-semantic merges down to half the
#: function count (tools left unmerged stay native), interval splits of the required numeric
#: arguments (a dispatcher's are not required, so only unmerged tools split), then reference
#: resolution of each tool's instance argument. No enum split: it would fold the dispatchers'
#: ``operation`` discriminators back into names. (``toolbias shape --spec specs/mixed.json``
#: builds the artifact's exact arm.) Each step is kept only if its operator is installed;
#: the protocol comes last.
_COMPOSED_CANDIDATES: tuple[Mapping[str, Any], ...] = (
    {"op": "merge", "groups": "class", "ratio": 0.5},
    {"op": "split", "method": "interval"},
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
