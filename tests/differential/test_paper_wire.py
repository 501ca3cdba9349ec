"""Differential: what the artifact reads from the wire, against ``toolbias run --protocol paper``.

Two things a server may do that the scripted differential (``test_paper_protocol.py``) does not:

* **calls without ids** (``""`` or null: some vLLM tool parsers omit them): the artifact names
  them ``call_<turn>_<i>`` (``eval/run_agentic.py``), and those names reach the next request's
  assistant and tool messages; toolbias names them the same under the paper's protocol.
* **calls written as text** (a server without a tool parser: Hermes ``<tool_call>`` blocks,
  fenced or bare JSON in the content): the artifact reads only the API's ``tool_calls``, so such
  an answer has no call and ends the episode; toolbias's providers recover these calls, and under
  the paper's protocol the episode loop leaves them unread (``ignored_text_calls``).

Both harnesses play the same agent on one loopback server (:class:`FakeOpenAIServer`); every
request body and every episode's outcome are compared.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run_cli
from tests.support.paper_runners import DATA, agentic_runner, runner_skip_reason
from tests.support.servers import FakeOpenAIServer, Reply
from toolbias.providers.base import ModelOutput, ToolCall
from toolbias.store import Store
from toolbias.study.paper_episode import paper_turn

pytestmark = pytest.mark.skipif(runner_skip_reason() is not None, reason=runner_skip_reason() or "")

MODEL = "fake-model"
PERSONAS = ("empty_ids", "null_ids", "mixed_ids", "hermes_text", "fenced_text", "bare_text")


def _sample() -> list[dict[str, Any]]:
    """One query per persona, each with two or more gold calls (first in file order)."""
    if runner_skip_reason() is not None:
        return []
    out = []
    for line in (DATA / "queries.sample.jsonl").read_text(encoding="utf-8").splitlines():
        q = json.loads(line) if line.strip() else None
        if q and len(q["gold_calls"]) >= 2 and q["domain"] not in {p["domain"] for p in out}:
            out.append(q)
        if len(out) == len(PERSONAS):
            break
    return out


SAMPLE = _sample()
PERSONA = {q["query"]: p for q, p in zip(SAMPLE, PERSONAS, strict=False)}


def _call(name: str, args: dict[str, Any], cid: Any) -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def agent(body: dict[str, Any]) -> Reply:
    """The next turn, from the request alone: the gold calls in the persona's form, then "Done."."""
    messages = body["messages"]
    kind = PERSONA[messages[1]["content"]]
    q = next(q for q in SAMPLE if q["query"] == messages[1]["content"])
    gold = [(g["name"], dict(g.get("arguments") or {})) for g in q["gold_calls"]]
    turn = sum(1 for m in messages if m["role"] == "assistant")
    if kind.endswith("_text"):
        one = json.dumps({"name": gold[0][0], "arguments": gold[0][1]})
        text = {"hermes_text": f"<tool_call>\n{one}\n</tool_call>", "fenced_text": f"Sure.\n```json\n{one}\n```",
                "bare_text": one}[kind]
        return Reply.text(text)
    if kind == "null_ids":  # one call a turn, each without an id
        return Reply(tool_calls=[_call(*gold[turn], None)]) if turn < len(gold) else Reply.text("Done.")
    if turn:
        return Reply.text("Done.")
    ids = ["" for _ in gold] if kind == "empty_ids" else [f"srv_{i}" if i % 2 else "" for i in range(len(gold))]
    return Reply(tool_calls=[_call(n, a, cid) for (n, a), cid in zip(gold, ids, strict=True)])


def _by_turn(requests: list[dict[str, Any]]) -> dict[tuple[str, int], dict[str, Any]]:
    return {(b["messages"][1]["content"], len(b["messages"])): b for b in requests}


@pytest.mark.parametrize("control", ["strict", "lenient"])
def test_ids_and_text_calls_read_as_the_artifact_reads_them(control: str, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    queries = tmp_path / "queries.jsonl"
    queries.write_text("".join(json.dumps(q) + "\n" for q in SAMPLE), encoding="utf-8")
    with FakeOpenAIServer(models=(MODEL,), responder=agent) as server:
        with agentic_runner({"SCHEMA_VARIANT": "5"}, control, server.base_url, queries, MODEL) as ra:
            theirs = {q["id"]: ra.run_episode(q) for q in SAMPLE}
        their_requests = _by_turn(list(server.requests))
        server.requests.clear()
        code, out, err = run_cli(capsys, "run", "--model", f"openai:{MODEL}", "--base-url", server.base_url,
                                 "--catalog", f"toolschemaspace:{DATA}", "--task-file", str(queries),
                                 "--variants", "native", "--control", control, "--protocol", "paper",
                                 "--store", str(tmp_path / "s.db"), "--concurrency", "2")
        assert code == 0, out + err
        our_requests = _by_turn(list(server.requests))
    with Store(tmp_path / "s.db") as st:
        ours = {r.task_id: {"success": bool(r.success), **r.record} for r in st.rows()}

    assert all(r["err"] is None for r in theirs.values())
    assert our_requests == their_requests
    for tid, t in theirs.items():
        o = ours[tid]
        assert (int(o["success"]), [[a["tool"], a["arguments"]] for a in o["executed"]], o["turns"],
                o["paper"]["n_calls"], o["paper"]["n_rejected"]) == \
            (t["exact"], t["actions"], t["turns"], t["n_calls"], t["n_rejected"]), tid

    # not vacuous: the ids the artifact made up reached the requests, the text calls were not run
    sent = [c["id"] for b in their_requests.values() for m in b["messages"] for c in m.get("tool_calls") or []]
    assert {"call_1_0", "call_1_1", "call_2_0", "srv_1"} <= set(sent)
    by_persona = {PERSONA[q["query"]]: q["id"] for q in SAMPLE}
    for kind in ("hermes_text", "fenced_text", "bare_text"):
        o, t = ours[by_persona[kind]], theirs[by_persona[kind]]
        assert (t["turns"], t["n_calls"], t["exact"]) == (1, 0, 0)
        assert o["paper"]["ignored_text_calls"] == 1 and o["recovered_calls"] == 0
        assert o["messages"][-1]["content"] == agent({"messages": o["messages"][:2]}).content  # the text as written
    assert theirs[by_persona["empty_ids"]]["exact"] == 1 and theirs[by_persona["null_ids"]]["exact"] == 1


def test_paper_turn_names_calls_without_ids_and_leaves_text_calls_unread() -> None:
    given, made = ToolCall("srv", "f", {}, "{}"), ToolCall.from_wire("call_1", "g", "{}", generated_id=True)
    calls, text = paper_turn(ModelOutput(content="hi", tool_calls=(given, made)), 3)
    assert [c.id for c in calls] == ["srv", "call_3_1"] and text == "hi"
    assert not any(c.generated_id for c in calls)
    recovered = ModelOutput(content=None, tool_calls=(made,), recovered=True, raw_content="<tool_call>{}</tool_call>")
    assert paper_turn(recovered, 1) == ((), "<tool_call>{}</tool_call>")
    # an output cached before raw_content existed: the text left over
    assert paper_turn(ModelOutput(content="left", tool_calls=(made,), recovered=True), 1) == ((), "left")
    assert ModelOutput.from_dict(recovered.to_dict()) == recovered
    assert "generated_id" not in given.to_dict() and ToolCall(**made.to_dict()) == made
