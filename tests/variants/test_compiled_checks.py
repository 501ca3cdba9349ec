"""Compiled argument checks give exactly the verdicts of the message-producing checker."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from toolbias.catalog.validation import (
    arguments_error,
    compile_arguments_check,
    compile_value_check,
    value_error,
)

SCHEMA = {
    "type": "object",
    "properties": {
        "room": {"type": "string", "enum": ["kitchen", "office"]},
        "level": {"type": "integer", "minimum": 0, "maximum": 10},
        "ratio": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
        "on": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "opts": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
        "any": {},
        "count": {"type": "number", "minimum": 0},          # a range with one bound
        "mode": {"enum": ["kitchen", "b"]},                  # a string enum without a type
        "pick": {"type": "integer", "enum": [1, 2]},         # a numeric enum (1.0 and True compare equal)
        "kind": {"type": ["string", "null"], "enum": ["a", None]},
    },
    "required": ["room", "level"],
}
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 15) | st.floats(-2, 12) | st.just(float("nan")) | st.sampled_from(
        ["kitchen", "office", "garage", ""]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["a", "b"]), inner, max_size=2),
    max_leaves=6,
)
args = st.dictionaries(st.sampled_from(["room", "level", "ratio", "on", "tags", "opts", "any", "extra",
                                                 "count", "mode", "pick", "kind"]),
                       json_values, max_size=6)


@settings(max_examples=1500, deadline=None)
@given(args)
def test_compiled_check_agrees_with_arguments_error(a):
    assert compile_arguments_check(SCHEMA)(a) == (arguments_error(SCHEMA, a) is None)


@settings(max_examples=1500, deadline=None)
@given(st.sampled_from(sorted(SCHEMA["properties"])), json_values)
def test_compiled_value_check_agrees_with_value_error(name, value):
    """Per value: the specialised checks (string enums, numeric ranges) reach every kind of value."""
    schema = SCHEMA["properties"][name]
    assert compile_value_check(schema)(value) == (value_error(schema, value, name) is None)


def test_known_cases():
    ok = compile_arguments_check(SCHEMA)
    assert ok({"room": "kitchen", "level": 3})
    assert ok({"room": "kitchen", "level": 3.0})  # an integral float is an integer
    assert not ok({"room": "kitchen", "level": True})  # a boolean is not
    assert not ok({"room": "kitchen", "level": 11})
    assert not ok({"room": "kitchen", "level": 1, "ratio": 1})
    assert not ok({"room": "kitchen", "level": 1, "opts": {}})
    assert not ok({"room": "kitchen", "level": 1, "extra": 1})
