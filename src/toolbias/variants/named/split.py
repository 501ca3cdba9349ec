"""Split variants: enum values and numeric ranges folded into tool names, and the split ladder."""

from __future__ import annotations

from ..spec import VariantSpec

VARIANTS: list[VariantSpec] = [
    VariantSpec("fully_split", ({"op": "split", "method": "enum"},),
                "every required enumerable argument folded into the tool names (finest ladder step)",
                paper="fully split", tags=("representative", "ladder")),
    VariantSpec("interval_split", ({"op": "split", "method": "interval"},),
                "each numeric argument split at one cut (the catalog's declared cut: the artifact's pred.json; else the "
                "range midpoint, else the gold values' upper median) "
                "into range-named tools; the value is still passed", paper="interval split",
                tags=("representative",)),
    VariantSpec("split_enum_1_5x", ({"op": "split", "method": "ladder", "ratio": 1.5},),
                "partial enum split, 1.5x the native function count per domain", paper="split · enum 1.5x",
                tags=("ladder",)),
    VariantSpec("split_enum_2_9x", ({"op": "split", "method": "ladder", "ratio": 2.9},),
                "partial enum split, 2.9x the native function count per domain", paper="split · enum 2.9x",
                tags=("ladder",)),
    VariantSpec("split_enum_5_4x", ({"op": "split", "method": "ladder", "ratio": 5.4},),
                "partial enum split, 5.4x the native function count per domain", paper="split · enum 5.4x",
                tags=("ladder",)),
    VariantSpec("split_one_enum", ({"op": "split", "method": "one_enum", "choose": "first"},),
                "the first enumerable argument of each tool folded into its name", paper="split · one enum"),
    VariantSpec("split_all_enums", ({"op": "split", "method": "enum", "max_per_tool": 24},),
                "enumerable arguments folded in order while a tool splits into at most 24 tools",
                paper="split · all enums"),
]
