"""Native and per-tool representation variants (nest, rename, strip, reorder)."""

from __future__ import annotations

from ..variants import VariantSpec

VARIANTS: list[VariantSpec] = [
    VariantSpec("native", (), "the catalog as given", paper="native", tags=("representative",)),
    VariantSpec("strip_descriptions", ({"op": "strip"},), "tool and parameter descriptions removed",
                paper="strip descriptions", tags=("representative",)),
]
