"""Small builders the operator tests share: a variant spec from steps, one decoded call, a tool
from its properties, a string enum, and the artifact's catalog (skipped where absent)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from tests.support.paths import SHARED_DATA
from toolbias import Call, Catalog, Codec, Tool, VariantSpec, load_catalog
from toolbias.variants.codec import Decoded

TSS = SHARED_DATA / "toolschemaspace"


def spec(*steps: Mapping[str, Any]) -> VariantSpec:
    return VariantSpec("test", tuple(dict(s) for s in steps))


def decode1(codec: Codec, domain: str, name: str, args: Mapping[str, Any], control: str = "strict") -> Decoded:
    return codec.session(domain, control).decode(Call(name, dict(args)))


def tool(name: str, domain: str, props: dict[str, Any], required: list[str] | None = None, cls: str = "") -> Tool:
    return Tool(name, f"{name} tool.", {"type": "object", "properties": props,
                                         "required": list(props) if required is None else required}, domain, cls)


def E(*values: Any) -> dict[str, Any]:
    return {"type": "string", "enum": list(values)}


def toolschemaspace_catalog() -> Catalog:
    """The artifact's catalog from ../shared/data, or a skip saying where it was looked for."""
    if not (TSS / "tools.json").is_file():
        pytest.skip(f"../shared/data/toolschemaspace not found at {TSS}")
    return load_catalog(f"toolschemaspace:{TSS}")
