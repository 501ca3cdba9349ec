"""Differential with a real model: the embedded model behind ``python -m llama_cpp.server`` as the
upstream of both the artifact's ``eval/run_agentic.py`` and ``toolbias run --protocol paper``.

The same check as ``test_paper_protocol.py`` (every request body equal, every episode's outcome
equal), on a small sample (two queries of one domain, two variants, hard control) with the same
lowered limits on both sides (48 tokens a turn, 2 turns), greedy. Both harnesses reach the model
through a relay on loopback that records each request and answers a request it has already
forwarded with the model's answer to it, so equal requests get equal answers (llama.cpp's
answers to one prompt can differ in the last bits between a cold and a prefix-cached evaluation)
and the second harness costs no model time where it agrees.

The GGUF's own chat template has no tool parser: the model's calls come back as text, which the
artifact does not read (its episodes end after one turn with no call). Run twice: as served, and
through a relay that parses the text calls into ``tool_calls`` without ids, as a server-side tool
parser would, so the episodes go on to a second turn with the artifact's ``call_<turn>_<i>`` ids
in the request.

Skipped with the reason when llama-cpp-python (with its server extras), the embedded weights or
the artifact are absent.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run_cli
from tests.support.paper_runners import DATA, agentic_runner, runner_skip_reason
from tests.support.servers import FakeOpenAIServer, LlamaCppServer, llama_server_skip_reason
from toolbias.providers.textcalls import calls_in_text
from toolbias.store import Store

MODEL = "qwen-local"
MAX_TOKENS, MAX_TURNS = 48, 2
DOMAIN = "laundry"  # the smallest tool list: the shortest prompt
#: toolbias's variant -> how the artifact builds it (both render the same tool list)
VARIANTS = {"native": {"SCHEMA_VARIANT": "5"}, "strip_descriptions": {"SCHEMA_SPEC": "s_nodesc.json"}}


def _skip_reason() -> str | None:
    return runner_skip_reason() or llama_server_skip_reason()


pytestmark = [pytest.mark.slow, pytest.mark.skipif(_skip_reason() is not None, reason=_skip_reason() or "")]


def _sample() -> list[dict[str, Any]]:
    if _skip_reason() is not None:
        return []
    rows = (json.loads(line) for line in (DATA / "queries.sample.jsonl").read_text(encoding="utf-8").splitlines()
            if line.strip())
    return [q for q in rows if q["domain"] == DOMAIN][:2]


SAMPLE = _sample()


class Relay:
    """Between the harnesses and llama_cpp.server: records requests, answers a request seen
    before with the same answer, and (``parse``) turns text calls into id-less ``tool_calls``."""

    def __init__(self, llama: LlamaCppServer) -> None:
        self.llama = llama
        self.answers: dict[str, dict[str, Any]] = {}
        self.parse = False
        self.forwarded = 0

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        key = json.dumps(body, sort_keys=True)
        if key not in self.answers:
            req = urllib.request.Request(self.llama.base_url + "/chat/completions",
                                         data=json.dumps({**body, "model": self.llama.model}).encode(),
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=600) as r:  # noqa: S310 - loopback only
                out = json.load(r)
            out.update(id="chatcmpl-relay", created=0, model=MODEL)  # the server's own, per response
            self.answers[key] = out
            self.forwarded += 1
        out = json.loads(json.dumps(self.answers[key]))
        message = out["choices"][0]["message"]
        found = calls_in_text(message.get("content"), body.get("tools") or [], None) if self.parse else None
        if found is not None and found.calls and all(c.parse_error is None for c in found.calls):
            message.update(content=found.remaining or None, tool_calls=[
                {"id": "", "type": "function", "function": {"name": c.name, "arguments": c.raw_arguments}}
                for c in found.calls])
            out["choices"][0]["finish_reason"] = "tool_calls"
        return out


@pytest.fixture(scope="module")
def relay(llama_server: LlamaCppServer) -> Iterator[tuple[Relay, FakeOpenAIServer]]:
    r = Relay(llama_server)
    with FakeOpenAIServer(models=(MODEL,), responder=r) as server:
        yield r, server


def _by_turn(requests: list[dict[str, Any]]) -> dict[tuple[str, int], dict[str, Any]]:
    return {(b["messages"][1]["content"], len(b["messages"])): b for b in requests}


@pytest.mark.parametrize("parse", [False, True], ids=["as_served", "tool_parser"])
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_a_real_model_gets_the_same_requests_and_outcomes(variant: str, parse: bool,
                                                          relay: tuple[Relay, FakeOpenAIServer], tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    r, server = relay
    r.parse = parse
    queries = tmp_path / "queries.jsonl"
    queries.write_text("".join(json.dumps(q) + "\n" for q in SAMPLE), encoding="utf-8")
    env = {k: str(DATA / "specs" / v) if k == "SCHEMA_SPEC" else v for k, v in VARIANTS[variant].items()}
    server.requests.clear()
    with agentic_runner(env, "strict", server.base_url, queries, MODEL, max_tokens=MAX_TOKENS,
                        max_turns=MAX_TURNS) as ra:
        theirs = {q["id"]: ra.run_episode(q) for q in SAMPLE}
    their_requests = _by_turn(list(server.requests))
    server.requests.clear()
    code, out, err = run_cli(capsys, "run", "--model", f"openai:{MODEL}", "--base-url", server.base_url,
                             "--catalog", f"toolschemaspace:{DATA}", "--task-file", str(queries), "--variants",
                             variant, "--control", "strict", "--protocol", "paper", "--store", str(tmp_path / "s.db"),
                             "--concurrency", "1", "--max-tokens", str(MAX_TOKENS), "--turn-limit", str(MAX_TURNS))
    assert code == 0, out + err
    our_requests = _by_turn(list(server.requests))
    with Store(tmp_path / "s.db") as st:
        ours = {row.task_id: {"success": bool(row.success), **row.record} for row in st.rows()}

    assert all(t["err"] is None for t in theirs.values()), [t["err"] for t in theirs.values()]
    assert our_requests == their_requests
    assert all(b["max_tokens"] == MAX_TOKENS and b["temperature"] == 0.0 for b in our_requests.values())
    for tid, t in theirs.items():
        o = ours[tid]
        assert {"exact": int(o["success"]), "actions": [[a["tool"], a["arguments"]] for a in o["executed"]],
                "turns": o["turns"], "n_calls": o["paper"]["n_calls"], "n_rejected": o["paper"]["n_rejected"],
                "flags": o["paper"]["flags"], "argument_parse_errors": o["paper"]["argument_parse_errors"],
                "livelock": o["termination"] == "turn_limit"} == \
            {**{k: t[k] for k in ("exact", "actions", "turns", "n_calls", "n_rejected", "flags",
                                  "argument_parse_errors")}, "livelock": t["turns"] >= MAX_TURNS}, tid
    if parse:  # the model's calls were read: episodes went on, with the artifact's ids for them
        assert any(t["n_calls"] for t in theirs.values())
        sent = {c["id"] for b in their_requests.values() for m in b["messages"] for c in m.get("tool_calls") or []}
        assert sent and all(i.startswith("call_1_") for i in sent), sent
    else:  # as served the calls are text: no call, one turn, on both sides
        assert all((t["n_calls"], t["turns"]) == (0, 1) for t in theirs.values())
    print(f"{variant} {'tool_parser' if parse else 'as_served'}: {len(their_requests)} requests, "
          f"{r.forwarded} forwarded to the model so far, exact {[t['exact'] for t in theirs.values()]}")
