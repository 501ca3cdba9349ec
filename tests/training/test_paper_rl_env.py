"""The RL environment under ``--protocol paper`` against the artifact's own runner: one deterministic
scripted policy plays each task both in :class:`~toolbias.training.rl_env.ToolEnv` (stepped turn by
turn, as the GRPO rollout steps it) and in the artifact's ``eval/run_agentic.py`` (through a loopback
server). The environment shows the policy what the artifact's requests carry (the same messages and
tools, turn by turn), and each episode's executed actions, turns, rejections, flags and livelock agree;
the rewards are the artifact's own figures: ``exact`` its exact success, ``partial`` (the default)
1.0 on success else half the F1 of its recall and precision. The artifact is imported from
``../shared/reference`` (skipped with the reason when absent)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.paper_runs import (
    CATALOG,
    CONTROLS,
    MODEL,
    PERSONAS,
    agentic_runner,
    artifact_query,
    needs_runner,
    reply_message,
    scripted_reply,
    write_queries,
)
from tests.support.servers import FakeOpenAIServer
from toolbias.study.paper_protocol import Protocol
from toolbias.training.rl_env import UNEXPLAINED_PAPER, EnvOptions, Reward, ToolEnv
from toolbias.variants.codec import Control

pytestmark = needs_runner


def _sample(catalog: Any) -> list[Any]:
    """The first task of every (domain, gold length)."""
    seen: dict[tuple[str, int], Any] = {}
    for t in sorted(catalog.tasks, key=lambda t: t.id):
        seen.setdefault((t.domain, len(t.gold)), t)
    return list(seen.values())


def _partial(exact: int, recall: float, precision: float) -> float:
    if exact:
        return 1.0
    return 0.0 if recall + precision == 0 else 0.5 * 2 * recall * precision / (recall + precision)


@pytest.mark.parametrize("control", list(CONTROLS))
@pytest.mark.parametrize("variant", ["paper.native", "paper.fully_merged"])
def test_rl_episodes_and_rewards_equal_the_artifacts(variant: str, control: str, tmp_path: Path) -> None:
    from toolbias.catalog import load_catalog
    from toolbias.study.runner import paper_variants
    from toolbias.variants import build_codec

    catalog = load_catalog(CATALOG)
    tasks = _sample(catalog)
    queries = [artifact_query(t, catalog) for t in tasks]
    gold_of = {q["query"]: q["gold_calls"] for q in queries}
    persona_of = {q["query"]: PERSONAS[i % len(PERSONAS)] for i, q in enumerate(queries)}
    with FakeOpenAIServer(models=(MODEL,), responder=lambda body: scripted_reply(body, gold_of, persona_of)) as srv:
        ra = agentic_runner(variant, control, srv.base_url, write_queries(tmp_path / "q.jsonl", queries))
        theirs = {q["id"]: ra.run_episode(q) for q in queries}
        requests = list(srv.requests)
    assert all(r["err"] is None for r in theirs.values())
    last_request = {b["messages"][1]["content"]: b for b in requests}  # each query's longest conversation
    codec = build_codec(catalog, paper_variants(variant)[0])
    options = EnvOptions(control=Control(control), protocol=Protocol.PAPER)
    for task in tasks:
        env = ToolEnv(codec, task, options)
        while not env.done:  # the policy reads what the environment shows it, as the rollout's policy does
            env.step(reply_message(scripted_reply({"messages": env.messages, "tools": env.tools}, gold_of, persona_of)))
        t, body = theirs[task.id], last_request[task.query]
        assert env.messages[:len(body["messages"])] == body["messages"] and env.tools == body["tools"], task.id
        rec = env.record
        assert ([[a.tool, a.arguments] for a in env.executed], rec.turns, rec.paper["n_rejected"], rec.paper["flags"],
                rec.paper["argument_parse_errors"], rec.paper["livelock"]) == \
            (t["actions"], t["turns"], t["n_rejected"], t["flags"], t["argument_parse_errors"],
             t["turns"] >= ra.MAX_TURNS), task.id
        assert env.reward() == pytest.approx(_partial(t["exact"], t["recall"], t["precision"])), task.id
        exact_only = ToolEnv(codec, task, EnvOptions(control=Control(control), protocol=Protocol.PAPER,
                                                     reward=Reward.EXACT), calls=env.paper_calls)
        for m in env.messages[2:]:
            if m["role"] == "assistant" and not exact_only.done:
                exact_only.step(m)
        assert exact_only.reward() == float(t["exact"]), task.id
    # not vacuous: successes, failures with partial credit, and livelocks all occur
    rows = list(theirs.values())
    assert {r["exact"] for r in rows} == {0, 1}
    assert any(0 < r["recall"] for r in rows if not r["exact"]) and any(r["turns"] >= ra.MAX_TURNS for r in rows)


def test_the_unexplained_rejection_ablation_keeps_the_artifacts_error_form() -> None:
    from toolbias.catalog import load_catalog
    from toolbias.study.runner import paper_variants
    from toolbias.variants import build_codec

    catalog = load_catalog(CATALOG)
    codec = build_codec(catalog, paper_variants("paper.native")[0])
    task = _sample(catalog)[0]
    off = [{"name": "no_such_tool", "arguments": {}}]
    explained = ToolEnv(codec, task, EnvOptions(protocol=Protocol.PAPER)).step(off)[0]["content"]
    assert json.loads(explained) == {"error": "Unknown function `no_such_tool`. Use only the provided tools."}
    silent = ToolEnv(codec, task, EnvOptions(protocol=Protocol.PAPER, explain=False))
    assert silent.step(off)[0]["content"] == UNEXPLAINED_PAPER and silent.messages[-1]["content"] == UNEXPLAINED_PAPER
    assert silent.record.paper is None and not silent.done  # still running: the episode goes on
    # the no-rejections ablation is the artifact's loose control: the unknown name runs as a native action
    loose = ToolEnv(codec, task, EnvOptions(protocol=Protocol.PAPER, control=Control.LENIENT))
    assert json.loads(loose.step(off)[0]["content"]) == {"status": "ok"}
    assert [a.tool for a in loose.executed] == ["no_such_tool"]


def test_a_variant_the_artifacts_reading_misses_is_refused_before_training() -> None:
    from tests.support.catalogs import mini_catalog
    from toolbias import VariantSpec, build_codec
    from toolbias.study.paper_protocol import ProtocolNotImplemented

    cat = mini_catalog()
    codec = build_codec(cat, VariantSpec("reference_resolution", ({"op": "reference"},)))
    with pytest.raises(ProtocolNotImplemented, match="reference_resolution"):
        ToolEnv(codec, cat.tasks[0], EnvOptions(protocol=Protocol.PAPER))


def test_grpo_prompts_and_rollouts_play_the_papers_episode() -> None:
    """The GRPO wiring under the paper's protocol: prompts carry the artifact's system prompt, the
    rollout's environments are paper-protocol episodes sharing one call map per variant, and a turn
    may generate the artifact's 1,024 tokens."""
    from toolbias.catalog import load_catalog
    from toolbias.study.paper_protocol import PAPER_MAX_TOKENS, TOOL_INSTRUCTION
    from toolbias.study.runner import paper_variants
    from toolbias.training.grpo import Rollout, rl_prompts
    from toolbias.variants import build_codec

    catalog = load_catalog(CATALOG)
    codec = build_codec(catalog, paper_variants("paper.fully_merged")[0])
    tasks = _sample(catalog)[:2]
    options = EnvOptions(protocol=Protocol.PAPER)
    rows = rl_prompts([codec], tasks, options)
    system = rows[0]["prompt"][0]["content"]
    assert system == f"{catalog.domain(tasks[0].domain).system}\n\n{TOOL_INSTRUCTION}"
    rollout = Rollout({codec.name: codec}, options)
    assert rollout.max_turn_tokens == PAPER_MAX_TOKENS
    assert Rollout({codec.name: codec}, EnvOptions()).max_turn_tokens is None  # toolbias's: the trainer's budget
    env = rollout.env_for(rows[0]["prompt"])
    assert env.paper is not None and env.paper_calls is rollout.paper_maps[codec.name]
    assert env.messages[0]["content"] == system and env.record.condition == "base@paper"
