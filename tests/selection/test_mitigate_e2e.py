"""``select mitigate`` end to end (PROTOCOL.md 5): the filter with the authors' settings under ``--paper``, a
uniform draw, then the selecting model shown only the drawn function plus Finish; the stored selection is the
model's parsed answer. Against a scripted loopback server."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from tests.support import servers
from toolbias.cli import cli
from toolbias.selection import SelectionStore, builtin_benchmark, toolbench
from toolbias.selection.selector import candidates

CLUSTER = "translation"
NAMES = [toolbench.api_of(t).function_name for t in builtin_benchmark().cluster(CLUSTER).tools]
FILTER_MARK = "You are an API subset selector."


@pytest.fixture(autouse=True)
def _no_key(monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def scripted(answer_with: str):
    """A server: filter requests keep every candidate; selection requests answer ``Action: <name>`` where the
    name is the first shown function (``drawn``) or always the cluster's first tool (``fixed``)."""
    def respond(body: dict) -> servers.Reply:
        text = body["messages"][-1]["content"]
        if FILTER_MARK in text:
            return servers.Reply.text(json.dumps(candidates([{"role": "user", "content": text}], [])))
        shown = candidates([{"role": "user", "content": text}], [])
        name = shown[0] if answer_with == "drawn" else NAMES[0]
        return servers.Reply.text(f"Thought: use it.\nAction: {name}\nAction Input: {{}}")
    return respond


def mitigate(tmp_path, srv, *extra: str) -> dict:
    result = CliRunner().invoke(cli, [
        "select", "mitigate", "--filter-model", "openai:fake-model", "--model", "openai:fake-model", "--paper",
        "--backbone", "text", "--base-url", srv.base_url, "--store", str(tmp_path / "m.db"), "--benchmark",
        "builtin", "--clusters", CLUSTER, "--queries", "4", "--runs", "1", "--json", *extra],
        catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "filter backbone: text" in result.stderr
    return json.loads(result.stdout)


def test_the_selecting_model_sees_only_the_drawn_function_and_finish(tmp_path) -> None:
    with servers.FakeOpenAIServer(responder=scripted("drawn")) as srv:
        out = mitigate(tmp_path, srv)
        bodies = [b for b in srv.requests]
    filters = [b for b in bodies if FILTER_MARK in b["messages"][-1]["content"]]
    picks = [b for b in bodies if FILTER_MARK not in b["messages"][-1]["content"]]
    assert len(filters) == 20 and len(picks) == 20 + 20          # before (5 shown) + after (1 shown) per trial
    for b in filters:                                            # the authors' filter settings
        assert b["temperature"] == 0.5 and b["top_p"] == 1.0 and b["max_tokens"] == 512
        assert b["stop"] == ["End Action"] and "seed" not in b
    after = [b for b in picks if len(candidates(b["messages"], [])) == 1]
    assert len(after) == 20
    for b in after:
        prompt = b["messages"][-1]["content"]
        functions = re.findall(r"'name': '([^']+)'", prompt.split(toolbench.FUNCTIONS_INTRO.strip("\n"), 1)[1])
        assert functions[-1] == "Finish" and len(functions) == 2 and functions[0] in NAMES
        assert toolbench.BLURBS_HEAD not in prompt
        assert "use only subfunctions' names.\n\nSpecifically, you have access" in prompt
    figures = out["figures"]
    assert figures["coverage"]["took_draw"]["estimate"] == 1.0
    assert figures["coverage"]["task"]["estimate"] == 1.0
    assert figures["filter"]["micro_recall"]["estimate"] == 1.0  # every candidate kept
    for m in ("delta_api", "delta_pos", "delta_model"):
        iv = figures["delta"][m]["after"]
        assert iv["low"] <= iv["estimate"] <= iv["high"]
    before = figures["delta"]["delta_pos"]["before"]
    assert before["estimate"] == pytest.approx(0.8)              # before: always the first listed


def test_the_stored_selection_is_the_models_answer_not_the_draw(tmp_path) -> None:
    with servers.FakeOpenAIServer(responder=scripted("fixed")) as srv:
        out = mitigate(tmp_path, srv)
    with SelectionStore(tmp_path / "m.db") as st:
        recs = st.records(condition="mitigated-e2e")
    assert len(recs) == 20 and all(r.ok for r in recs)
    assert {r.api for r in recs} == {0}                          # the model's answer, whatever was drawn
    drawn = {r.extra["drawn"] for r in recs}
    assert len(drawn) > 1                                        # the draws differ
    assert all(r.extra["took_draw"] == (r.extra["drawn"] == 0) for r in recs)
    assert out["after"]["delta_api"] == pytest.approx(0.8)       # one tool only, end to end


def test_pick_draw_records_the_draw(tmp_path) -> None:
    with servers.FakeOpenAIServer(responder=scripted("fixed")) as srv:
        mitigate(tmp_path, srv, "--pick", "draw")
        picks = [b for b in srv.requests if FILTER_MARK not in b["messages"][-1]["content"]]
    assert len(picks) == 20                                      # the before run only
    with SelectionStore(tmp_path / "m.db") as st:
        recs = st.records(condition="mitigated")
    assert len(recs) == 20 and len({r.api for r in recs}) > 1
    assert all(r.api == r.order[r.position] for r in recs)


def test_filter_eval_paper_sends_the_authors_filter_settings(tmp_path) -> None:
    with servers.FakeOpenAIServer(models=("Qwen/Qwen3-14B",), responder=scripted("drawn")) as srv:
        result = CliRunner().invoke(cli, [
            "select", "filter-eval", "--filter-model", "openai:Qwen/Qwen3-14B", "--paper", "--base-url",
            srv.base_url, "--per-cluster", "1", "--limit", "4", "--store", str(tmp_path / "f.db"), "--json"],
            catch_exceptions=False)
        bodies = list(srv.requests)
    assert result.exit_code == 0, result.output
    assert "filter backbone: qwen" in result.stderr
    assert len(bodies) == 4
    for b in bodies:
        assert FILTER_MARK in b["messages"][-1]["content"]
        assert b["temperature"] == 0.5 and b["max_tokens"] == 512 and b["top_p"] == 1.0 and "seed" not in b
        assert b["stop"] == ["End Action"] and b["chat_template_kwargs"] == {"enable_thinking": False}
    scores = json.loads(result.stdout)
    assert scores["n"] == 4 and scores["micro_recall"] == 1.0       # the server keeps every candidate
