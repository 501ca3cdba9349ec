"""Exact selection parsing: whole names or list numbers, never substrings."""

from __future__ import annotations

import pytest

from toolbias.providers.base import ModelOutput, ToolCall
from toolbias.selection import parse_output, parse_subset, parse_text

NAMES = ["forward_geocode", "geocode", "PinPointGeo", "geocode_v2", "address_to_latlng"]


@pytest.mark.parametrize("answer, expected", [
    ("geocode", 1),
    ("forward_geocode", 0),
    ("`geocode_v2`", 3),
    ("**PinPointGeo**", 2),
    ("pinpointgeo", 2),                      # case-insensitive whole name
    ("3", 2),
    ("#4", 3),
    ("(5)", 4),
    ("Option 2", 1),
    ("2.", 1),
    ('{"tool": "forward_geocode"}', 0),
    ('{"index": 2}', 1),
    ("I would use forward_geocode for this.", 0),
    ("The best fit is forward_geocode.", 0),
    ("Answer: 4", 3),
    ("<think>geocode or forward_geocode? I pick the first</think>forward_geocode", 0),
])
def test_text_answers(answer: str, expected: int) -> None:
    p = parse_text(answer, NAMES)
    assert p.index == expected, p


@pytest.mark.parametrize("answer", [
    "forward_geocode_v3",             # not a candidate: no substring credit for forward_geocode or geocode
    "reverse_geocode",
    "geocoder",
    "9",                              # out of range
    "",
    "I cannot decide.",
    "geocode and forward_geocode both work",   # two whole names: ambiguous
])
def test_unparsed(answer: str) -> None:
    p = parse_text(answer, NAMES)
    assert p.index is None and p.reason


def test_substring_trap_in_mentions() -> None:
    # only forward_geocode occurs as a whole token; "geocode" occurs inside it and must not count
    assert parse_text("Calling forward_geocode now.", NAMES).index == 0
    assert parse_text("Calling geocode_v2 now.", NAMES).index == 3
    assert parse_text("Calling geocode now.", NAMES).index == 1


def test_tool_calls() -> None:
    call = ModelOutput(content=None, tool_calls=(ToolCall("1", "forward_geocode", {}),))
    assert parse_output(call, NAMES, "tools").index == 0
    same_twice = ModelOutput(content=None, tool_calls=(ToolCall("1", "geocode", {}), ToolCall("2", "geocode", {})))
    assert parse_output(same_twice, NAMES, "tools").index == 1
    two = ModelOutput(content=None, tool_calls=(ToolCall("1", "geocode", {}), ToolCall("2", "geocode_v2", {})))
    assert parse_output(two, NAMES, "tools").index is None
    unknown = ModelOutput(content=None, tool_calls=(ToolCall("1", "forward_geocode_x", {}),))
    assert "unknown" in parse_output(unknown, NAMES, "tools").reason
    # without a call the text is parsed by name, never by list number
    assert parse_output(ModelOutput(content="geocode"), NAMES, "tools").index == 1
    assert parse_output(ModelOutput(content="2"), NAMES, "tools").index is None
    assert parse_output(ModelOutput(content="2"), NAMES, "text").index == 1


def test_filter_subsets() -> None:
    names = ["a_tool", "b_tool", "a_tool_v2"]
    assert parse_subset('{"tools": ["a_tool", "a_tool_v2"]}', names).positions == {0, 2}
    assert parse_subset('```json\n["b_tool"]\n```', names).positions == {1}
    assert parse_subset('{"tools": [1, "3"]}', names).positions == {0, 2}
    partial = parse_subset('{"tools": ["a_tool", "a_tool_v9"]}', names)
    assert partial.positions == {0} and partial.n_unknown == 1
    assert parse_subset('{"tools": []}', names).positions == frozenset()
    assert parse_subset("a_tool and b_tool", names).positions is None
    assert parse_subset('{"answer": "a_tool"}', names).positions is None
