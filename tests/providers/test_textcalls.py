"""Tool calls written as text: Hermes blocks, fenced and bare JSON; never raises."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from toolbias.providers.base import ToolCall
from toolbias.providers.textcalls import MAX_CALLS, find_tool_calls, recover_tool_calls


def names(calls: list[ToolCall]) -> list[str]:
    return [c.name for c in calls]


# ------------------------------------------------------------------ Hermes <tool_call>


def test_hermes_block() -> None:
    calls, rest = recover_tool_calls(
        '<tool_call>\n{"name": "set_temp", "arguments": {"zone": "kitchen", "celsius": 21}}\n</tool_call>')
    assert calls == [ToolCall("call_0", "set_temp", {"zone": "kitchen", "celsius": 21},
                              '{"zone": "kitchen", "celsius": 21}')]
    assert rest == ""


def test_hermes_several_blocks_text_around_and_missing_close() -> None:
    text = ('Sure, doing both.\n<tool_call>{"name": "a", "arguments": {"x": 1}}</tool_call>\n'
            '<tool_call>{"name": "b", "arguments": {"y": 2}}')
    found = find_tool_calls(text)
    assert names(found.calls) == ["a", "b"]
    assert [c.arguments for c in found.calls] == [{"x": 1}, {"y": 2}]
    assert [c.id for c in found.calls] == ["call_0", "call_1"]
    assert found.formats == ["hermes", "hermes"]
    assert found.remaining == "Sure, doing both."


def test_hermes_block_ends_at_next_opening_tag() -> None:
    calls, _ = recover_tool_calls('<tool_call>{"name": "a", "arguments": {}}<tool_call>{"name": "b", "arguments": {}}')
    assert names(calls) == ["a", "b"]


def test_hermes_arguments_as_json_string_and_parameters_key() -> None:
    calls, _ = recover_tool_calls('<tool_call>{"name": "a", "arguments": "{\\"x\\": 1}"}</tool_call>'
                                  '<tool_call>{"name": "b", "parameters": {"y": 2}}</tool_call>')
    assert [(c.name, c.arguments) for c in calls] == [("a", {"x": 1}), ("b", {"y": 2})]


def test_hermes_missing_arguments_means_no_arguments() -> None:
    calls, _ = recover_tool_calls('<tool_call>{"name": "lights_off"}</tool_call>')
    assert calls[0].name == "lights_off" and calls[0].arguments == {} and calls[0].parse_error is None


def test_hermes_fenced_body_and_case() -> None:
    calls, _ = recover_tool_calls('<TOOL_CALL>\n```json\n{"name": "a", "arguments": {"k": "v"}}\n```\n</TOOL_CALL>')
    assert (calls[0].name, calls[0].arguments) == ("a", {"k": "v"})


def test_hermes_cut_off_before_closing_braces_is_repaired() -> None:
    calls, _ = recover_tool_calls('<tool_call>\n{"name": "a", "arguments": {"x": [1, 2]')
    assert (calls[0].name, calls[0].arguments, calls[0].parse_error) == ("a", {"x": [1, 2]}, None)


def test_hermes_bad_json_becomes_parse_error_with_guessed_name() -> None:
    calls, rest = recover_tool_calls("<tool_call>{'name': 'set_temp', 'arguments': {zone: kitchen}}</tool_call> ok")
    assert len(calls) == 1
    call = calls[0]
    assert call.name == "set_temp" and call.arguments is None
    assert call.parse_error and "not valid JSON" in call.parse_error
    assert "set_temp" in call.raw_arguments
    assert rest == "ok"


def test_hermes_bad_arguments_string_becomes_parse_error() -> None:
    calls, _ = recover_tool_calls('<tool_call>{"name": "a", "arguments": "{\\"x\\": "}</tool_call>')
    assert calls[0].name == "a" and calls[0].arguments is None and "not valid JSON" in (calls[0].parse_error or "")


def test_hermes_non_object_arguments_become_parse_error() -> None:
    calls, _ = recover_tool_calls('<tool_call>{"name": "a", "arguments": [1, 2]}</tool_call>')
    assert calls[0].arguments is None and "JSON object" in (calls[0].parse_error or "")


def test_hermes_empty_or_nameless_block_is_reported() -> None:
    calls, _ = recover_tool_calls("<tool_call></tool_call>")
    assert len(calls) == 1 and calls[0].parse_error and calls[0].name == ""
    calls, _ = recover_tool_calls('<tool_call>{"arguments": {}}</tool_call>')
    assert len(calls) == 1 and calls[0].parse_error


def test_hermes_list_in_one_block() -> None:
    calls, _ = recover_tool_calls('<tool_call>[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {}}]'
                                  "</tool_call>")
    assert names(calls) == ["a", "b"]


# ------------------------------------------------------------------ fenced and bare JSON


def test_fenced_json_block() -> None:
    found = find_tool_calls('I will call it:\n```json\n{"name": "a", "arguments": {"x": 1}}\n```\nDone.')
    assert (names(found.calls), found.formats) == (["a"], ["fenced"])
    assert found.remaining == "I will call it:\n\nDone."


def test_fenced_list_of_calls() -> None:
    calls, _ = recover_tool_calls('```\n[{"name": "a", "arguments": {}}, {"name": "b", "parameters": {"q": 1}}]\n```')
    assert [(c.name, c.arguments) for c in calls] == [("a", {}), ("b", {"q": 1})]


def test_fenced_code_that_is_not_a_call_is_left_alone() -> None:
    text = '```json\n{"zone": "kitchen"}\n```'
    assert recover_tool_calls(text) == ([], text)


def test_bare_json_call_and_list() -> None:
    found = find_tool_calls('{"name": "set_temperature", "arguments": {"zone": "bedroom", "celsius": 21}}')
    assert found.formats == ["json"] and found.calls[0].arguments == {"zone": "bedroom", "celsius": 21}
    calls, rest = recover_tool_calls('Calling [{"name":"a","arguments":{}},{"name":"b","arguments":{"q":1}}] now')
    assert names(calls) == ["a", "b"] and rest == "Calling  now"


def test_bare_openai_shape_and_markers() -> None:
    calls, _ = recover_tool_calls('{"type": "function", "function": {"name": "f", "arguments": "{\\"a\\": 1}"}}')
    assert (calls[0].name, calls[0].arguments) == ("f", {"a": 1})
    calls, rest = recover_tool_calls('[TOOL_CALLS][{"name": "g", "arguments": {}}]')
    assert names(calls) == ["g"] and rest == ""
    calls, rest = recover_tool_calls('<|python_tag|>{"name": "h", "parameters": {"x": "y"}}')
    assert names(calls) == ["h"] and rest == ""


def test_json_that_is_not_a_call_is_left_alone() -> None:
    for text in ['The user is {"name": "Bob", "age": 3}', "[1, 2, 3]", '{"name": 3, "arguments": {}}',
                 '{"name": "", "arguments": {}}', "plain words", ""]:
        assert recover_tool_calls(text) == ([], text)


def test_none_and_non_strings() -> None:
    assert recover_tool_calls(None) == ([], "")
    assert recover_tool_calls(42) == ([], "")  # type: ignore[arg-type]


def test_hostile_inputs_are_bounded() -> None:
    for text in ["[" * 50_000, "{" * 50_000, '{"a":' * 20_000, "<tool_call>" * 5_000,
                 '<tool_call>{"name": "a", "arguments": {}}' * (MAX_CALLS + 10)]:
        calls, _ = recover_tool_calls(text)
        assert len(calls) <= MAX_CALLS


# ------------------------------------------------------------------ properties

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)
tool_names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_\-]{0,20}", fullmatch=True)
arguments = st.dictionaries(st.text(max_size=10), json_values, max_size=5)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_never_raises_on_any_text(text: str) -> None:
    calls, rest = recover_tool_calls(text)
    assert isinstance(rest, str)
    for c in calls:
        assert isinstance(c, ToolCall)
        assert (c.arguments is None) == (c.parse_error is not None)


markup = st.sampled_from(["<tool_call>", "</tool_call>", "{", "}", "[", "]", '"name"', '"arguments"', ":", ",",
                          '"a"', "```json\n", "```", "\n", " ", "\\", '"', "[TOOL_CALLS]", "{}", "null"])


@settings(max_examples=500, deadline=None)
@given(st.lists(markup, max_size=60))
def test_never_raises_on_call_like_fragments(parts: list[str]) -> None:
    calls, rest = recover_tool_calls("".join(parts))
    assert isinstance(rest, str)
    assert all(isinstance(c, ToolCall) for c in calls)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(tool_names, arguments), min_size=1, max_size=4), st.text(max_size=40),
       st.sampled_from(["hermes", "hermes_string_args", "fenced", "bare", "bare_list"]))
def test_round_trip(calls: list[tuple[str, dict]], prose: str, style: str) -> None:
    prose = prose.replace("<", "").replace("`", "").replace("{", "").replace("[", "")
    objs = [{"name": n, "arguments": a} for n, a in calls]
    if style == "hermes":
        body = "".join(f"<tool_call>\n{json.dumps(o)}\n</tool_call>\n" for o in objs)
    elif style == "hermes_string_args":
        body = "".join(f"<tool_call>{json.dumps({'name': o['name'], 'arguments': json.dumps(o['arguments'])})}"
                       "</tool_call>" for o in objs)
    elif style == "fenced":
        body = f"```json\n{json.dumps(objs)}\n```"
    elif style == "bare":
        body = " ".join(json.dumps(o) for o in objs)
    else:
        body = json.dumps(objs)
    got, rest = recover_tool_calls(prose + "\n" + body)
    assert [(c.name, c.arguments) for c in got] == [(n, a) for n, a in calls]
    assert all(c.parse_error is None for c in got)
    assert rest == prose.strip() or rest.strip() == prose.strip()
