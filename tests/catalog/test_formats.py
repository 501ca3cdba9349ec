"""The one tool-list reader (toolbias.catalog.formats): every format read with every parameter,
the refusals, and ``toolbias shape --format`` round trips (read what was written: the same tools)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run_cli
from toolbias.catalog.formats import FORMATS, from_openapi, read_tools, write_tools
from toolbias.catalog.loaders import load_catalog
from toolbias.catalog.model import Tool
from toolbias.errors import CatalogError
from toolbias.selection.build import read_tools as selection_read_tools
from toolbias.variants import build_codec, resolve_variants

SCHEMA = {"type": "object",
          "properties": {"room": {"type": "string", "enum": ["kitchen", "hall"], "description": "Which room."},
                         "level": {"type": "integer", "minimum": 0, "maximum": 10}},
          "required": ["room"]}
OPENAPI = {"type": "OBJECT",
           "properties": {"level": {"type": "INTEGER", "minimum": 0, "maximum": 10},
                          "room": {"type": "STRING", "enum": ["kitchen", "hall"], "description": "Which room."}},
           "required": ["room"], "propertyOrdering": ["room", "level"]}


def _key(t: Tool) -> tuple[Any, ...]:
    return (t.name, t.description, json.dumps(t.parameters, sort_keys=False), t.title, t.output_schema, t.annotations)


def _one(data: Any) -> Tool:
    tools = read_tools(data, "d", "f.json")
    assert len(tools) == 1
    return tools[0]


# --------------------------------------------------------------------------- every format, every parameter

@pytest.mark.parametrize("entry", [
    {"type": "function", "function": {"name": "set_light", "description": "Light.", "parameters": SCHEMA}},
    {"type": "function", "name": "set_light", "description": "Light.", "parameters": SCHEMA, "strict": False},
    {"name": "set_light", "description": "Light.", "input_schema": SCHEMA, "cache_control": {"type": "ephemeral"}},
    {"type": "custom", "name": "set_light", "description": "Light.", "input_schema": SCHEMA},
    {"name": "set_light", "description": "Light.", "inputSchema": SCHEMA},
    {"name": "set_light", "description": "Light.", "parametersJsonSchema": SCHEMA},
    {"name": "set_light", "description": "Light.", "parameters": OPENAPI},  # uppercase types: Gemini's
    {"functionDeclarations": [{"name": "set_light", "description": "Light.", "parameters": OPENAPI}]},
], ids=["chat", "responses", "anthropic", "anthropic-custom", "mcp", "gemini-jsonschema", "gemini-openapi",
        "gemini-wrapped"])
def test_each_format_keeps_every_parameter(entry: dict[str, Any]) -> None:
    tool = _one([entry])
    assert tool.name == "set_light" and tool.description == "Light." and tool.cls == "light"
    assert tool.parameters == SCHEMA
    assert list(tool.parameters["properties"]) == ["room", "level"]  # Gemini's propertyOrdering is the order


def test_gemini_request_wrapper_and_openapi_details() -> None:
    decl = {"name": "find", "parameters": {"type": "OBJECT", "properties": {
        "q": {"type": "STRING", "nullable": True, "example": "tea"},
        "tags": {"type": "ARRAY", "items": {"type": "STRING"}}}}}
    tool = _one({"tools": [{"functionDeclarations": [decl]}]})
    assert tool.properties["q"] == {"type": ["string", "null"], "examples": ["tea"]}
    assert tool.properties["tags"] == {"type": "array", "items": {"type": "string"}}
    assert tool.description == ""
    with pytest.raises(CatalogError, match="TYPE_UNSPECIFIED"):
        from_openapi({"type": "TYPE_UNSPECIFIED"}, "x")


def test_mcp_pages_envelopes_and_extra_fields() -> None:
    a = {"name": "get_time", "title": "Current time", "description": "Now.",
         "inputSchema": {"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]},
         "outputSchema": {"type": "object", "properties": {"time": {"type": "string"}}},
         "annotations": {"readOnlyHint": True, "openWorldHint": False}}
    b = {"name": "convert_time", "description": "Convert.", "inputSchema": {"type": "object", "properties": {}}}
    pages = [{"jsonrpc": "2.0", "id": 1, "result": {"tools": [a], "nextCursor": "p2"}},
             {"jsonrpc": "2.0", "id": 2, "result": {"tools": [b]}}]
    tools = read_tools(pages, "time", "dump.json")
    assert [t.name for t in tools] == ["get_time", "convert_time"]
    assert tools[0].title == "Current time" and tools[0].annotations == {"readOnlyHint": True, "openWorldHint": False}
    assert tools[0].output_schema == a["outputSchema"] and tools[1].title is None
    # the same pages without envelopes, and one page in one envelope
    bare = read_tools([p["result"] for p in pages], "time", "dump.json")
    assert [_key(t) for t in bare] == [_key(t) for t in tools]
    assert _one({"jsonrpc": "2.0", "id": 1, "result": {"tools": [b]}}).name == "convert_time"


def test_loaders_and_selection_agree_on_an_anthropic_file(tmp_path: Path) -> None:
    """Was: tools: and mcp: loaded an Anthropic list with zero parameters and exit 0."""
    path = tmp_path / "shop.json"
    path.write_text(json.dumps([{"name": "set_light", "description": "Light.", "input_schema": SCHEMA}]))
    for kind in ("tools", "mcp"):
        cat = load_catalog(f"{kind}:{path}")
        assert cat.tools[0].parameters == SCHEMA, kind
    sel = selection_read_tools(path)
    assert sel[0].name == "set_light" and sel[0].parameters == SCHEMA


# --------------------------------------------------------------------------- refusals: what, where, fix

@pytest.mark.parametrize("data,needle", [
    ([], "the tool list is empty"),
    ({"tools": []}, "the tool list is empty"),
    ([{"name": "f", "description": 3}], "'description' must be a string, got int"),
    ([{"name": "f", "description": ["a"]}], "'description' must be a string"),
    ([{"type": "web_search_preview"}], "tool of unknown type 'web_search_preview'"),
    ([{"type": "bash_20250124", "name": "bash"}], "tool of unknown type 'bash_20250124'"),
    ([{"type": "custom", "name": "grammar", "description": "free text"}], "type 'custom' without an 'input_schema'"),
    ([{"name": "f", "args_schema": {"type": "object", "properties": {"a": {"type": "string"}}}}],
     "'args_schema' looks like a parameter schema"),
    ([{"name": "f", "parameters": {"type": "object"}, "inputSchema": {"type": "object", "properties": {
        "a": {"type": "string"}}}}], "two different parameter schemas"),
    ({"tools": [{"name": "f"}], "nextCursor": "c2"}, "one page of a paginated tools/list"),
    ([{"tools": [{"name": "f"}], "nextCursor": "c2"}, {"tools": [{"name": "g"}], "nextCursor": "c3"}],
     "the dump is cut short"),
    ([{"tools": [{"name": "f"}]}, {"tools": [{"name": "g"}]}], "page 1 has no nextCursor"),
    ({"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "Method not found"}}, "Method not found"),
    ({"a": 1}, "expected a JSON list of tools"),
    ("tools", "expected a JSON list of tools, got str"),
    ([{"name": "f", "title": 5}], "'title' must be a string"),
    ([{"name": "f", "annotations": [1]}], "'annotations' must be a JSON object"),
    ([{"name": "f", "parameters": "object"}], "'parameters' must be a JSON-Schema object"),
])
def test_refusals_say_what_where_and_fix(data: Any, needle: str) -> None:
    with pytest.raises(CatalogError) as info:
        read_tools(data, "d", "tools.json")
    err = info.value
    assert needle in err.what, err.render()
    assert err.where and err.where.startswith("tools.json")
    assert err.fix


def test_refusal_names_the_tool_and_its_place() -> None:
    with pytest.raises(CatalogError) as info:
        read_tools([{"name": "ok"}, {"type": "function", "function": {"name": "bad", "description": 1}}], "d", "x.json")
    assert info.value.where == "x.json[1] (bad)"


# --------------------------------------------------------------------------- writing: the formats round-trip

@pytest.mark.parametrize("fmt", FORMATS)
def test_every_variant_round_trips_in_every_format(fmt: str) -> None:
    catalog = load_catalog("builtin")
    domains = [d.name for d in catalog.domains[:3]]
    for spec in resolve_variants("representative"):
        codec = build_codec(catalog, spec)
        for domain in domains:
            tools = codec.tools_for(domain)
            written = json.loads(json.dumps(write_tools(tools, fmt)))
            back = read_tools(written, domain, f"{spec.name}.{fmt}")
            assert [(t.name, t.description, t.parameters) for t in back] == \
                [(t.name, t.description, t.parameters) for t in tools], (spec.name, fmt, domain)


def test_mcp_fields_round_trip() -> None:
    tool = Tool("get_time", "Now.", {"type": "object", "properties": {}, "required": []}, "time", "time",
                title="Current time", output_schema={"type": "object"}, annotations={"readOnlyHint": True})
    back = read_tools(write_tools([tool], "mcp"), "time", "w.json")
    assert [_key(t) for t in back] == [_key(tool)]
    with pytest.raises(CatalogError, match="unknown tool format"):
        write_tools([tool], "yaml")




@pytest.mark.parametrize("fmt", FORMATS)
def test_cli_shape_format_round_trips(capsys: pytest.CaptureFixture[str], tmp_path: Path, fmt: str) -> None:
    catalog = load_catalog("builtin")
    domain = catalog.domains[1].name
    out_file = tmp_path / f"shaped.{fmt}.json"
    code, _, err = run_cli(capsys, "shape", "--variant", "transaction", "--domain", domain, "--format", fmt,
                        "-o", str(out_file))
    assert code == 0, err
    expected = build_codec(catalog, resolve_variants("transaction")[0]).tools_for(domain)
    assert f"wrote {len(expected)} tools" in err
    # the written file loads as a catalog (tools: reads every format) with the same tools
    back = load_catalog(f"tools:{out_file}").tools
    assert [(t.name, t.description, t.parameters) for t in back] == \
        [(t.name, t.description, t.parameters) for t in expected]
    raw = json.loads(out_file.read_text())
    shape = {"openai": lambda r: r[0]["function"]["name"], "responses": lambda r: r[0]["name"],
             "anthropic": lambda r: r[0]["name"], "gemini": lambda r: r[0]["functionDeclarations"][0]["name"],
             "mcp": lambda r: r["tools"][0]["name"]}[fmt]
    assert shape(raw) == expected[0].name


def test_cli_shape_mcp_keeps_annotations_under_native(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    src = tmp_path / "time.json"
    src.write_text(json.dumps({"tools": [{"name": "get_time", "title": "Current time", "description": "Now.",
                                          "inputSchema": {"type": "object", "properties": {
                                              "tz": {"type": "string"}}, "required": ["tz"]},
                                          "annotations": {"readOnlyHint": True}}]}))
    code, out, err = run_cli(capsys, "shape", "--catalog", f"mcp:{src}", "--variant", "native", "--format", "mcp")
    assert code == 0, err
    tool = json.loads(out)["tools"][0]
    assert tool["title"] == "Current time" and tool["annotations"] == {"readOnlyHint": True}


@pytest.mark.parametrize("fmt", FORMATS)
def test_cli_shape_of_every_domain_round_trips(capsys: pytest.CaptureFixture[str], tmp_path: Path, fmt: str) -> None:
    """Without --domain, shape writes {domain: tools}; tools: reads each key back as its domain."""
    catalog = load_catalog("builtin")
    out_file = tmp_path / f"all.{fmt}.json"
    code, _, err = run_cli(capsys, "shape", "--variant", "schema_discovery", "--format", fmt, "-o", str(out_file))
    assert code == 0, err
    codec = build_codec(catalog, resolve_variants("schema_discovery")[0])
    back = load_catalog(f"tools:{out_file}")
    assert [d.name for d in back.domains] == [d.name for d in catalog.domains]
    for d in catalog.domains:
        assert [(t.name, t.description, t.parameters) for t in back.domain(d.name).tools] == \
            [(t.name, t.description, t.parameters) for t in codec.tools_for(d.name)], (fmt, d.name)
