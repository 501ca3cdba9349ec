"""The episode loop with scripted models: decoding, execution, rejections, limits, infra errors."""

from __future__ import annotations

import asyncio
import json

from tests.support.catalogs import mini_catalog
from toolbias import Control, VariantSpec, build_codec
from toolbias.providers.oracle import OracleProvider
from toolbias.providers.scripted import ScriptedProvider
from toolbias.study.episode import Condition, EpisodeConfig, Termination, run_episode
from toolbias.study.scoring import FailureMode, score_record

CAT = mini_catalog()
NATIVE = build_codec(CAT, VariantSpec("native"))
TASK = CAT.tasks[0]  # turn on the kitchen light


def play(script, codec=NATIVE, task=TASK, **cfg):
    model = ScriptedProvider(script=script)
    return asyncio.run(run_episode(task, codec, model, EpisodeConfig(**cfg)))


def call(name, args):
    return {"tool_calls": [{"name": name, "arguments": args}]}


def test_correct_call_executes_and_succeeds():
    rec = play({"default": [call("set_light", {"room": "kitchen", "state": "on"})]})
    assert [a.to_dict() for a in rec.executed] == [a.to_dict() for a in TASK.gold]
    assert rec.termination is Termination.ANSWERED and rec.turns == 2
    assert score_record(rec) == (True, None)
    tool_msg = [m for m in rec.messages if m["role"] == "tool"][0]
    assert '"ok": true' in tool_msg["content"]


def test_rejection_goes_back_as_error_message_and_agent_can_retry():
    rec = play({"default": [call("set_lights", {"room": "kitchen", "state": "on"}),
                            call("set_light", {"room": "kitchen", "state": "on"})]})
    first = rec.calls[0]
    assert first.decoded is not None and first.decoded.outcome.value == "rejection"
    assert first.message.startswith("Error: Unknown tool 'set_lights'") and "set_light" in first.message
    assert score_record(rec)[0] is True and rec.rejections == 1


def test_rejected_and_stuck():
    rec = play({"default": [call("set_light", {"room": "garage", "state": "on"})]})
    assert rec.executed == []
    assert score_record(rec) == (False, FailureMode.REJECTED_AND_STUCK)


def test_unparseable_arguments_are_a_recorded_parse_error():
    rec = play({"default": [{"tool_calls": [{"name": "set_light", "arguments": "{not json"}]}]})
    assert rec.calls[0].decoded is None and "could not parse" in rec.calls[0].message


def test_turn_limit_is_livelock():
    rec = play(lambda task, codec, msgs, turn: call("nope", {}), turn_limit=3)
    assert rec.termination is Termination.TURN_LIMIT and rec.turns == 3
    assert score_record(rec) == (False, FailureMode.LIVELOCK)


def test_infra_error_is_kept_apart():
    rec = play({"default": [{"infra_error": "HTTP 503"}]})
    assert rec.termination is Termination.INFRA_ERROR and rec.infra_error == "HTTP 503"


def test_parallel_calls_handled_in_order():
    task = CAT.tasks[1]  # fan high then light off
    turn = {"tool_calls": [{"name": "set_fan", "arguments": {"room": "kitchen", "speed": "high"}},
                           {"name": "set_light", "arguments": {"room": "kitchen", "state": "off"}}]}
    rec = play({"default": [turn]}, task=task)
    assert [a.tool for a in rec.executed] == ["set_fan", "set_light"]
    assert score_record(rec)[0]


def test_over_and_under_execution_and_wrong_arguments():
    extra = call("set_light", {"room": "office", "state": "on"})
    rec = play({"default": [call("set_light", {"room": "kitchen", "state": "on"}), extra]})
    assert score_record(rec) == (False, FailureMode.OVER_EXECUTION)
    rec = play({"default": []}, task=CAT.tasks[1])
    assert score_record(rec) == (False, FailureMode.UNDER_EXECUTION)
    rec = play({"default": [call("set_light", {"room": "office", "state": "on"})]})
    assert score_record(rec) == (False, FailureMode.WRONG_ARGUMENTS)


def test_instruction_condition_and_required_first_call():
    seen = {}

    def script(task, codec, messages, turn):
        seen.setdefault("system", messages[0]["content"])
        return None

    strip = build_codec(CAT, VariantSpec("s", ({"op": "strip"},)))
    play(script, codec=strip, condition=Condition.INSTRUCTION)
    assert "Use only the provided tools" in seen["system"] and "You control a home." in seen["system"]


def test_oracle_scores_every_task():
    for task in CAT.tasks:
        rec = asyncio.run(run_episode(task, NATIVE, OracleProvider(), EpisodeConfig()))
        assert score_record(rec) == (True, None), task.id


def test_lenient_executes_lower_level_form_and_records_it():
    strip = build_codec(CAT, VariantSpec("s", ({"op": "strip"},)))
    # a call valid only with an extra argument is off-schema in both modes
    bad = call("set_light", {"room": "kitchen", "state": "on", "extra": 1})
    assert play({"default": [bad]}, codec=strip, control=Control.LENIENT).executed == []
    good = call("set_light", {"room": "kitchen", "state": "on"})
    rec = play({"default": [good]}, codec=strip, control=Control.LENIENT)
    assert score_record(rec)[0]


def test_decoded_actions_are_executed_without_validating_them_again(monkeypatch):
    """The session's level-0 check validated them; the environment validates untrusted callers only."""
    import toolbias.study.env as env_module
    from toolbias.catalog.model import NativeAction
    from toolbias.study.env import Environment

    checked = []
    validate = env_module.validate_action
    monkeypatch.setattr(env_module, "validate_action", lambda cat, a: checked.append(a) or validate(cat, a))
    rec = play({"default": [call("set_light", {"room": "kitchen", "state": "on"})]})
    assert score_record(rec) == (True, None) and checked == []
    env = Environment(CAT, "home")
    bad = NativeAction("home", "set_light", {"room": "garage", "state": "on"})
    assert env.execute(bad)["ok"] is False and checked == [bad]
    good = NativeAction("home", "set_light", {"room": "kitchen", "state": "on"})
    assert env.execute(good, trusted=True) == Environment(CAT, "home").execute(good)


def test_each_tool_result_is_stored_once_as_the_message():
    rec = play({"default": [call("set_light", {"room": "kitchen", "state": "on"})]})
    stored = rec.calls[0].to_dict()
    assert "results" not in stored
    assert stored["message"] == json.dumps(rec.calls[0].results[0], ensure_ascii=False)
    assert json.loads(stored["message"])["state"] == {"state": "on"}


def test_a_result_keeps_the_state_of_its_moment():
    """Results are snapshots: a later action on the same object does not change an earlier message."""
    from toolbias.catalog.model import NativeAction
    from toolbias.study.env import Environment

    env = Environment(CAT, "home")
    first = env.execute(NativeAction("home", "set_light", {"room": "kitchen", "state": "on"}), trusted=True)
    env.execute(NativeAction("home", "set_light", {"room": "kitchen", "state": "off"}), trusted=True)
    assert first["state"] == {"state": "on"} and env.state["light"]["kitchen"] == {"state": "off"}
