"""Tool lists as pydantic (and so most agent frameworks, tau2-bench) writes them load as
catalogs: ``$defs`` references in place, ``Optional[X] = None`` fields as type lists, and every
registered variant verifies on them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toolbias.catalog import load_catalog
from toolbias.catalog.refs import inline_refs
from toolbias.errors import CatalogError
from toolbias.variants.verify import verify_all

NULL = {"type": "null"}

#: what pydantic writes for a model with Optional fields and a nested model (field order kept)
ORDER_TOOLS = [
    {"type": "function", "function": {
        "name": "search_orders", "description": "Find a customer's orders.",
        "parameters": {"type": "object", "title": "SearchOrders", "required": ["customer_id"], "properties": {
            "customer_id": {"type": "string", "description": "The customer."},
            "status": {"anyOf": [{"type": "string", "enum": ["open", "shipped", "closed"]}, NULL],
                       "default": None, "description": "Only orders in this status."},
            "limit": {"anyOf": [{"type": "integer", "minimum": 1, "maximum": 50}, NULL], "default": None}}}}},
    {"type": "function", "function": {
        "name": "update_address", "description": "Change an order's delivery address.",
        "parameters": {"type": "object", "required": ["order_id", "address"], "properties": {
            "order_id": {"type": "string"},
            "address": {"$ref": "#/$defs/Address"},
            "note": {"anyOf": [{"type": "string"}, NULL], "default": None}},
            "$defs": {"Address": {"type": "object", "title": "Address", "required": ["street", "city"],
                                  "properties": {"street": {"type": "string"}, "city": {"type": "string"},
                                                 "zip": {"anyOf": [{"type": "string"}, NULL]}}}}}}},
    {"type": "function", "function": {
        "name": "cancel_order", "description": "Cancel an order.",
        "parameters": {"type": "object", "required": ["order_id", "reason"], "properties": {
            "order_id": {"type": "string"},
            "reason": {"type": "string", "enum": ["no longer needed", "ordered by mistake"]}}}}},
]


def test_optional_fields_become_type_lists_and_optional_enums_their_values() -> None:
    params = inline_refs(ORDER_TOOLS[0]["function"]["parameters"])
    props = params["properties"]
    assert props["limit"] == {"type": ["integer", "null"], "minimum": 1, "maximum": 50, "default": None}
    # an optional enum's null is its absence: the enum stays one type
    assert props["status"] == {"type": "string", "enum": ["open", "shipped", "closed"], "default": None,
                               "description": "Only orders in this status."}
    address = inline_refs(ORDER_TOOLS[1]["function"]["parameters"])["properties"]["address"]
    assert address["properties"]["zip"] == {"type": ["string", "null"]} and "$defs" not in json.dumps(address)


def test_an_optional_model_is_an_object_or_null() -> None:
    schema = {"type": "object", "properties": {"to": {"anyOf": [{"$ref": "#/$defs/A"}, NULL], "default": None}},
              "$defs": {"A": {"type": "object", "properties": {"city": {"type": "string"}}}}}
    assert inline_refs(schema)["properties"]["to"] == {"type": ["object", "null"], "default": None,
                                                        "properties": {"city": {"type": "string"}}}


def test_a_required_nullable_enum_is_refused_by_name(tmp_path: Path) -> None:
    tools: list[Any] = [{"type": "function", "function": {"name": "set_mode", "parameters": {
        "type": "object", "required": ["mode"],
        "properties": {"mode": {"anyOf": [{"type": "string", "enum": ["a", "b"]}, NULL]}}}}}]
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(tools))
    with pytest.raises(CatalogError) as err:
        load_catalog(f"tools:{path}")
    assert "'anyOf'" in err.value.what and "mode" in str(err.value)


def test_a_pydantic_tool_file_loads_and_every_variant_verifies(tmp_path: Path) -> None:
    path = tmp_path / "orders.json"
    path.write_text(json.dumps(ORDER_TOOLS))
    catalog = load_catalog(f"tools:{path}")
    shown = json.dumps([t.to_openai() for t in catalog.tools])
    assert "anyOf" not in shown and "$ref" not in shown
    results = verify_all(catalog)
    assert len(results) >= 60  # every registered variant that applies
    assert [r.name for r in results if not r.ok] == [], [r.examples for r in results if not r.ok]


def test_definitions_that_expand_exponentially_are_refused_not_expanded() -> None:
    """Each level's model holds the next one twice: 2^30 nodes written in place."""
    defs = {f"L{i}": {"type": "object", "properties": {"a": {"$ref": f"#/$defs/L{i + 1}"},
                                                       "b": {"$ref": f"#/$defs/L{i + 1}"}}} for i in range(30)}
    defs["L30"] = {"type": "string"}
    with pytest.raises(CatalogError, match="more than 100,000 schema nodes"):
        inline_refs({"type": "object", "properties": {"x": {"$ref": "#/$defs/L0"}}, "$defs": defs})
