"""Fuzzing the catalog loaders (issue 24, the fuzz test): whatever a ``tools:``, ``mcp:`` or
``bfcl:`` file holds, ``toolbias catalog list`` loads it or refuses it with exit status 2 and an
error that says what, where and how to fix it: never a traceback or a hang. The files are
tool lists with schema fragments drawn at random (types, enums, nesting, ``$ref``, odd names),
and plain random JSON. Derandomised, so a failure is reproducible; the example count is kept
small for speed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("hypothesis", reason="the fuzz tests need hypothesis (pip install 'toolbias[dev]')")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests.support.cli import run_cli  # noqa: E402

scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.floats(allow_nan=False, width=32),
                    st.text(max_size=8))
json_values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                            st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                           max_leaves=8)
types = st.sampled_from(["string", "integer", "number", "boolean", "array", "object", "null", "dict", "float",
                         "tuple", "any", "nonsense"])
schemas = st.recursive(
    st.one_of(st.fixed_dictionaries({"type": types}, optional={
        "enum": st.lists(scalars, max_size=4), "description": st.text(max_size=10), "default": scalars,
        "minimum": st.integers(-5, 5), "maximum": st.integers(-5, 5), "format": st.text(max_size=5),
        "$ref": st.sampled_from(["#/$defs/A", "#/definitions/B", "#", "http://x/y"])}), json_values),
    lambda inner: st.fixed_dictionaries({"type": st.sampled_from(["object", "array", "dict"])}, optional={
        "properties": st.dictionaries(st.text(min_size=0, max_size=6), inner, max_size=3), "items": inner,
        "required": st.lists(st.text(max_size=4), max_size=2), "anyOf": st.lists(inner, max_size=2),
        "$defs": st.dictionaries(st.sampled_from(["A", "B"]), inner, max_size=2),
        "additionalProperties": st.one_of(st.booleans(), inner)}),
    max_leaves=6)
names = st.one_of(st.sampled_from(["set_light", "get_time", "a.b", "x" * 70, "", "with space", "ü"]),
                  st.text(max_size=10), json_values)
tools = st.lists(st.one_of(
    st.fixed_dictionaries({"type": st.just("function"), "function": st.fixed_dictionaries(
        {"name": names}, optional={"description": st.one_of(st.text(max_size=10), json_values), "parameters": schemas})}),
    st.fixed_dictionaries({"name": names}, optional={"description": st.text(max_size=10), "inputSchema": schemas,
                                                     "parameters": schemas, "input_schema": schemas}),
    json_values), max_size=3)


def _check(code: int, out: str, err: str) -> None:
    assert "Traceback" not in out + err, err[-3000:]
    assert code in (0, 2), (code, err[-2000:])
    if code == 2:
        assert err.startswith("error:") and "fix:" in err, err[-2000:]


FUZZ = settings(max_examples=50, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@FUZZ
@given(doc=st.one_of(tools, st.fixed_dictionaries({"tools": tools}), json_values))
def test_any_tools_file_loads_or_is_refused_clearly(tmp_path_factory: pytest.TempPathFactory,
                                                    capsys: pytest.CaptureFixture[str], doc: Any) -> None:
    folder = tmp_path_factory.mktemp("fuzz")
    for kind, name in (("tools", "home.json"), ("mcp", "home.mcp.json")):
        path = folder / name
        path.write_text(json.dumps(doc))
        _check(*run_cli(capsys, "catalog", "list", "--catalog", f"{kind}:{path}"))


bfcl_functions = st.lists(st.one_of(st.fixed_dictionaries({"name": names}, optional={
    "description": st.text(max_size=10), "parameters": schemas}), json_values), max_size=2)


@FUZZ
@given(function=st.one_of(bfcl_functions, json_values), answer=json_values,
       question=st.one_of(st.just([[{"role": "user", "content": "hi"}]]), json_values))
def test_any_bfcl_entry_loads_or_is_refused_clearly(tmp_path_factory: pytest.TempPathFactory,
                                                    capsys: pytest.CaptureFixture[str], function: Any, answer: Any,
                                                    question: Any) -> None:
    folder = tmp_path_factory.mktemp("bfcl")
    (folder / "possible_answer").mkdir()
    (folder / "BFCL_v4_simple.json").write_text(json.dumps({"id": "simple_0", "question": question,
                                                            "function": function}) + "\n")
    (folder / "possible_answer" / "BFCL_v4_simple.json").write_text(
        json.dumps({"id": "simple_0", "ground_truth": answer}) + "\n")
    _check(*run_cli(capsys, "catalog", "list", "--catalog", f"bfcl:{folder}"))


def test_a_known_good_file_loads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The checks above accept a good file (exit 0), so the fuzz is not only refusals."""
    path = tmp_path / "home.json"
    path.write_text(json.dumps([{"type": "function", "function": {"name": "set_light", "parameters": {
        "type": "object", "properties": {"on": {"type": "boolean"}}, "required": ["on"]}}}]))
    code, out, err = run_cli(capsys, "catalog", "list", "--catalog", f"tools:{path}")
    assert code == 0 and "home" in out, err
