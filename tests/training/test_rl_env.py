"""The multi-turn RL environment: protocol replies in turn, rejections, rewards and ablations."""

from __future__ import annotations

import json

import pytest

from tests.support.catalogs import mini_catalog
from toolbias import VariantSpec, build_codec
from toolbias.training import EnvOptions, Reward, ToolEnv, sft_examples
from toolbias.training.rl_env import UNEXPLAINED
from toolbias.variants.codec import Control

CAT = mini_catalog()
NATIVE = build_codec(CAT, VariantSpec("native"))
REFERENCE = build_codec(CAT, VariantSpec("reference_resolution", ({"op": "reference"},)))
TRANSACTION = build_codec(CAT, VariantSpec("transaction", ({"op": "transaction"},)))
TWO = next(t for t in CAT.tasks if len(t.gold) == 2)


def play_trace(env: ToolEnv) -> None:
    """Play the task's turn-by-turn trace: each assistant turn as the trace wrote it, read from the
    environment's own replies (the handles the environment hands out are the ones used)."""
    row = next(sft_examples([env.codec], [env.task]))
    turns = [m for m in row["messages"] if m["role"] == "assistant"]
    for m in turns:
        replies = env.step({"role": "assistant", "content": m["content"], "tool_calls": m["tool_calls"]})
        assert all(not r["content"].startswith("Error") for r in replies)
    assert env.done


@pytest.mark.parametrize("codec", [NATIVE, REFERENCE, TRANSACTION], ids=lambda c: c.name)
def test_protocol_replies_come_in_turn_and_the_trace_earns_exact_success(codec):
    env = ToolEnv(codec, TWO)
    messages, tools = env.reset()
    assert [m["role"] for m in messages] == ["system", "user"] and tools == codec.schema(TWO.domain)
    play_trace(env)
    assert env.reward() == 1.0 and env.record.turns >= (3 if codec is not NATIVE else 2)


def test_a_handle_is_only_valid_once_the_environment_gave_it():
    env = ToolEnv(REFERENCE, CAT.tasks[0])
    row = next(sft_examples([REFERENCE], [CAT.tasks[0]]))
    use = row["messages"][4]["tool_calls"]  # the call passing the ref id, sent before resolving it
    reply = env.step({"role": "assistant", "tool_calls": use})
    assert reply[0]["content"].startswith("Error") and not env.done
    env.step({"role": "assistant", "tool_calls": row["messages"][2]["tool_calls"]})  # resolve
    env.step({"role": "assistant", "tool_calls": use})  # now valid
    env.step({"role": "assistant", "content": "Done."})
    assert env.done and env.reward() == 1.0


def test_rejections_with_and_without_explanation():
    bad = [{"name": "set_light", "arguments": {"room": "garage", "state": "on"}}]
    explained = ToolEnv(NATIVE, CAT.tasks[0]).step(bad)[0]["content"]
    assert explained.startswith("Error") and "garage" in explained
    unexplained = ToolEnv(NATIVE, CAT.tasks[0], EnvOptions(explain=False)).step(bad)[0]["content"]
    assert unexplained == UNEXPLAINED


def test_no_rejections_ablation_executes_the_decoded_native_call():
    task = CAT.tasks[0]
    native_call = [{"name": a.tool, "arguments": dict(a.arguments)} for a in task.gold]
    strict = ToolEnv(TRANSACTION, task)
    assert strict.step(native_call)[0]["content"].startswith("Error")
    lenient = ToolEnv(TRANSACTION, task, EnvOptions(control=Control.LENIENT))
    assert json.loads(lenient.step(native_call)[0]["content"])["ok"] is True
    lenient.step("Done.")
    assert lenient.reward() == 1.0


def test_shaped_reward_is_documented_partial_credit_below_success():
    task = TWO
    first = [{"name": task.gold[0].tool, "arguments": dict(task.gold[0].arguments)}]
    exact = ToolEnv(NATIVE, task, EnvOptions(reward=Reward.EXACT))
    exact.step(first)
    exact.step("done")
    assert exact.reward() == 0.0
    shaped = ToolEnv(NATIVE, task, EnvOptions(reward=Reward.SHAPED))
    shaped.step(first)
    shaped.step({"role": "assistant", "tool_calls": [{"function": {"name": "nope", "arguments": "{}"}}]})
    shaped.step("done")
    assert shaped.reward() == pytest.approx(0.5 * 1 / 2 - 0.05)  # one of two gold actions, one rejection
    full = ToolEnv(NATIVE, task, EnvOptions(reward=Reward.SHAPED))
    full.step([{"name": a.tool, "arguments": dict(a.arguments)} for a in task.gold])
    assert full.reward() == 1.0


def test_calls_recovered_from_text_and_the_turn_limit():
    env = ToolEnv(NATIVE, CAT.tasks[0], EnvOptions(turn_limit=2, reward=Reward.EXACT))
    a = CAT.tasks[0].gold[0]
    text = f'<tool_call>{json.dumps({"name": a.tool, "arguments": dict(a.arguments)})}</tool_call>'
    assert json.loads(env.step(text)[0]["content"])["ok"] is True and not env.done
    turn = env.messages[2]  # the recovered call is the turn's call, no longer its text
    assert turn["tool_calls"][0]["function"]["name"] == a.tool and "<tool_call>" not in turn["content"]
    env.step(text)
    assert env.done and env.record.termination.value == "turn_limit" and env.reward() == 0.0  # executed twice
    with pytest.raises(Exception, match="after the episode ended"):
        env.step("again")
    env.reset()
    assert not env.done and env.executed == []


def test_single_turn_reward_function_of_earlier_releases():
    from toolbias import exact_success_reward

    reward = exact_success_reward(CAT, {"native": NATIVE, "reference_resolution": REFERENCE})
    t = CAT.tasks[0]
    good = [{"role": "assistant", "tool_calls": [
        {"type": "function", "function": {"name": a.tool, "arguments": json.dumps(dict(a.arguments))}} for a in t.gold]}]
    text = "<tool_call>" + json.dumps({"name": t.gold[0].tool, "arguments": dict(t.gold[0].arguments)}) + "</tool_call>"
    bad = [{"role": "assistant", "content": "I cannot do that."}]
    assert reward([good, text, bad], task_id=[t.id] * 3, variant=["native"] * 3) == [1.0, 1.0, 0.0]


def test_the_default_reward_is_partial_credit_and_exact_only_is_the_ablation():
    """partial (the default): 1.0 on exact success, else half the F1 of the artifact's recall and
    precision; exact: the ablation, 0 for the same episode."""
    assert EnvOptions().reward is Reward.PARTIAL
    task = TWO
    first = [{"name": task.gold[0].tool, "arguments": dict(task.gold[0].arguments)}]
    partial = ToolEnv(NATIVE, task)
    partial.step(first)
    partial.step({"role": "assistant", "tool_calls": [{"function": {"name": "nope", "arguments": "{}"}}]})
    partial.step("done")
    # one of two gold actions executed, nothing else: recall 1/2, precision 1/1, F1 2/3; rejections cost nothing
    assert partial.reward() == pytest.approx(0.5 * 2 / 3)
    twice = ToolEnv(NATIVE, task)
    twice.step(first + first)
    assert twice.reward() == pytest.approx(0.5 * 0.5)  # recall 1/2, precision 1/2
    none = ToolEnv(NATIVE, task)
    none.step("done")
    assert none.reward() == 0.0
    full = ToolEnv(NATIVE, task)
    full.step([{"name": a.tool, "arguments": dict(a.arguments)} for a in task.gold])
    assert full.reward() == 1.0
