"""The success rule (toolbias.study.success): exact by default, normalised and bfcl as stored options,
and BFCL's answer sets (any listed value, omission where "" is listed, calls in any order)."""

from __future__ import annotations

from typing import Any

import pytest

from toolbias.catalog.model import NativeAction
from toolbias.study.scoring import score_record
from toolbias.study.success import MatchRule, answer_accepted, condition_label, succeeded


def act(tool: str, **args: Any) -> NativeAction:
    return NativeAction("e0", tool, args)


AREA = {"tool": "area", "arguments": {"base": [10], "height": [5, 5.0], "unit": ["", "units", "cm"]}}


@pytest.mark.parametrize("args,ok", [
    ({"base": 10, "height": 5}, True),                         # optional unit omitted: "" is listed
    ({"base": 10, "height": 5, "unit": "units"}, True),        # the first listed value
    ({"base": 10, "height": 5.0, "unit": "cm"}, True),         # the last listed value; 5.0 is the number 5
    ({"base": 10, "height": 5, "unit": ""}, True),             # "" itself is a listed value
    ({"base": 10}, False),                                     # height may not be omitted
    ({"base": 10, "height": 6}, False),                        # an unlisted value
    ({"base": 10, "height": 5, "unit": "m"}, False),
    ({"base": 10, "height": 5, "color": "red"}, False),        # a parameter the answer does not list
    ({"base": "10", "height": 5}, False),                      # a numeric string is not a number
    ({"base": True, "height": 5}, False),                      # nor is a boolean
])
def test_any_listed_value_and_omission_where_listed(args: dict[str, Any], ok: bool) -> None:
    assert answer_accepted([act("area", **args)], [AREA]) is ok


def test_calls_pair_in_any_order_one_to_one() -> None:
    a = {"tool": "weather", "arguments": {"city": ["Paris", "Paris, France"]}}
    b = {"tool": "weather", "arguments": {"city": ["Paris"]}}
    # a greedy pairing would give the first call ("Paris") to entry a and leave "Paris, France" unpaired
    calls = [act("weather", city="Paris"), act("weather", city="Paris, France")]
    assert answer_accepted(calls, [a, b])
    assert answer_accepted(list(reversed(calls)), [a, b])
    assert not answer_accepted([act("weather", city="Paris")] * 2, [a, {"tool": "weather",
                                                                       "arguments": {"city": ["Rome"]}}])
    assert not answer_accepted(calls[:1], [a, b])                 # a missing call
    assert not answer_accepted(calls + calls[:1], [a, b])         # an extra call
    assert not answer_accepted([act("forecast", city="Paris")], [b])  # another function


def test_lists_and_objects_take_listed_forms() -> None:
    entry = {"tool": "plan", "arguments": {
        "stops": [["Rome", "Milan"], ["Rome", "Milano"]],
        "budget": [{"min": [100, ""], "max": [500]}, ""],
    }}
    assert answer_accepted([act("plan", stops=["Rome", "Milano"], budget={"max": 500})], [entry])
    assert answer_accepted([act("plan", stops=["Rome", "Milan"], budget={"min": 100, "max": 500})], [entry])
    assert answer_accepted([act("plan", stops=["Rome", "Milan"])], [entry])            # budget may be omitted
    assert not answer_accepted([act("plan", stops=["Milan", "Rome"])], [entry])        # list order counts
    assert not answer_accepted([act("plan", stops=["Rome", "Milan"], budget={"min": 100})], [entry])
    assert not answer_accepted([act("plan", stops=["Rome", "Milan"], budget={"max": 500, "cap": 1})], [entry])


def test_match_rules_compare_strings_their_way() -> None:
    gold = [act("lamp", room="living room", level=40)]
    plain = [act("lamp", room="living room", level=40.0)]
    spaced = [act("lamp", room=" Living Room", level=40)]
    squashed = [act("lamp", room="Living-Room", level=40)]
    assert succeeded(plain, gold)  # exact: numbers as numbers
    assert not succeeded(spaced, gold) and not succeeded(spaced, gold, rule="exact")
    assert succeeded(spaced, gold, rule="normalised") and not succeeded(squashed, gold, rule="normalised")
    assert succeeded(squashed, gold, rule="bfcl") and succeeded(spaced, gold, rule=MatchRule.BFCL)
    entry = {"tool": "lamp", "arguments": {"room": ["living room"], "level": [40]}}
    assert not answer_accepted(squashed, [entry]) and answer_accepted(squashed, [entry], rule="bfcl")


def test_condition_label_keeps_the_default_unchanged() -> None:
    assert condition_label("base", "exact") == "base"
    assert condition_label("instruction", "normalised") == "instruction+normalised"


def test_records_are_scored_under_their_answer_sets_and_rule() -> None:
    def rec(args: dict[str, Any], **extra: Any) -> dict[str, Any]:
        return {"termination": "answered", "calls": [], "flags": [],
                "executed": [{"domain": "e0", "tool": "area", "arguments": args}],
                "gold": [{"domain": "e0", "tool": "area", "arguments": {"base": 10, "height": 5}}], **extra}

    other = {"base": 10, "height": 5, "unit": "cm"}
    assert score_record(rec(other))[0] is False                     # not the gold, no answer sets
    assert score_record(rec(other, accept=[AREA])) == (True, None)  # BFCL accepts it
    assert score_record(rec({"base": 10, "height": 5, "unit": " CM"}, accept=[AREA]))[0] is False
    assert score_record(rec({"base": 10, "height": 5, "unit": " CM"}, accept=[AREA], match="normalised")) \
        == (True, None)
    # an environment's own state check decides, either way
    assert score_record(rec(other, state_check={"ok": True}))[0] is True
    assert score_record(rec({"base": 10, "height": 5}, state_check={"ok": False}))[0] is False
