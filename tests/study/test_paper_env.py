"""The paper protocol's environment and episode loop on their own (the differential tests in
tests/differential/test_paper_protocol.py compare them with the artifact's code where it is present)."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.support.servers import FakeOpenAIServer, Reply
from toolbias.catalog import load_catalog
from toolbias.providers import make_provider
from toolbias.providers.base import GenerateConfig
from toolbias.study.episode import EpisodeConfig, Termination
from toolbias.study.paper_env import Dispatch, PaperCallMap, PaperEnv, Plain
from toolbias.study.paper_episode import paper_arguments, run_paper_episode
from toolbias.study.paper_protocol import TOOL_INSTRUCTION, Protocol, ProtocolNotImplemented
from toolbias.variants import build_codec, resolve_variants
from toolbias.variants.codec import Control, Outcome


def env(variant: str, control: Control = Control.STRICT, domain: str = "lighting") -> PaperEnv:
    codec = build_codec(load_catalog("builtin"), resolve_variants(variant)[0])
    return PaperEnv(PaperCallMap(codec).reader(domain, control is Control.STRICT), domain, control is Control.STRICT)


def test_hard_control_rejects_only_unknown_names_with_the_artifacts_text() -> None:
    e = env("native")
    text, d = e.call("switch_light", {"room": "KITCHEN", "power": "ON", "extra": None})  # off-schema values run
    assert text == '{"status": "ok", "executed": "switch_light"}' and d.outcome is Outcome.NATIVE
    text, d = e.call("switch_lite", {})
    assert text == '{"error": "Unknown function `switch_lite`. Use only the provided tools."}'
    assert d.outcome is Outcome.REJECTION and (e.n_calls, e.n_rejected) == (2, 1)
    assert [a.arguments for a in e.executed] == [{"room": "KITCHEN", "power": "ON", "extra": None}]


def test_loose_control_runs_unknown_names_as_native_actions() -> None:
    e = env("native", Control.LENIENT)
    assert e.call("switch_lite", {"room": "hall"})[0] == '{"status": "ok"}'
    assert [(a.tool, a.arguments) for a in e.executed] == [("switch_lite", {"room": "hall"})] and e.n_rejected == 0


def test_a_flat_dispatcher_checks_its_operation_only() -> None:
    e = env("fully_merged")
    entry = e.reader.calls["execute"]
    assert isinstance(entry, Dispatch) and entry.encoding == "flat" and "switch_light" in entry.ops
    text, _ = e.call("execute", {"operation": "switch_light", "switch_light::room": "hall", "set_fan::speed": 2,
                                 "other": "", "x::level": None})
    assert text == '{"status": "ok", "executed": "switch_light"}'
    assert e.executed[-1].arguments == {"room": "hall", "speed": 2}  # any prefix stripped, "" and null dropped
    text, _ = e.call("execute", {"operation": "switch_lightz"})
    assert text.startswith('{"error": "operation must be one of [\'') and e.n_rejected == 1
    loose = env("fully_merged", Control.LENIENT)
    assert loose.call("execute", {"operation": "switch_lightz"})[0] == '{"status": "ok", "executed": "switch_lightz"}'
    assert loose.call("execute", {})[0] == '{"error": "call could not be executed"}'
    assert [f for f, _ in loose.finish()] == ["bad_execute", "bad_operation", "bad_execute", "bad_operation"]


def test_nested_and_union_dispatchers_read_as_the_artifacts() -> None:
    nested = Dispatch("nested", ["a", "b"], {"a": "a", "b": "b"}, {"a": ["x"], "b": ["y"]})
    assert nested.problem({"operation": "a", "arguments": {"x": 1}}) is None
    assert nested.problem({"operation": "a", "arguments": {"y": 1}}) == "arguments ['y'] do not belong to `a`"
    assert nested.problem({"operation": "a", "arguments": [1]}) == "`arguments` must be an object"
    assert nested.problem({"operation": "a", "arguments": {}, "z": 1}) == "unexpected top-level keys ['z']"
    assert nested.read({"operation": "b", "arguments": {"y": 2}}) == ("b", {"y": 2})
    union = Dispatch("union", ["a", "b"], {"a": "a", "b": "b"}, {"a": ["x"], "b": ["y"]})
    assert union.problem({"a": {"x": 1}, "b": {}}) is None
    assert union.problem({"a": {"x": 1}, "b": {"y": 2}}) == "expected exactly one operation object; got ['a', 'b']"
    assert union.problem({"c": 1}) == "unknown union keys ['c']"
    assert union.read({"a": {"x": 1}, "b": {"y": 2}}) == (None, {})


def test_transactions_answer_as_the_artifacts() -> None:
    e = env("transaction", domain="lighting")
    begins = sorted(n for n, r in e.reader.calls.items() if n.startswith("begin_"))
    tool = begins[0][len("begin_"):]
    assert e.call(f"begin_{tool}", {})[0] == \
        '{"txn_id": "txn_1", "status": "transaction open; set arguments then commit"}'
    setter = next(n for n in e.reader.calls if n.startswith(f"set_{tool}__"))
    assert e.call(setter, {"txn_id": "txn_9", "x": 1})[0] == \
        f'{{"error": "{setter}(txn_9)", "hint": "begin a transaction first and use its txn_id"}}'
    assert e.call(f"begin_{tool}", {})[0].startswith('{"txn_id": "txn_2"')
    assert [f for f, _ in e.finish()] == ["set_unknown_txn", "dangling_txn", "dangling_txn"]


def test_variants_the_artifact_cannot_read_are_refused_by_name() -> None:
    codec = build_codec(load_catalog("builtin"), resolve_variants("fully_split")[0])
    with pytest.raises(ProtocolNotImplemented, match="variant 'fully_split'"):
        PaperCallMap(codec).check(["lighting"])
    assert isinstance(env("strip_descriptions").reader.calls["switch_light"], Plain)


@pytest.mark.parametrize(("raw", "args", "failed"), [
    ('{"a": 1}', {"a": 1}, False), ("", {}, False), ('{"a": ', {}, True), ("[1]", {}, True), ("  ", {}, True),
])
def test_unparseable_arguments_run_as_an_empty_object(raw: str, args: dict, failed: bool) -> None:
    assert paper_arguments(raw) == (args, failed)


def test_an_episode_sends_the_artifacts_messages_and_ends_in_a_livelock_at_16_turns() -> None:
    catalog = load_catalog("builtin")
    codec = build_codec(catalog, resolve_variants("native")[0])
    task = next(t for t in catalog.tasks if t.domain == "lighting")
    config = EpisodeConfig(control=Control.STRICT, turn_limit=16, generate=GenerateConfig(max_tokens=1024),
                           protocol=Protocol.PAPER)
    with FakeOpenAIServer(default=Reply.calls(("nope", '{"a": '))) as srv:
        model = make_provider("openai:fake-model", base_url=srv.base_url)
        rec = asyncio.run(run_paper_episode(task, codec, model, config, PaperCallMap(codec)))
        bodies = list(srv.requests)
    assert rec.turns == 16 and rec.termination is Termination.TURN_LIMIT and rec.paper is not None
    assert rec.paper["livelock"] and rec.paper["n_rejected"] == 16 and rec.paper["argument_parse_errors"] == 16
    first, last = bodies[0], bodies[-1]
    assert set(first) == {"model", "messages", "tools", "temperature", "max_tokens"} and first["max_tokens"] == 1024
    assert first["messages"][0]["content"] == f"{catalog.domain('lighting').system}\n\n{TOOL_INSTRUCTION}"
    assert last["messages"][2] == {"role": "assistant", "content": "",
                                   "tool_calls": [{"id": "call_0", "type": "function",
                                                   "function": {"name": "nope", "arguments": '{"a": '}}]}
    assert last["messages"][3] == {"role": "tool", "tool_call_id": "call_0", "content": json.dumps(
        {"error": "Unknown function `nope`. Use only the provided tools."})}
    assert rec.condition == "base@paper" and rec.match == "paper"
