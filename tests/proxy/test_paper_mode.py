"""``toolbias proxy --protocol paper`` on its own: the ``nofeedback`` protocol (which the artifact's
README describes and its code lacks), the per-turn budgets, the operator names, the tool form.
The artifact's ``feedback`` protocol is checked against its own code in
``tests/differential/test_paper_proxy.py``."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from toolbias.proxy import ProxyConfig, ProxyServer
from toolbias.proxy.paper import NOFEEDBACK_ROUNDS, UNABLE
from toolbias.proxy.paper_tools import UnknownOperator, canonical, operator_of, prose_enum

pytest.importorskip("uvicorn", reason="toolbias proxy needs uvicorn (pip install 'toolbias[proxy]')")

from tests.support.cli import run_cli  # noqa: E402
from tests.support.servers import FakeOpenAIServer, Reply  # noqa: E402

TOOLS = [
    {"type": "function", "function": {"name": "lights_set", "description": "Set the lights.", "parameters": {
        "type": "object", "properties": {"room": {"type": "string"}, "level": {"type": "integer"}},
        "required": ["room", "level"]}}},
    {"type": "function", "function": {"name": "lights_off", "description": "All lights off.",
                                      "parameters": {"type": "object", "properties": {}, "required": []}}},
]
ASK = [{"role": "system", "content": "You run a house."}, {"role": "user", "content": "Dim the kitchen."}]


@pytest.fixture
def upstream() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


def _proxy(upstream: FakeOpenAIServer, variant: str, feedback: str, **options: Any) -> ProxyServer:
    return ProxyServer(ProxyConfig(upstream=(upstream.base_url,), variant=variant, protocol="paper",
                                   paper_feedback=feedback, **options)).start()


def _chat(server: ProxyServer, messages: list[dict[str, Any]]) -> dict[str, Any]:
    r = httpx.post(server.base_url + "/chat/completions", timeout=30,
                   json={"model": "fake-model", "messages": messages, "tools": TOOLS})
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


def test_nofeedback_drops_a_refused_call_without_an_error(upstream: FakeOpenAIServer) -> None:
    upstream.queue(Reply.calls(("no_such_tool", {}), ("execute", {"operation": "lights_off"}), content="ok"),
                   Reply.text("done"))
    server = _proxy(upstream, "fully_merged", "nofeedback")
    try:
        first = _chat(server, ASK)
        msg = first["choices"][0]["message"]
        assert [c["function"]["name"] for c in msg["tool_calls"]] == ["lights_off"]
        assert first["proxy"] == {"variant": "merge", "protocol": "nofeedback"}
        assert len(upstream.requests) == 1  # no retry
        _chat(server, [*ASK, msg, {"role": "tool", "tool_call_id": msg["tool_calls"][0]["id"], "content": "off"}])
    finally:
        server.stop()
    seen = upstream.requests[1]["messages"]
    said = [m for m in seen if m["role"] == "assistant"]
    # the model's history keeps its own (variant) call, without the dropped one and without an error
    assert said == [{"role": "assistant", "content": "ok", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "execute", "arguments": '{"operation": "lights_off"}'}}]}]
    assert [m["content"] for m in seen if m["role"] == "tool"] == ["off"]
    assert "error" not in json.dumps(seen)


def test_nofeedback_ends_a_turn_without_a_valid_call_as_text(upstream: FakeOpenAIServer) -> None:
    upstream.queue(Reply.calls(("no_such_tool", {}), ("execute", '{"bad'), content="I will try."))
    server = _proxy(upstream, "merge", "nofeedback")
    try:
        out = _chat(server, ASK)
    finally:
        server.stop()
    assert out["choices"][0]["message"] == {"role": "assistant", "content": "I will try."}
    assert out["choices"][0]["finish_reason"] == "stop"
    assert len(upstream.requests) == 1


@pytest.mark.parametrize(("feedback", "rounds"), [("nofeedback", NOFEEDBACK_ROUNDS), ("feedback", 16)])
def test_protocol_steps_are_answered_within_the_turns_budget(upstream: FakeOpenAIServer, feedback: str,
                                                             rounds: int) -> None:
    upstream.default = Reply.calls(("begin_lights_set", {}))  # a transaction begun forever
    server = _proxy(upstream, "transaction", feedback)
    try:
        out = _chat(server, ASK)
    finally:
        server.stop()
    assert len(upstream.requests) == rounds
    assert out["choices"][0]["message"] == {"role": "assistant", "content": UNABLE}
    last = upstream.requests[-1]["messages"]
    assert [json.loads(m["content"]) for m in last if m["role"] == "tool"][-1] == {"txn_id": f"txn_{rounds - 1}"}
    assert last[0]["content"].startswith("You run a house.\n\nIMPORTANT: You are given")
    assert "call the begin_* function first" in last[0]["content"]


def test_operators_by_their_names_and_the_paper_variants() -> None:
    assert operator_of("merge") == operator_of("fully_merged") == operator_of("paper.fully_merged") == "merge"
    assert operator_of("schema_discovery") == "disclose"
    with pytest.raises(UnknownOperator, match="fully_merged"):
        operator_of("reference_resolution")


@pytest.mark.parametrize(("feedback", "condition"), [("feedback", "base@paper"), ("nofeedback", "nofeedback@paper")])
def test_stored_live_rows_name_the_protocol(upstream: FakeOpenAIServer, tmp_path: Path, feedback: str,
                                           condition: str) -> None:
    db = tmp_path / "live.db"
    upstream.queue(Reply.calls(("no_such_tool", {}), ("execute", {"operation": "lights_off"})))
    server = ProxyServer(ProxyConfig(upstream=(upstream.base_url,), variant="fully_merged", protocol="paper",
                                     paper_feedback=feedback), store=str(db)).start()
    try:
        _chat(server, ASK)
    finally:
        server.stop()
    with sqlite3.connect(db) as c:
        rows = c.execute("SELECT study, variant, condition, n_executed, n_rejections, record FROM episodes "
                         "WHERE kind='live'").fetchall()
    assert [r[:5] for r in rows] == [("proxy|paper:merge", "paper:merge", condition, 1, 1)]
    calls = json.loads(rows[0][5])["live"]["calls"]
    assert [c["outcome"] for c in calls] == ["rejection" if feedback == "feedback" else "dropped", "native"]
    assert calls[1]["native"] == ["lights_off", {}]


def test_canonical_form_lifts_a_prose_value_set() -> None:
    assert prose_enum({"type": "string", "description": "Mode (eco/sport)."}) == ["eco", "sport"]
    assert prose_enum({"type": "string", "description": "Options: low, high or max."}) == ["low", "high", "max"]
    assert prose_enum({"type": "string", "description": "A colour, e.g. 'red' or 'blue'."}) is None
    tool = canonical({"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"x": {"anyOf": [{"$ref": "#/$defs/X"}, {"type": "null"}]}},
        "$defs": {"X": {"type": "string", "enum": ["a", "b"]}}}}})
    assert tool == {"name": "f", "description": "", "parameters": {
        "type": "object", "properties": {"x": {"type": "string", "enum": ["a", "b"]}}, "required": []}}


def test_the_command_refuses_a_variant_the_artifacts_proxy_lacks(capsys: pytest.CaptureFixture[str],
                                                                 upstream: FakeOpenAIServer) -> None:
    code, _, err = run_cli(capsys, "proxy", "--protocol", "paper", "--variant", "reference_resolution",
                           "--upstream", upstream.base_url, "--port", "0")
    assert code != 0
    assert "no operator for variant 'reference_resolution'" in err and "Traceback" not in err


def test_the_command_reads_classes_and_cuts_files(capsys: pytest.CaptureFixture[str], upstream: FakeOpenAIServer,
                                                  tmp_path: Path) -> None:
    bad = tmp_path / "classes.json"
    bad.write_text("[1, 2]")
    code, _, err = run_cli(capsys, "proxy", "--protocol", "paper", "--variant", "merge_app", "--classes", str(bad),
                           "--upstream", upstream.base_url, "--port", "0")
    assert code != 0 and "must hold a JSON object" in err


def test_classes_and_cuts_shape_the_variant() -> None:
    from toolbias.proxy.paper_tools import Settings, build_variant

    settings = Settings({"lights_set": "home", "lights_off": "home"}, {"lights_set.level": 50})
    assert [t["function"]["name"] for t in build_variant("merge_app", TOOLS, settings).tools] == ["home_execute"]
    assert [t["function"]["name"] for t in build_variant("pred", TOOLS, settings).tools] == [
        "lights_set__level_lt_50", "lights_set__level_ge_50", "lights_off"]
