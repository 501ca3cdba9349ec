"""Bad input files: every one gives a specific error naming the file, the place in it and the fix.

Catalogs (``tools:``, ``mcp:``, ``toolschemaspace:`` folders with their query files),
variant spec files, records files (``replay:`` recordings, ``scripted:`` scripts,
selection records) and stores. Each case runs the real command line in process
(``toolbias.cli.main``): it must exit with status 2 and print ``error: <file>[:<place>]:
<what>`` and a ``fix:`` line, never a traceback (an exception escaping ``main`` fails the
test). A few cases also run as a subprocess to check what the user sees end to end.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from toolbias.cli import main

TOOLBIAS = shutil.which("toolbias") or str(Path(sys.executable).with_name("toolbias"))


def _tool(name: str = "set_light", params: Any = None, **extra: Any) -> dict[str, Any]:
    params = params if params is not None else {
        "type": "object", "properties": {"room": {"type": "string", "enum": ["a", "b"]}, "on": {"type": "boolean"}},
        "required": ["room", "on"]}
    return {"type": "function", "function": {"name": name, "description": "d", "parameters": params, **extra}}


def _tss_tool(**extra: Any) -> dict[str, Any]:
    fn = _tool()["function"]
    return {"uid": "home::set_light", "group": "home", **fn, **extra}


GOOD_QUERY = {"id": "q1", "domain": "home", "query": "light a on",
              "gold_calls": [{"name": "set_light", "arguments": {"room": "a", "on": True}}]}
BINARY = b"\xff\xfe\x00\x81 not text"


@dataclass
class Case:
    """One malformed input: the files to write, the command, and what the error must say."""

    id: str
    files: dict[str, str | bytes]          # relative path -> content
    argv: Callable[[Path], list[str]]      # the command, given the folder holding the files
    expect: tuple[str, ...]                # substrings of stderr (the file's name is always checked)
    file: str                              # the file the error must name
    fix: bool = True


def _catalog(spec: str) -> Callable[[Path], list[str]]:
    return lambda d: ["catalog", "list", "--catalog", spec.replace("DIR", str(d))]


def _run(*args: str) -> Callable[[Path], list[str]]:
    return lambda d: ["run", "--tasks", "1", "--store", str(d / "s.db"),
                      *[a.replace("DIR", str(d)) for a in args]]


def _tss(queries: str | bytes, tools: Any = None) -> dict[str, str | bytes]:
    return {"tss/tools.json": json.dumps(tools if tools is not None else [_tss_tool()]),
            "tss/queries.jsonl": queries}


def _jsonl(*rows: Any) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


CASES = [
    # ---- tool catalogs (tools:FILE, mcp:FILE) --------------------------------------------
    Case("tools-syntax", {"t.json": '[{"type": "function",\n "function": {"name": "a",}}]'},
         _catalog("tools:DIR/t.json"), ("t.json:2:", "invalid JSON"), "t.json"),
    Case("tools-empty", {"t.json": ""}, _catalog("tools:DIR/t.json"), ("t.json:1:1", "invalid JSON"), "t.json"),
    Case("tools-binary", {"t.json": BINARY}, _catalog("tools:DIR/t.json"), ("cannot read file",), "t.json"),
    Case("tools-missing", {}, _catalog("tools:DIR/nope.json"), ("file not found",), "nope.json"),
    Case("tools-not-a-list", {"t.json": '{"tools": 5}'}, _catalog("tools:DIR/t.json"),
         ("expected a JSON list of tools",), "t.json"),
    Case("tools-entry-int", {"t.json": "[1]"}, _catalog("tools:DIR/t.json"),
         ("t.json[0]", "must be a JSON object"), "t.json"),
    Case("tools-no-name", {"t.json": json.dumps([_tool(), {"type": "function", "function": {"description": "x"}}])},
         _catalog("tools:DIR/t.json"), ("t.json[1]", "no 'name'"), "t.json"),
    Case("tools-function-not-object", {"t.json": '[{"type": "function", "function": 5}]'},
         _catalog("tools:DIR/t.json"), ("t.json[0]", "'function' must be an object"), "t.json"),
    Case("tools-params-not-object", {"t.json": json.dumps([_tool(params=[1])])}, _catalog("tools:DIR/t.json"),
         ("t.json[0] (set_light)", "'parameters' must be"), "t.json"),
    Case("tools-unknown-type", {"t.json": json.dumps([_tool(params={"type": "object", "properties": {
        "x": {"type": "strin"}}})])}, _catalog("tools:DIR/t.json"),
         ("tool 'set_light'", "parameters.x", "unknown JSON type 'strin'"), "t.json"),
    Case("tools-ref", {"t.json": json.dumps([_tool(params={"type": "object", "properties": {
        "x": {"$ref": "#/$defs/x"}}})])}, _catalog("tools:DIR/t.json"), ("parameters.x", "'$ref'", "inline"), "t.json"),
    Case("tools-required-missing", {"t.json": json.dumps([_tool(params={"type": "object", "properties": {
        "x": {"type": "string"}}, "required": ["y"]})])}, _catalog("tools:DIR/t.json"),
         ("tool 'set_light'", "'y' not in properties"), "t.json"),
    Case("tools-mixed-enum", {"t.json": json.dumps([_tool(params={"type": "object", "properties": {
        "x": {"enum": ["a", 1]}}})])}, _catalog("tools:DIR/t.json"), ("parameters.x", "enum mixes"), "t.json"),
    Case("tools-duplicate", {"t.json": json.dumps([_tool(), _tool()])}, _catalog("tools:DIR/t.json"),
         ("duplicate tool name 'set_light'",), "t.json"),
    Case("tools-params-not-object-type", {"t.json": json.dumps([_tool(params={"type": "string"})])},
         _catalog("tools:DIR/t.json"), ("tool 'set_light'", "type 'object'"), "t.json", fix=False),
    Case("tools-effect-not-object", {"t.json": json.dumps([_tool(effect="boom")])}, _catalog("tools:DIR/t.json"),
         ("tool 'set_light'", "'effect' must be an object"), "t.json"),
    Case("tools-effect-kind", {"t.json": json.dumps([_tool(effect={"kind": "explode"})])},
         _catalog("tools:DIR/t.json"), ("tool 'set_light'", "unknown effect kind 'explode'"), "t.json"),
    Case("tools-effect-target", {"t.json": json.dumps([_tool(effect={"kind": "set", "target": ["nope"]})])},
         _catalog("tools:DIR/t.json"), ("tool 'set_light'", "'nope' are not required parameters"), "t.json"),
    Case("mcp-not-tools", {"m.json": '{"result": {"tools": 3}}'}, _catalog("mcp:DIR/m.json"),
         ("'tools' list",), "m.json", fix=False),
    # ---- the paper's artifact: tools.json + queries*.jsonl ---------------------------------
    Case("tss-tool-no-group", _tss(_jsonl(GOOD_QUERY), tools=[{"name": "x"}]), _catalog("toolschemaspace:DIR/tss"),
         ("tools.json[0]", "'group'"), "tools.json"),
    Case("query-syntax", _tss(json.dumps(GOOD_QUERY) + '\n{"id": "q2",\n'), _catalog("toolschemaspace:DIR/tss"),
         ("queries.jsonl:2:", "invalid JSON"), "queries.jsonl"),
    Case("query-binary", _tss(BINARY), _catalog("toolschemaspace:DIR/tss"), ("cannot read file",), "queries.jsonl"),
    Case("query-no-gold", _tss(_jsonl({k: v for k, v in GOOD_QUERY.items() if k != "gold_calls"})),
         _catalog("toolschemaspace:DIR/tss"), ("queries.jsonl:1", "lacks field 'gold_calls'"), "queries.jsonl"),
    Case("query-gold-not-list", _tss(_jsonl({**GOOD_QUERY, "gold_calls": {"name": "set_light"}})),
         _catalog("toolschemaspace:DIR/tss"), ("queries.jsonl:1", "malformed query row"), "queries.jsonl"),
    Case("query-not-object", _tss("[1, 2]\n"), _catalog("toolschemaspace:DIR/tss"),
         ("queries.jsonl:1", "malformed query row"), "queries.jsonl"),
    Case("query-gold-unknown-tool", _tss(_jsonl({**GOOD_QUERY, "gold_calls": [{"name": "explode", "arguments": {}}]})),
         _catalog("toolschemaspace:DIR/tss"), ("task 'q1'", "gold call 1 (explode)", "unknown tool"), "queries.jsonl"),
    Case("query-gold-bad-arguments", _tss(_jsonl({**GOOD_QUERY, "gold_calls": [
        {"name": "set_light", "arguments": {"room": "zzz", "on": True}}]})), _catalog("toolschemaspace:DIR/tss"),
         ("task 'q1'", "gold call 1 (set_light)", "'room'", "zzz"), "queries.jsonl"),
    Case("query-duplicate-id", _tss(_jsonl(GOOD_QUERY, GOOD_QUERY)), _catalog("toolschemaspace:DIR/tss"),
         ("task 'q1'", "duplicate task id"), "queries.jsonl"),
    Case("query-unknown-domain", _tss(_jsonl({**GOOD_QUERY, "domain": "garage"})),
         _run("--model", "oracle", "--catalog", "toolschemaspace:DIR/tss"), ("unknown domain 'garage'",), "tss"),
    # ---- variant spec files ----------------------------------------------------------------
    Case("spec-syntax", {"v.json": '{"name": "x",\n "steps": ['}, _run("--model", "oracle", "--variants", "DIR/v.json"),
         ("v.json:2:", "invalid JSON"), "v.json"),
    Case("spec-binary", {"v.json": BINARY}, _run("--model", "oracle", "--variants", "DIR/v.json"),
         ("cannot read file",), "v.json"),
    Case("spec-missing", {}, _run("--model", "oracle", "--variants", "DIR/none.json"), ("file not found",), "none.json"),
    Case("spec-not-object", {"v.json": "[1]"}, _run("--model", "oracle", "--variants", "DIR/v.json"),
         ("must be a JSON object",), "v.json"),
    Case("spec-steps-not-list", {"v.json": '{"name": "x", "steps": {"op": "merge"}}'},
         _run("--model", "oracle", "--variants", "DIR/v.json"), ("'steps' must be a list",), "v.json"),
    Case("spec-step-without-op", {"v.json": '{"name": "x", "steps": [{"method": "opaque"}]}'},
         _run("--model", "oracle", "--variants", "DIR/v.json"), ("each with an 'op'",), "v.json"),
    Case("spec-unknown-op", {"v.json": '{"name": "x", "steps": [{"op": "explode"}]}'},
         _run("--model", "oracle", "--variants", "DIR/v.json"), ("variant 'x'", "'explode' in step 1"), "v.json"),
    Case("spec-unknown-param", {"v.json": '{"name": "x", "steps": [{"op": "merge", "bogus": 1}]}'},
         _run("--model", "oracle", "--variants", "DIR/v.json"), ("variant 'x', step 1", "'bogus'"), "v.json"),
    Case("spec-bad-value", {"v.json": '{"name": "x", "steps": [{"op": "merge", "encoding": "weird"}]}'},
         _run("--model", "oracle", "--variants", "DIR/v.json"), ("variant 'x', step 1", "'encoding'"), "v.json"),
    Case("spec-protocol-not-last", {"v.json": '{"name": "x", "steps": [{"op": "transaction"}, {"op": "merge"}]}'},
         _run("--model", "oracle", "--variants", "DIR/v.json"), ("variant 'x'", "step 2"), "v.json"),
    Case("spec-tags", {"v.json": '{"name": "x", "steps": [], "tags": 5}'},
         _run("--model", "oracle", "--variants", "DIR/v.json"), ("'tags' must be a list",), "v.json"),
    # ---- records: replay recordings, scripts, selection records ------------------------------
    Case("replay-syntax", {"r.jsonl": '{"variant": "native",\n'}, _run("--model", "replay:DIR/r.jsonl"),
         ("r.jsonl:1", "not an episode record"), "r.jsonl"),
    Case("replay-missing-field", {"r.jsonl": _jsonl({"variant": "native", "task_id": "x"})},
         _run("--model", "replay:DIR/r.jsonl"), ("r.jsonl:1", "'messages'"), "r.jsonl"),
    Case("replay-bad-call", {"r.jsonl": _jsonl({"variant": "native", "task_id": "x", "messages": [
        {"role": "assistant", "tool_calls": [{"function": 5}]}]})}, _run("--model", "replay:DIR/r.jsonl"),
         ("r.jsonl:1", "function with a string name"), "r.jsonl"),
    Case("replay-binary", {"r.jsonl": BINARY}, _run("--model", "replay:DIR/r.jsonl"), ("cannot read",), "r.jsonl"),
    Case("replay-missing", {}, _run("--model", "replay:DIR/none.jsonl"), ("not found",), "none.jsonl"),
    Case("script-syntax", {"s.json": '{"default": [\n'}, _run("--model", "scripted:DIR/s.json"),
         ("s.json:2:", "invalid JSON"), "s.json"),
    Case("script-not-object", {"s.json": "[1]"}, _run("--model", "scripted:DIR/s.json"),
         ("must be a JSON object",), "s.json"),
    Case("script-turns-not-list", {"s.json": '{"default": 5}'}, _run("--model", "scripted:DIR/s.json"),
         ("s.json: default", "list of turns"), "s.json"),
    Case("script-turn-not-object", {"s.json": '{"tasks": {"t1": [5]}}'}, _run("--model", "scripted:DIR/s.json"),
         ("s.json: tasks.t1[0]", "a turn must be an object"), "s.json"),
    Case("script-calls-not-list", {"s.json": '{"default": [{"tool_calls": 5}]}'},
         _run("--model", "scripted:DIR/s.json"), ("s.json: default[0]", "'tool_calls'"), "s.json"),
    Case("script-binary", {"s.json": BINARY}, _run("--model", "scripted:DIR/s.json"), ("cannot read",), "s.json"),
    Case("selections-syntax", {"sel.jsonl": '{"run": 0,\n'}, lambda d: ["select", "metrics", str(d / "sel.jsonl")],
         ("sel.jsonl:1:", "invalid JSON"), "sel.jsonl"),
    Case("selections-not-object", {"sel.jsonl": "[1]\n"}, lambda d: ["select", "metrics", str(d / "sel.jsonl")],
         ("sel.jsonl:1", "JSON object"), "sel.jsonl"),
    Case("selections-binary", {"sel.jsonl": BINARY}, lambda d: ["select", "metrics", str(d / "sel.jsonl")],
         ("cannot read",), "sel.jsonl"),
    Case("selections-missing-field", {"sel.jsonl": _jsonl({"run": 0, "cluster": "c"})},
         lambda d: ["select", "metrics", str(d / "sel.jsonl")], ("sel.jsonl:1", "lacks"), "sel.jsonl"),
    # ---- stores ------------------------------------------------------------------------------
    Case("store-not-sqlite", {"s.db": "this is not a database\n" * 50},
         lambda d: ["export", "--store", str(d / "s.db"), "-o", str(d / "out.jsonl")], ("cannot open store",), "s.db"),
    Case("merge-not-sqlite", {"a.db": "nope\n" * 50},
         lambda d: ["merge", str(d / "a.db"), "-o", str(d / "out.db")], ("cannot open store",), "a.db"),
]


def _write(folder: Path, files: dict[str, str | bytes]) -> None:
    for rel, content in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_gives_a_specific_error(case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write(tmp_path, case.files)
    with pytest.raises(SystemExit) as exit_info:  # any other exception would be a traceback
        main(case.argv(tmp_path))
    err = capsys.readouterr().err
    assert exit_info.value.code == 2, err
    message = err[err.index("error: "):] if "error: " in err else err
    assert message.startswith("error: "), err
    assert case.file in message.splitlines()[0], f"the first line should name {case.file}:\n{message}"
    for text in case.expect:
        assert text in message, f"expected {text!r} in:\n{message}"
    if case.fix:
        assert "\nfix: " in message, f"no fix given:\n{message}"


END_TO_END = ["tools-syntax", "query-gold-unknown-tool", "spec-unknown-param", "replay-bad-call", "script-binary"]


@pytest.mark.parametrize("case", [c for c in CASES if c.id in END_TO_END], ids=END_TO_END)
def test_bad_input_end_to_end(case: Case, tmp_path: Path) -> None:
    """The same in a real process: exit status 2, ``error:`` first, no traceback."""
    _write(tmp_path, case.files)
    proc = subprocess.run([TOOLBIAS, *case.argv(tmp_path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and "━" not in ln]
    assert lines[0].startswith("error: ") and case.file in lines[0], proc.stderr
    assert any(ln.startswith("fix: ") for ln in lines), proc.stderr


def test_unknown_names_list_the_valid_ones(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for argv, listed in ((["run", "--model", "oracle", "--variants", "nativ", "--store", str(tmp_path / "a.db")],
                          ("unknown variant 'nativ'", "native", "transaction")),
                         (["run", "--model", "oracle", "--catalog", "builtn", "--store", str(tmp_path / "b.db")],
                          ("unknown catalog kind 'builtn'", "builtin", "toolschemaspace")),
                         (["run", "--model", "gpt4", "--store", str(tmp_path / "c.db")],
                          ("unknown model kind 'gpt4'", "openai:<model>", "oracle"))):
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        err = capsys.readouterr().err
        assert exit_info.value.code == 2 and "error: " in err
        for text in listed:
            assert text in err, err
