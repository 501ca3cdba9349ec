"""Exact success, normalisation and the failure taxonomy (paper Table 2).

Every failure mode is produced end to end by a scripted agent that commits exactly
that one error, run through the real runner and store, and must be classified into
exactly that mode."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.support.layers import NamespaceByClass
from toolbias.catalog.model import NativeAction
from toolbias.operators import OPERATORS
from toolbias.providers.scripted import ScriptedProvider
from toolbias.store import Store
from toolbias.study.episode import EpisodeRecord
from toolbias.study.runner import StudyConfig, build_study, run_study
from toolbias.study.scoring import (
    FAILURE_ORDER,
    FAILURE_RULES,
    FailureMode,
    action_diff,
    exact_success,
    explain_failure,
    failure_mode,
    normalise_value,
    score_record,
)
from toolbias.variants.codec import Codec

# -- a small executable catalog (toolschemaspace format) ------------------------

TOOLS = [
    ("cabin", "set_window", "Open, close or vent a window.",
     {"position": {"type": "string", "enum": ["front_left", "front_right", "rear"]},
      "state": {"type": "string", "enum": ["open", "closed", "vent"]}}),
    ("cabin", "set_seat_heat", "Set the heating level of a seat.",
     {"seat": {"type": "string", "enum": ["driver", "passenger"]},
      "level": {"type": "integer", "minimum": 0, "maximum": 3}}),
    ("cabin", "set_cabin_light", "Turn a cabin light on or off.",
     {"zone": {"type": "string", "enum": ["front", "rear"]}, "on": {"type": "boolean"}}),
    ("home", "set_lamp", "Dim a lamp.",
     {"room": {"type": "string", "enum": ["kitchen", "office"]},
      "brightness": {"type": "integer", "minimum": 0, "maximum": 100}}),
    ("home", "lock_door", "Lock a door.", {"door": {"type": "string", "enum": ["front", "back"]}}),
    ("home", "set_thermostat", "Set a zone's target temperature.",
     {"zone": {"type": "string", "enum": ["upstairs", "downstairs"]},
      "celsius": {"type": "number", "minimum": 10, "maximum": 30}}),
]

TASKS = [
    ("c1", "cabin", "Open the front left window and heat the driver seat to 2.",
     [("set_window", {"position": "front_left", "state": "open"}), ("set_seat_heat", {"seat": "driver", "level": 2})]),
    ("c2", "cabin", "Rear light on.", [("set_cabin_light", {"zone": "rear", "on": True})]),
    ("c3", "cabin", "Vent the rear window.", [("set_window", {"position": "rear", "state": "vent"})]),
    ("h1", "home", "Office lamp to 40 and lock the front door.",
     [("set_lamp", {"room": "office", "brightness": 40}), ("lock_door", {"door": "front"})]),
    ("h2", "home", "Upstairs to 21.5 degrees.", [("set_thermostat", {"zone": "upstairs", "celsius": 21.5})]),
]

#: for each native tool, a valid action of a tool of another class in the same domain
OTHER_CLASS = {
    "set_window": ("set_seat_heat", {"seat": "passenger", "level": 1}),
    "set_seat_heat": ("set_window", {"position": "rear", "state": "closed"}),
    "set_cabin_light": ("set_window", {"position": "rear", "state": "open"}),
    "set_lamp": ("lock_door", {"door": "back"}),
    "lock_door": ("set_lamp", {"room": "kitchen", "brightness": 10}),
    "set_thermostat": ("lock_door", {"door": "front"}),
}


def write_catalog(root: Path) -> str:
    root.mkdir(parents=True, exist_ok=True)
    tools = [{"uid": f"{d}::{n}", "group": d, "name": n, "description": desc,
              "parameters": {"type": "object", "properties": props, "required": list(props)}}
             for d, n, desc, props in TOOLS]
    (root / "tools.json").write_text(json.dumps(tools))
    rows = [{"id": i, "domain": d, "query": q, "gold_calls": [{"name": n, "arguments": a} for n, a in gold]}
            for i, d, q, gold in TASKS]
    (root / "queries.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return f"toolschemaspace:{root}"


@pytest.fixture()
def catalog_spec(tmp_path: Path) -> str:
    return write_catalog(tmp_path / "cat")


@pytest.fixture()
def namespace_variant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setitem(OPERATORS, NamespaceByClass.op, NamespaceByClass)
    path = tmp_path / "class_namespace.json"
    path.write_text(json.dumps({"name": "class_namespace", "steps": [{"op": NamespaceByClass.op}]}))
    return str(path)


# -- normalisation and exact success ------------------------------------------

def a(tool: str, domain: str = "cabin", **args: Any) -> NativeAction:
    return NativeAction(domain, tool, args)


def test_normalisation_numbers_as_numbers_strings_trimmed_and_casefolded() -> None:
    assert normalise_value(20.0) == normalise_value(20) == 20
    assert normalise_value(" Front_Left ") == "front_left"
    assert normalise_value("20") != normalise_value(20)        # numeric strings stay strings
    assert normalise_value(True) is True                       # booleans are not numbers:
    assert not exact_success([a("set_cabin_light", zone="rear", on=True)], [a("set_cabin_light", zone="rear", on=1)])
    assert normalise_value({"k": [" A ", 2.0]}) == {"k": ["a", 2]}
    # exact (the default, toolbias's own rule): numbers as numbers, strings character for character
    assert exact_success([a("set_lamp", "home", room="office", brightness=40.0)],
                         [a("set_lamp", "home", room="office", brightness=40)])
    assert not exact_success([a("set_lamp", "home", room="Office ", brightness=40)],
                             [a("set_lamp", "home", room="office", brightness=40)])
    # normalised (a stored option): strings trimmed and case-folded
    assert exact_success([a("set_lamp", "home", room="Office ", brightness=40.0)],
                         [a("set_lamp", "home", room="office", brightness=40)], rule="normalised")
    assert not exact_success([a("set_lamp", "home", room="office", brightness=41)],
                             [a("set_lamp", "home", room="office", brightness=40)], rule="normalised")


def test_exact_success_is_a_multiset_comparison() -> None:
    x, y = a("lock_door", "home", door="front"), a("lock_door", "home", door="back")
    assert exact_success([y, x], [x, y])                       # order does not matter
    assert not exact_success([x], [x, x])                      # multiplicity does
    assert not exact_success([x, x], [x])
    assert not exact_success([x], [a("lock_door", "cabin", door="front")])  # the domain is part of the action
    missing, extra = action_diff([x, x], [x, y])
    assert missing == [y] and extra == [x]


# -- the rule order, case by case -----------------------------------------------

G2 = [a("set_window", position="rear", state="open"), a("set_seat_heat", seat="driver", level=1)]


def mode(**kw: Any) -> FailureMode | None:
    base: dict[str, Any] = {"success": False, "termination": "answered", "flags": [], "rejections": 0,
                            "executed": G2, "gold": G2}
    base.update(kw)
    return failure_mode(**base)


def test_each_rule_alone() -> None:
    assert mode(success=True) is None
    assert mode(termination="turn_limit", executed=[]) is FailureMode.LIVELOCK
    assert mode(flags=["uncommitted_handle"], executed=[]) is FailureMode.TRANSACTION_HANDLE
    for flag in ("unknown_handle", "write_after_commit", "double_commit", "commit_missing_writes"):
        assert mode(flags=[flag]) is FailureMode.TRANSACTION_HANDLE
    assert mode(rejections=1, executed=G2[:1]) is FailureMode.REJECTED_AND_STUCK
    assert mode(route_classes=[["seat"]], gold_classes=["window"]) is FailureMode.WRONG_CLASS
    assert mode(executed=G2[:1]) is FailureMode.UNDER_EXECUTION
    assert mode(executed=G2 + G2[:1]) is FailureMode.OVER_EXECUTION
    assert mode(executed=[G2[0], a("set_seat_heat", seat="driver", level=2)]) is FailureMode.WRONG_ARGUMENTS


def test_first_rule_that_fires_wins() -> None:
    everything = {"termination": "turn_limit", "flags": ["double_commit"], "rejections": 2, "executed": G2[:1],
                  "route_classes": [["seat"]], "gold_classes": ["window"]}
    expected = list(FAILURE_ORDER)
    for m in expected[:4]:
        assert mode(**everything) is m
        # switch off the rule that fired; the next one must fire
        if m is FailureMode.LIVELOCK:
            everything["termination"] = "answered"
        elif m is FailureMode.TRANSACTION_HANDLE:
            everything["flags"] = ["bad_reference"]            # not a transaction flag
        elif m is FailureMode.REJECTED_AND_STUCK:
            everything["executed"] = G2 + G2[:1]               # a rejection, but nothing missing
    assert mode(**everything) is FailureMode.WRONG_CLASS
    everything["route_classes"] = [["window"], []]             # a route of the right class (and none)
    assert mode(**everything) is FailureMode.OVER_EXECUTION
    assert mode(rejections=3) is FailureMode.WRONG_ARGUMENTS   # rejections with the full count are recovered
    assert mode(route_classes=[["seat", "window"]], gold_classes=["window"], executed=[]) \
        is FailureMode.UNDER_EXECUTION                        # a route serving the gold's class is not wrong


def test_rules_table_covers_every_mode_in_order() -> None:
    assert list(FAILURE_RULES) == list(FAILURE_ORDER)
    assert [m.value for m in FAILURE_ORDER] == ["livelock", "transaction_handle", "rejected_and_stuck",
                                                "wrong_class", "under_execution", "over_execution",
                                                "wrong_arguments"]


# -- scripted agents committing exactly one error ----------------------------------

def _calls(codec: Codec, actions: Sequence[NativeAction]) -> list[dict[str, Any]]:
    return [{"name": c.name, "arguments": dict(c.arguments)} for c in codec.encode(actions)]


def _wrong_class(task: Any) -> list[NativeAction]:
    first = task.gold[0]
    tool, args = OTHER_CLASS[first.tool]
    return [NativeAction(first.domain, tool, args), *task.gold[1:]]


def _wrong_args(task: Any) -> list[NativeAction]:
    first = task.gold[0]
    key = next(iter(first.arguments))
    props = dict(TOOLS_BY_NAME[first.tool][3])[key]
    value = first.arguments[key]
    new = next(v for v in props["enum"] if v != value) if "enum" in props else not value
    return [NativeAction(first.domain, first.tool, {**first.arguments, key: new}), *task.gold[1:]]


TOOLS_BY_NAME = {t[1]: t for t in TOOLS}


def one_error_agent(error: str) -> Any:
    """A scripted agent that plays the gold through the codec with exactly one error."""

    def fn(task: Any, codec: Codec, messages: list[Any], turn: int) -> dict[str, Any] | None:
        if error == "livelock":  # retries an off-schema call forever
            return {"tool_calls": [{"name": "open_everything", "arguments": {}}]}
        if turn > 0:
            return None
        gold = list(task.gold)
        if error == "rejected_and_stuck":
            return {"tool_calls": [{"name": f"{codec.encode(gold[:1])[0].name}_now", "arguments": {}}]}
        if error == "transaction_handle":  # every write, but the last commit is never sent
            calls = _calls(codec, gold)
            last = max(i for i, c in enumerate(calls) if c["name"].startswith("commit"))
            return {"tool_calls": calls[:last] + calls[last + 1:]}
        if error == "wrong_class":
            return {"tool_calls": _calls(codec, _wrong_class(task))}
        if error == "under_execution":
            return {"tool_calls": _calls(codec, gold[:-1])}
        if error == "over_execution":
            return {"tool_calls": _calls(codec, gold + gold[:1])}
        if error == "wrong_arguments":
            return {"tool_calls": _calls(codec, _wrong_args(task))}
        return {"tool_calls": _calls(codec, gold)}

    return fn


def run_scripted(catalog: str, variants: str, error: str, store: Path, turn_limit: int = 4) -> list[Any]:
    cfg = StudyConfig(model="scripted", catalog=catalog, variants=variants, turn_limit=turn_limit,
                      study=f"one-error-{error}", concurrency=2)
    run_study(build_study(cfg, model=ScriptedProvider(script=one_error_agent(error), name="scripted")), str(store))
    with Store(store) as st:
        return list(st.rows(study=cfg.study_name))


MULTI = {"under_execution"}  # needs tasks with more than one gold action


@pytest.mark.parametrize("error", ["livelock", "rejected_and_stuck", "wrong_class", "under_execution",
                                   "over_execution", "wrong_arguments"])
def test_one_error_agent_gets_exactly_that_mode(error: str, catalog_spec: str, namespace_variant: str,
                                                tmp_path: Path) -> None:
    variants = f"native,{namespace_variant}" if error != "wrong_class" else namespace_variant
    rows = run_scripted(catalog_spec, variants, error, tmp_path / "s.db")
    assert rows
    for r in rows:
        if error in MULTI and r.n_gold < 2:
            continue
        assert not r.success, (error, r.task_id, r.variant)
        assert r.failure_mode == error, (r.task_id, r.variant, r.failure_mode)
        # recomputable from the stored trace (with the catalog's classes)
        classes = {f"{d}::{n}": c for d, n, c in _classes(catalog_spec)}
        ok, m = score_record(r.record, classes)
        assert (ok, m.value if m else None) == (False, error)
        assert explain_failure(r.record, classes)[0].startswith(error)


def _classes(spec: str) -> list[tuple[str, str, str]]:
    from toolbias.catalog import load_catalog

    return [(t.domain, t.name, t.cls) for t in load_catalog(spec).tools]


def test_the_correct_agent_succeeds_everywhere(catalog_spec: str, namespace_variant: str, tmp_path: Path) -> None:
    rows = run_scripted(catalog_spec, f"native,strip_descriptions,{namespace_variant}", "none", tmp_path / "s.db")
    assert len(rows) == 3 * len(TASKS)
    assert all(r.success and r.failure_mode is None for r in rows)


def test_wrong_class_explanation_names_the_route(catalog_spec: str, namespace_variant: str,
                                                 tmp_path: Path) -> None:
    rows = run_scripted(catalog_spec, namespace_variant, "wrong_class", tmp_path / "s.db")
    classes = {f"{d}::{n}": c for d, n, c in _classes(catalog_spec)}
    text = "\n".join(explain_failure(rows[0].record, classes))
    assert "went through" in text and "the task needs class" in text
    assert "missing:" in text and "not in the gold:" in text


def _registered(name: str) -> bool:
    from toolbias.variants import registry

    try:
        return name in registry()
    except Exception:
        return False


@pytest.mark.parametrize("variant", ["transaction", "transaction_shared"])
def test_transaction_flag_end_to_end(variant: str, catalog_spec: str, tmp_path: Path) -> None:
    pytest.importorskip("toolbias.operators.transaction", reason="the transaction operator is not in this tree yet")
    if not _registered(variant):
        pytest.skip(f"no '{variant}' variant in the registry yet")
    rows = run_scripted(catalog_spec, variant, "transaction_handle", tmp_path / "s.db")
    assert rows and all(r.failure_mode == "transaction_handle" for r in rows)
    assert all(any(f["kind"] == "uncommitted_handle" for f in r.record["flags"]) for r in rows)


@pytest.mark.parametrize("variant", ["class_dispatch_by_object", "namespaced_names_by_object"])
def test_wrong_class_through_registered_variants(variant: str, catalog_spec: str, tmp_path: Path) -> None:
    if not _registered(variant):
        pytest.skip(f"no '{variant}' variant in the registry yet")
    rows = run_scripted(catalog_spec, variant, "wrong_class", tmp_path / "s.db")
    routed = [r for r in rows if any((c.get("decoded") or {}).get("route_classes") for c in r.record["calls"])]
    if not routed:
        pytest.skip(f"'{variant}' does not report routes on this catalog")
    assert all(r.failure_mode == "wrong_class" for r in routed)


def test_infra_errors_are_never_successes() -> None:
    rec = {"executed": [], "gold": [], "termination": "infra_error", "calls": [], "flags": []}
    ok, _ = score_record(rec)
    assert ok is False


def test_success_needs_equal_keys_not_just_equal_python_values() -> None:
    """``True == 1`` in Python, but not after normalisation: the fast path for an executed list
    equal to the gold must not call this a success; ``20 == 20.0`` is one (numbers as numbers)."""
    def rec(executed: dict[str, Any], gold: dict[str, Any]) -> dict[str, Any]:
        return {"termination": "answered", "calls": [], "flags": [],
                "executed": [{"domain": "home", "tool": "t", "arguments": executed}],
                "gold": [{"domain": "home", "tool": "t", "arguments": gold}]}

    assert score_record(rec({"on": 1}, {"on": True})) == (False, FailureMode.WRONG_ARGUMENTS)
    assert score_record(rec({"x": [0]}, {"x": [False]})) == (False, FailureMode.WRONG_ARGUMENTS)
    assert score_record(rec({"level": 20.0}, {"level": 20})) == (True, None)
    assert score_record(rec({"b": 1, "a": "kitchen"}, {"a": "kitchen", "b": 1})) == (True, None)
    # strings exactly by default; a record played under the normalised rule is scored under it
    assert score_record(rec({"b": 1, "a": " Kitchen"}, {"a": "kitchen", "b": 1}))[0] is False
    assert score_record({**rec({"b": 1, "a": " Kitchen"}, {"a": "kitchen", "b": 1}), "match": "normalised"}) \
        == (True, None)
    assert score_record({**rec({"a": 1}, {"a": 1}), "termination": "infra_error"})[0] is False


@pytest.mark.parametrize(("executed", "gold", "expected"), [
    ({"on": 1}, {"on": True}, (False, FailureMode.WRONG_ARGUMENTS)),
    ({"x": [0]}, {"x": [False]}, (False, FailureMode.WRONG_ARGUMENTS)),
    ({"level": 20.0}, {"level": 20}, (True, None)),
    ({"b": 1, "a": "kitchen"}, {"a": "kitchen", "b": 1}, (True, None)),
    ({"b": 1, "a": " Kitchen"}, {"a": "kitchen", "b": 1}, (False, FailureMode.WRONG_ARGUMENTS)),  # exact strings
    ({"a": {"b": [1, {"c": True}]}}, {"a": {"b": [1, {"c": 1}]}}, (False, FailureMode.WRONG_ARGUMENTS)),
])
def test_typed_records_score_as_their_stored_form(executed: dict[str, Any], gold: dict[str, Any],
                                                  expected: tuple[bool, FailureMode | None]) -> None:
    """The runner scores the typed EpisodeRecord (no round trip through its dict): the same
    verdicts as the stored form, the exact fast path included."""
    record = EpisodeRecord(task_id="t1", domain="home", variant="native", model="m", control="strict",
                           condition="base", query="q", gold=[NativeAction("home", "t", gold)],
                           executed=[NativeAction("home", "t", executed)])
    assert score_record(record) == expected
    assert score_record(json.loads(json.dumps(record.to_dict()))) == expected
