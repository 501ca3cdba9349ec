"""Native and per-tool representation variants (nest, rename, strip, reorder)."""

from __future__ import annotations

from ..spec import VariantSpec

VARIANTS: list[VariantSpec] = [
    VariantSpec("native", (), "the catalog as given", paper="native", tags=("representative",)),
    VariantSpec("strip_descriptions", ({"op": "strip"},), "tool and parameter descriptions removed",
                paper="strip descriptions", tags=("representative",)),
    VariantSpec("nested_args", ({"op": "nest", "method": "pack", "into": "options", "keep": 1},),
                "every argument after the first goes into one 'options' object (tools with 3+ arguments)",
                paper="nested args", tags=("representative",)),
    VariantSpec("namespaced_names",
                ({"op": "rename", "method": "namespace", "scope": "catalog", "prefix": "domain"},),
                "every domain's tools in every episode, named <class>__<tool> (the paper: whole catalog, its "
                "classes are the domains)", paper="namespaced names", tags=("representative",)),
    VariantSpec("reorder_arguments", ({"op": "reorder", "seed": 13},),
                "seeded permutation of every tool's parameter order", paper="reorder arguments",
                tags=("representative",)),
    VariantSpec("opaque_names", ({"op": "rename", "method": "opaque", "seed": 0, "params": False},),
                "tool names replaced by opaque identifiers f_00..f_NN (parameters keep their names)",
                paper="rename · opaque"),
    VariantSpec("opaque_names_and_params", ({"op": "rename", "method": "opaque", "seed": 0, "params": True},),
                "opaque tool names f_00.. and parameter names p_0..", tags=("control",)),
    VariantSpec("namespaced_names_by_object", ({"op": "rename", "method": "namespace"},),
                "each domain's own tools prefixed with the object they act on: window__set_window",
                tags=("control",)),
    VariantSpec("flat_args", ({"op": "flatten"},),
                "nested object arguments flattened into top-level outer__inner keys (identity without objects)",
                tags=("control",)),
]
