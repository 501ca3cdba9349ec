"""Cross-call protocol variants (transaction, reference resolution, schema discovery)
and the composed variant (several operators in one catalog)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...operators import OPERATORS
from ..spec import VariantSpec

#: toolbias's own composition (kept as ``composed_class_merge``): class-semantic merges down to
#: half the function count (tools left unmerged stay native), interval splits of the required
#: numeric arguments (a dispatcher's are not required, so only unmerged tools split), then
#: reference resolution of each tool's instance argument. Each step is kept only if its
#: operator is installed; the protocol comes last. The paper's composed arm is the ``composed``
#: recipe (:mod:`toolbias.variants.recipes`).
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
    VariantSpec("transaction", ({"op": "transaction", "method": "per_function"},),
                "per native function f with 2+ arguments: begin_<f>() returns a txn_id, one "
                "set_<f>__<arg>(txn_id, <arg>) per argument, commit_<f>(txn_id) executes f (one-argument "
                "functions stay native)", paper="transaction", tags=("representative",)),
    VariantSpec("reference_resolution", ({"op": "reference", "method": "per_function", "select": "free_text"},),
                "every free-text argument takes an opaque handle from resolve_<f>__<arg>(query), one resolver per "
                "function and argument (none in domains without free strings)",
                paper="reference resolution", tags=("representative",)),
    VariantSpec("schema_discovery", ({"op": "discovery", "method": "catalog"},),
                "the whole catalog as two tools: list_methods(class) returns that class's native schemas "
                "(classes = domains), invoke(class, method, arguments) runs one", paper="schema discovery",
                tags=("representative",)),
    VariantSpec("composed", ({"op": "recipe", "name": "composed"},),
                "the artifact's specs/mixed.json rule: per domain every second tool merged into one flat "
                "dispatcher; the others enum-split, interval-split at the interval cut, free-text arguments "
                "resolved per function", paper="composed", tags=("representative",)),
    VariantSpec("transaction_shared", ({"op": "transaction"},),
                "toolbias's transaction: per domain begin(tool) -> write_<tool>(handle, ...) -> commit(handle)",
                tags=("control",)),
    VariantSpec("reference_resolution_instance", ({"op": "reference"},),
                "toolbias's references: each tool's instance argument is passed as a ref_... id from a shared "
                "resolve_<argument>(value)", tags=("control",)),
    VariantSpec("schema_discovery_per_tool", ({"op": "discovery"},),
                "toolbias's discovery: tools listed without argument schemas; get_tool_schema(name) before "
                "invoking", tags=("control",)),
    VariantSpec("composed_class_merge", _STEPS, _composed_description(_STEPS), tags=("composition",)),
]
