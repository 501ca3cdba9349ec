"""Catalog loading and validation (each error kind), statistics, the `toolbias catalog` CLI, importers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from toolbias.catalog import (
    ActionErrorKind,
    Catalog,
    Domain,
    NativeAction,
    Task,
    Tool,
    load_catalog,
    validate_action,
    validate_catalog,
)
from toolbias.catalog.stats import catalog_stats, stats_table
from toolbias.cli import cli, main
from toolbias.errors import CatalogError

ROOM = {"type": "string", "enum": ["kitchen", "office"], "description": "Which room."}


def _fn(name: str, props: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": name, "description": f"{name} tool",
        "parameters": {"type": "object", "properties": props, "required": list(props) if required is None else required}}}


def _write(tmp_path: Path, data: Any, name: str = "tools.json") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data, indent=2), encoding="utf-8")
    return path


def _error(spec: str) -> str:
    with pytest.raises(CatalogError) as info:
        load_catalog(spec)
    return str(info.value)


# --------------------------------------------------------------------------- good catalogs


def test_tools_file_in_both_openai_forms(tmp_path: Path) -> None:
    bare = {"name": "set_fan", "description": "Fan speed.",
            "parameters": {"type": "object", "properties": {"room": ROOM, "speed": {"type": "integer"}},
                           "required": ["room", "speed"]}}
    path = _write(tmp_path, [_fn("set_light", {"room": ROOM, "on": {"type": "boolean"}}), bare])
    cat = load_catalog(f"tools:{path}")
    assert [t.name for t in cat.tools] == ["set_light", "set_fan"]
    assert [t.cls for t in cat.tools] == ["light", "fan"]  # inferred from the names
    assert cat.domains[0].name == "tools"
    assert cat.tools[0].to_openai()["function"]["parameters"]["properties"]["room"] == ROOM


def test_mcp_tools_list(tmp_path: Path) -> None:
    path = _write(tmp_path, {"tools": [{"name": "lock_door", "description": "Lock.",
                                        "inputSchema": {"type": "object", "properties": {"door": ROOM},
                                                        "required": ["door"]}}]}, "server.json")
    cat = load_catalog(f"mcp:{path}")
    assert cat.tool("server", "lock_door") is not None


def test_task_and_action_round_trip() -> None:
    a = NativeAction("home", "set_light", {"room": "kitchen", "on": True})
    assert a == NativeAction("home", "set_light", {"on": True, "room": "kitchen"})
    assert a != NativeAction("home", "set_light", {"room": "kitchen", "on": 1})
    task = Task("home-0001", "home", "Light the kitchen.", (a,), "turn on the kitchen light", {"n_calls": 1})
    assert Task.from_dict(json.loads(json.dumps(task.to_dict()))) == task


# --------------------------------------------------------------------------- bad catalogs, one error kind each


def test_invalid_json_names_file_and_line(tmp_path: Path) -> None:
    path = _write(tmp_path, '[\n  {"name": "set_light",\n   "parameters": {,}\n  }\n]\n')
    message = _error(f"tools:{path}")
    assert f"{path}:3:" in message and "invalid JSON" in message


def test_duplicate_tool_names(tmp_path: Path) -> None:
    path = _write(tmp_path, [_fn("set_light", {"room": ROOM}), _fn("set_light", {"room": ROOM})])
    assert "duplicate tool name 'set_light'" in _error(f"tools:{path}")


@pytest.mark.parametrize("construct", ["$ref", "anyOf", "oneOf", "allOf", "not", "patternProperties"])
def test_unsupported_schema_construct_is_named(tmp_path: Path, construct: str) -> None:
    value: Any = "#/$defs/room" if construct == "$ref" else [{"type": "string"}] if construct.endswith("Of") else {}
    path = _write(tmp_path, [_fn("set_light", {"room": {construct: value}})])
    message = _error(f"tools:{path}")
    assert f"'{construct}'" in message and "set_light" in message and "room" in message
    assert "fix:" in message


def test_required_parameter_missing_from_properties(tmp_path: Path) -> None:
    path = _write(tmp_path, [_fn("set_light", {"room": ROOM}, required=["room", "level"])])
    message = _error(f"tools:{path}")
    assert "'level' not in properties" in message and "set_light" in message


def test_enum_of_mixed_types(tmp_path: Path) -> None:
    path = _write(tmp_path, [_fn("set_fan", {"speed": {"type": "string", "enum": ["low", 2, "high"]}})])
    message = _error(f"tools:{path}")
    assert "enum mixes value types" in message and "set_fan" in message


def test_other_load_errors(tmp_path: Path) -> None:
    assert "unknown catalog kind 'nope'" in _error("nope:x")
    assert "missing path" in _error("tools:")
    assert "file not found" in _error(f"tools:{tmp_path / 'absent.json'}")
    assert "expected a JSON list of tools" in _error(f"tools:{_write(tmp_path, {'a': 1})}")
    assert "not a directory" in _error(f"toolschemaspace:{tmp_path / 'absent'}")


def test_duplicate_domains_in_a_hand_built_catalog() -> None:
    tool = Tool("t", "", {"type": "object", "properties": {}}, "d")
    with pytest.raises(CatalogError, match="duplicate domain 'd'"):
        validate_catalog(Catalog("x", (Domain("d", (tool,)), Domain("d", (tool,)))))


@pytest.mark.parametrize(("args", "kind"), [
    ({"room": "kitchen"}, None),
    ({}, ActionErrorKind.MISSING_ARGUMENT),
    ({"room": "kitchen", "x": 1}, ActionErrorKind.EXTRA_ARGUMENT),
    ({"room": 3}, ActionErrorKind.WRONG_TYPE),
    ({"room": "attic"}, ActionErrorKind.NOT_IN_ENUM),
])
def test_validate_action_kinds(tmp_path: Path, args: dict[str, Any], kind: ActionErrorKind | None) -> None:
    cat = load_catalog(f"tools:{_write(tmp_path, [_fn('set_light', {'room': ROOM})], 'home.json')}")
    err = validate_action(cat, NativeAction("home", "set_light", args))
    assert (err.kind if err else None) == kind
    assert validate_action(cat, NativeAction("home", "set_lamp", {})).kind == ActionErrorKind.UNKNOWN_TOOL  # type: ignore[union-attr]


# --------------------------------------------------------------------------- statistics


def _mini() -> Catalog:
    t1 = Tool("set_a", "", {"type": "object", "properties": {
        "x": {"type": "string", "enum": ["p", "q", "r"]}, "n": {"type": "integer"}}, "required": ["x", "n"]}, "d1", "a")
    t2 = Tool("set_b", "", {"type": "object", "properties": {
        "s": {"type": "string"}, "b": {"type": "boolean"}, "y": {"type": "string", "enum": ["u", "v"]},
        "f": {"type": "number"}}, "required": ["s", "b", "y"]}, "d1", "b")
    t3 = Tool("go", "", {"type": "object", "properties": {"o": {"type": "object"}}, "required": ["o"]}, "d2", "a")
    gold1 = (NativeAction("d1", "set_a", {"x": "p", "n": 1}),)
    gold2 = gold1 + (NativeAction("d1", "set_b", {"s": "z", "b": True, "y": "u"}),)
    tasks = (Task("1", "d1", "one two three", gold1, "one two"), Task("2", "d1", "one", gold2, ""))
    return Catalog("mini", (Domain("d1", (t1, t2)), Domain("d2", (t3,))), tasks)


def test_stats_of_a_small_catalog() -> None:
    s = catalog_stats(_mini())
    assert s["domains"] == 2 and s["tools"] == 3 and s["classes"] == 3
    assert s["tools_per_domain"] == {"min": 1, "max": 2, "mean": 1.5}
    assert s["arguments"]["total"] == 7 and s["arguments"]["required"] == 6 and not s["arguments"]["all_required"]
    assert s["arguments"]["per_tool"] == {"min": 1, "max": 4, "mean": round(7 / 3, 3)}
    assert s["arguments"]["by_type"] == {"enum": 2, "string": 1, "integer": 1, "number": 1, "boolean": 1,
                                         "object": 1, "array": 0, "other": 0}
    assert s["enum_values"] == {"min": 2, "max": 3, "mean": 2.5}
    q = s["queries"]
    assert q["total"] == 2 and q["gold_calls"] == 3 and q["by_length"] == {"1": 1, "2": 1}
    assert q["words"] == {"query": 2.0, "templated": 2.0}  # templated mean over tasks that have one
    assert stats_table(s).row_count >= 8


def test_stats_of_the_builtin_catalog_are_consistent() -> None:
    cat = load_catalog("builtin")
    s = catalog_stats(cat)
    assert s["domains"] == len(cat.domains) == 12
    assert s["tools"] == len(cat.tools)
    args = s["arguments"]
    assert args["total"] == sum(len(t.properties) for t in cat.tools) == sum(args["by_type"].values())
    assert args["all_required"] and args["per_tool"]["min"] == 1 and args["per_tool"]["max"] == 4
    assert 2 <= s["enum_values"]["min"] and s["enum_values"]["max"] <= 19
    q = s["queries"]
    assert q["total"] == len(cat.tasks) >= 2500
    assert sum(q["by_length"].values()) == q["total"] == sum(q["by_domain"].values())
    assert q["gold_calls"] == sum(int(n) * c for n, c in q["by_length"].items())
    assert q["words"]["query"] > q["words"]["templated"] > 5


# --------------------------------------------------------------------------- CLI


def test_cli_stats_json_matches_the_api() -> None:
    result = CliRunner().invoke(cli, ["catalog", "stats", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == json.loads(json.dumps(catalog_stats(load_catalog("builtin"))))


def test_cli_stats_table_list_and_show() -> None:
    runner = CliRunner()
    table = runner.invoke(cli, ["catalog", "stats"])
    assert table.exit_code == 0 and "Native tools" in table.output and "by gold length" in table.output
    listing = runner.invoke(cli, ["catalog", "list"])
    assert listing.exit_code == 0 and "car_cabin" in listing.output and "pool_spa" in listing.output
    listed = json.loads(runner.invoke(cli, ["catalog", "list", "--json"]).output)
    assert sum(r["tasks"] for r in listed) == len(load_catalog("builtin").tasks)
    shown = runner.invoke(cli, ["catalog", "show", "kitchen"])
    assert shown.exit_code == 0 and "preheat_oven" in shown.output and "burner" in shown.output
    data = json.loads(runner.invoke(cli, ["catalog", "show", "kitchen", "--json"]).output)
    assert data["domain"] == "kitchen" and data["system"]
    assert {"name", "class", "description", "parameters"} <= set(data["tools"][0])


def test_cli_catalog_option_reads_other_specs(tmp_path: Path) -> None:
    path = _write(tmp_path, [_fn("set_light", {"room": ROOM})], "home.json")
    result = CliRunner().invoke(cli, ["catalog", "show", "home", "--catalog", f"tools:{path}", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["tools"][0]["class"] == "light"


@pytest.mark.parametrize(("argv", "expected"), [
    (["catalog", "show", "nowhere"], "unknown domain 'nowhere'"),
    (["catalog", "stats", "--catalog", "nope:x"], "unknown catalog kind 'nope'"),
])
def test_cli_errors_print_without_traceback(capsys: pytest.CaptureFixture[str], argv: list[str], expected: str) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and expected in err and "Traceback" not in err


def test_cli_bad_catalog_file_end_to_end(tmp_path: Path) -> None:
    """The installed console script: exit 2, `error: file:line ...`, no traceback."""
    path = _write(tmp_path, '[{"name": "x",\n  "parameters": }]')
    proc = subprocess.run([sys.executable, "-c", "from toolbias.cli import main; main()",
                           "catalog", "stats", "--catalog", f"tools:{path}"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: ") and f"{path}:2:" in proc.stderr
    assert "Traceback" not in proc.stderr


# --------------------------------------------------------------------------- the paper's artifact


def test_toolschemaspace_importer(toolschemaspace_dir: Path) -> None:
    cat = load_catalog(f"toolschemaspace:{toolschemaspace_dir}")
    assert len(cat.domains) == 12 and len(cat.tools) == 168 and len(cat.tasks) == 1938
    for task in cat.tasks:
        assert 1 <= len(task.gold) <= 6 and task.query and task.query_templated
        for action in task.gold:
            assert validate_action(cat, action) is None, (task.id, action)
    s = catalog_stats(cat)  # the paper's Table 5, top half
    assert s["arguments"]["total"] == 397 and s["arguments"]["all_required"]
    assert s["arguments"]["by_type"]["enum"] == 261
    assert (s["arguments"]["by_type"]["string"], s["arguments"]["by_type"]["integer"],
            s["arguments"]["by_type"]["boolean"]) == (43, 92, 1)
    assert (s["enum_values"]["min"], s["enum_values"]["max"], round(s["enum_values"]["mean"], 1)) == (2, 19, 3.8)
