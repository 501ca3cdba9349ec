"""SFT traces, the RL environment and the GRPO reward."""

from __future__ import annotations

import json

from tests.support.catalogs import mini_catalog
from toolbias import VariantSpec, build_codec
from toolbias.training import ToolEnv, exact_success_reward, sft_examples

CAT = mini_catalog()
NATIVE = build_codec(CAT, VariantSpec("native"))
STRIP = build_codec(CAT, VariantSpec("strip_descriptions", ({"op": "strip"},)))


def test_sft_examples_rotate_the_mixture_and_replay_the_gold():
    rows = list(sft_examples([NATIVE, STRIP], CAT.tasks[:4]))
    assert [r["variant"] for r in rows] == ["native", "strip_descriptions", "native", "strip_descriptions"]
    first = rows[0]
    json.dumps(first)  # serialisable as one JSONL line
    calls = [c for m in first["messages"] if m.get("tool_calls") for c in m["tool_calls"]]
    gold = CAT.tasks[0].gold
    assert [(c["function"]["name"], c["function"]["arguments"]) for c in calls] == [
        (a.tool, dict(a.arguments)) for a in gold]
    assert first["tools"][0]["type"] == "function"
    assert rows[1]["tools"][0]["function"]["description"] == ""  # the stripped variant's own schema


def test_env_rewards_exact_success_only():
    task = CAT.tasks[1]
    env = ToolEnv(NATIVE, task)
    messages, tools = env.reset()
    assert messages[-1]["content"] == task.query and tools
    replies = env.step([{"name": a.tool, "arguments": dict(a.arguments)} for a in task.gold])
    assert all("Error" not in r["content"] for r in replies) and env.reward() == 1.0
    env.reset()
    env.step([{"name": task.gold[0].tool, "arguments": json.dumps(dict(task.gold[0].arguments))}])
    assert env.reward() == 0.0
    env.reset()
    assert "Error" in env.step([{"name": "nope", "arguments": "{bad"}])[0]["content"]


def test_grpo_reward_function():
    reward = exact_success_reward(CAT, {"native": NATIVE})
    t = CAT.tasks[0]
    good = [{"role": "assistant", "tool_calls": [
        {"type": "function", "function": {"name": a.tool, "arguments": json.dumps(dict(a.arguments))}} for a in t.gold]}]
    bad = [{"role": "assistant", "content": "I cannot do that."}]
    assert reward([good, bad], task_id=[t.id, t.id], variant=["native", "native"]) == [1.0, 0.0]
