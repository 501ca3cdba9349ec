"""``select run --paper --backbone B``: each backbone's request body, as a loopback server receives it, against
PROTOCOL.md section 1's literal values (1.3 text prompt, 1.4 function calling, 1.6 per-model settings)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tests.support import servers
from tests.support.selection import SHARED, SHARED_REASON
from toolbias.cli import cli
from toolbias.selection import backbones
from toolbias.selection.selector import candidates

SYSTEM_START = "System: You are AutoGPT, you can use many tools(functions) to do the following task."
COMMON = ["--benchmark", "builtin", "--clusters", "translation", "--queries", "1", "--runs", "1", "--json"]


def run(tmp_path, srv, *args: str) -> tuple[dict, str]:
    result = CliRunner().invoke(cli, ["select", "run", "--base-url", srv.base_url, "--store",
                                      str(tmp_path / "s.db"), "--paper", *args, *COMMON], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), result.stderr


def react(body: dict) -> servers.Reply:
    text = body.get("prompt") or body["messages"][-1]["content"]
    names = candidates([{"role": "user", "content": text}], [])
    return servers.Reply.text(f"Thought: the second.\nAction: {names[1]}\nAction Input: {{}}")


@pytest.fixture(autouse=True)
def _no_key(monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def test_text_backbone_sends_the_papers_text_settings(tmp_path) -> None:
    with servers.FakeOpenAIServer(responder=react) as srv:
        out, err = run(tmp_path, srv, "--model", "openai:fake-model", "--backbone", "text")
        body = srv.requests[0]
    assert "backbone: text (given)" in err
    assert body["messages"][0] == {"role": "system", "content": ""} and len(body["messages"]) == 2
    assert body["messages"][1]["content"].startswith(SYSTEM_START)
    assert body["messages"][1]["content"].endswith("Begin!\n\nAssistant:\n")
    assert body["stop"] == ["End Action"] and body["max_tokens"] == 512
    assert body["temperature"] == 0.5 and body["top_p"] == 1.0
    assert body["frequency_penalty"] == 0 and body["presence_penalty"] == 0
    for absent in ("seed", "tools", "functions", "tool_choice", "chat_template_kwargs"):
        assert absent not in body
    assert out["per_cluster"]["translation"]["pos_rates"][1] == 1.0   # the second listed, every rotation
    assert len(srv.requests) == 5                                      # one call per trial: no re-ask


def test_qwen_backbone_is_inferred_and_switches_thinking_off(tmp_path) -> None:
    with servers.FakeOpenAIServer(models=("Qwen/Qwen3-8B",), responder=react) as srv:
        _, err = run(tmp_path, srv, "--model", "openai:Qwen/Qwen3-8B")
        body = srv.requests[0]
    assert "backbone: qwen (inferred from 'openai:Qwen/Qwen3-8B'" in err
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert body["stop"] == ["End Action"] and body["max_tokens"] == 512
    assert body["temperature"] == 0.5 and body["top_p"] == 1.0 and "frequency_penalty" not in body
    assert body["messages"][0] == {"role": "system", "content": ""}


def test_claude_backbone_sends_one_user_message_and_its_stop(tmp_path) -> None:
    with servers.FakeOpenAIServer(models=("claude-3-5-sonnet-20240620",), responder=react) as srv:
        _, err = run(tmp_path, srv, "--model", "openai:claude-3-5-sonnet-20240620")
        body = srv.requests[0]
    assert "backbone: claude (inferred" in err
    assert [m["role"] for m in body["messages"]] == ["user"]
    assert body["messages"][0]["content"].startswith(SYSTEM_START)
    assert body["stop"] == ["\n\nHuman:"] and body["max_tokens"] == 512
    assert body["temperature"] == 0.5 and body["top_p"] == 1.0


def test_toolllama_backbone_sends_the_raw_string(tmp_path) -> None:
    with servers.FakeOpenAIServer(models=("ToolBench/ToolLLaMA-2-7b-v2",), responder=react) as srv:
        out, err = run(tmp_path, srv, "--model", "openai:ToolBench/ToolLLaMA-2-7b-v2")
        body = srv.requests[0]
    assert "backbone: toolllama (inferred" in err
    assert "messages" not in body and body["prompt"].startswith(SYSTEM_START)
    assert body["prompt"].endswith("\nAssistant:\n")
    assert body["stop"] == ["</s>"] and body["max_tokens"] == 512
    assert body["temperature"] == 0.5 and body["top_p"] == 1.0
    assert out["n_selections"] == 5


def _legacy_reply(text: str | None, call: str | None) -> dict:
    message: dict = {"role": "assistant", "content": text}
    if call:
        message["function_call"] = {"name": call, "arguments": "{}"}
    return {"id": "x", "object": "chat.completion", "model": "fake-model",
            "choices": [{"index": 0, "message": message, "finish_reason": "function_call" if call else "stop"}]}


def test_function_backbone_sends_legacy_functions_and_reasks(tmp_path) -> None:
    def responder(body: dict) -> dict:
        names = [f["name"] for f in body["functions"]]
        asked = sum(1 for m in body["messages"] if m["role"] == "assistant")
        return _legacy_reply("Let me think.", None) if asked < 2 else _legacy_reply(None, names[0])

    with servers.FakeOpenAIServer(responder=responder) as srv:
        out, err = run(tmp_path, srv, "--model", "openai:fake-model", "--backbone", "function",
                       "--functions-param", "functions")
        first = srv.requests[0]
        third = next(b for b in srv.requests if len(b["messages"]) > 3)   # trials run concurrently
    assert "backbone: function[functions] (given)" in err
    assert len(srv.requests) == 15                       # 5 trials x 3 calls: twice re-asked, then a call
    assert first["max_tokens"] == 1024 and "stop" not in first
    assert first["temperature"] == 0.5 and first["top_p"] == 1.0
    assert first["frequency_penalty"] == 0 and first["presence_penalty"] == 0
    assert "tools" not in first and "function_call" not in first and "tool_choice" not in first
    fns = first["functions"]
    assert len(fns) == 6 and fns[-1]["name"] == "Finish" and "optional" in fns[0]["parameters"]
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert first["messages"][1]["content"].startswith("\n") and first["messages"][1]["content"].endswith("Begin!\n")
    assert [m["role"] for m in third["messages"]] == ["system", "user", "assistant", "assistant"]
    assert out["n_selections"] == 5 and out["per_cluster"]["translation"]["pos_rates"][0] == 1.0


def test_function_backbone_falls_back_to_tools_off_openai_with_a_note(tmp_path) -> None:
    with servers.FakeOpenAIServer(default=servers.Reply.text("no call")) as srv:
        out, err = run(tmp_path, srv, "--model", "openai:fake-model", "--backbone", "function", "--reask", "2")
        body = srv.requests[0]
    assert "only api.openai.com is known to honour it" in " ".join(err.split())
    assert "functions" not in body and len(body["tools"]) == 6 and "tool_choice" not in body
    assert len(srv.requests) == 10                       # --reask 2: two calls per trial, none made a call
    assert out.get("error") == "no parsed selections"


def test_overrides_are_sent_and_label_the_result_group(tmp_path) -> None:
    with servers.FakeOpenAIServer(responder=react) as srv:
        out, err = run(tmp_path, srv, "--model", "openai:fake-model", "--backbone", "qwen", "--stop", "none",
                       "--thinking", "on", "--max-tokens", "64", "--temperature", "0.7")
        body = srv.requests[0]
    assert "stop" not in body and body["chat_template_kwargs"] == {"enable_thinking": True}
    assert body["max_tokens"] == 64 and body["temperature"] == 0.7
    label = "qwen(enable_thinking=True,max_tokens=64,stop=[],temperature=0.7)"
    assert f"backbone: {label}" in err
    result = CliRunner().invoke(cli, ["select", "metrics", "--store", str(tmp_path / "s.db"), "--json"])
    assert json.loads(result.stdout)["group"]["backbone"] == label


def test_wire_options_need_paper_and_known_backbones() -> None:
    result = CliRunner().invoke(cli, ["select", "run", "--model", "chooser:first", "--stop", "x", "--json"])
    assert result.exit_code != 0 and "add --paper" in str(result.exception.fix)
    with pytest.raises(Exception, match="unknown backbone"):
        backbones.get_backbone("gpt-9")
    assert backbones.infer_backbone("openai:gpt-4.1-mini")[0] == "text"
    assert backbones.BACKBONES["function"].reask == 12 and backbones.BACKBONES["function"].max_tokens == 1024


# --- the K sweep as the authors ran it (PROTOCOL.md 6) ---

def _invoke(*args: str) -> dict:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.skipif(not SHARED.is_dir(), reason=SHARED_REASON)
def test_paper_k_sweep_uses_the_authors_cluster_and_ranking_normalised(tmp_path) -> None:
    # 7.4 (Sentiment by API-Ninjas) is second in the authors' ranking 7.1 > 7.4 > 7.2 > 7.3 > 7.5
    common = ["select", "run", "--model", "chooser:contains=sentiment_by_api_ninjas", "--paper", "--runs", "2",
              "--benchmark", f"biasbusters:{SHARED}", "--queries", "2", "--store", str(tmp_path / "k.db"), "--json"]
    b2w = _invoke(*common, "--k", "2,3", "--k-order", "b2w")
    w2b = _invoke(*common, "--k", "2,4", "--k-order", "w2b")
    assert all("[k=" in g and "biasbusters" in g for g in b2w["groups"])
    assert {c for g in b2w["groups"].values() for c in g["per_cluster"]} == {"7"}   # cluster 7 only
    rows = {(r["order"], r["k"]): r for r in b2w["k_sweep"] + w2b["k_sweep"]}
    assert rows[("b2w", 2)]["delta_api"] == pytest.approx(0.5) and rows[("b2w", 2)]["max"] == pytest.approx(0.5)
    assert rows[("b2w", 2)]["delta_api_norm"] == pytest.approx(1.0)       # δ / (1 - 1/K)
    assert rows[("b2w", 3)]["delta_api_norm"] == pytest.approx(1.0) and rows[("b2w", 3)]["n_runs"] == 2
    # the worst two (7.5, 7.3) lack 7.4: the chooser falls back to the first listed (pure position bias)
    assert rows[("w2b", 2)]["delta_api"] == pytest.approx(0.0) and rows[("w2b", 2)]["delta_pos_norm"] == 1.0
    assert rows[("w2b", 4)]["delta_api"] == pytest.approx(0.75)            # 7.5, 7.3, 7.2, 7.4
    assert rows[("w2b", 4)]["delta_api_norm"] == pytest.approx(1.0) and rows[("w2b", 4)]["delta_api_norm_std"] == 0


def test_k_rank_names_its_base_run(tmp_path) -> None:
    db = str(tmp_path / "k.db")
    common = ["--queries", "2", "--clusters", "translation", "--store", db, "--json"]
    ranking = tmp_path / "rank.json"
    ranking.write_text(json.dumps({"translation": [0, 0, 0, 0, 1]}))       # the last canonical tool is best
    last = _invoke("select", "run", "--model", "chooser:first", "--k", "2", "--k-rank", f"file:{ranking}",
                   "--k-order", "b2w", *common)
    assert last["k_sweep"][0]["delta_pos_norm"] == pytest.approx(1.0)
    # another model's stored base run ranks this model's K tools: chooser:contains=_v2 made text_translation_v2
    # (canonical 1) the best, so the best two hold it and the favourite is picked every time
    _invoke("select", "run", "--model", "chooser:contains=_v2", *common)
    other = _invoke("select", "run", "--model", "chooser:contains=_v2", "--k", "2", "--k-order", "b2w", "--k-rank",
                    "model:chooser:contains=_v2", *common)
    assert other["k_sweep"][0]["delta_api_norm"] == pytest.approx(1.0)
    ranking.write_text(json.dumps({"translation": [5, 0, 4, 3, 2]}))       # text_translation_v2 worst
    worst = _invoke("select", "run", "--model", "chooser:contains=_v2", "--k", "2", "--k-order", "b2w", "--k-rank",
                    f"file:{ranking}", *common)
    assert worst["k_sweep"][0]["delta_api"] == pytest.approx(0.0)
    result = CliRunner().invoke(cli, ["select", "run", "--model", "chooser:last", "--k", "2", *common])
    assert result.exit_code != 0 and "base run" in str(result.exception)
    result = CliRunner().invoke(cli, ["select", "run", "--model", "chooser:last", "--k", "2", "--paper", *common])
    assert result.exit_code != 0 and "cluster 7" in str(result.exception)
    groups = _invoke("select", "metrics", "--store", db, "--json")["groups"]
    assert any("[k=2,b2w,by=chooser:contains=_v2]" in g for g in groups)
    assert sum("[k=2,b2w,by=file:rank.json@" in g for g in groups) == 2   # two rankings: two groups


def test_paper_runs_use_the_response_cache_keyed_by_the_backbones_wire_settings(tmp_path) -> None:
    cache = str(tmp_path / "c.db")
    with servers.FakeOpenAIServer(responder=react) as srv:
        run(tmp_path, srv, "--model", "openai:fake-model", "--backbone", "text", "--cache", cache)
        assert len(srv.requests) == 5
        tmp_other = tmp_path / "again"
        tmp_other.mkdir()
        run(tmp_other, srv, "--model", "openai:fake-model", "--backbone", "text", "--cache", cache)
        assert len(srv.requests) == 5                                 # answered from the cache
        tmp_stop = tmp_path / "stop"
        tmp_stop.mkdir()
        run(tmp_stop, srv, "--model", "openai:fake-model", "--backbone", "text", "--cache", cache, "--stop", "X")
        assert len(srv.requests) == 10 and srv.requests[-1]["stop"] == ["X"]   # another stop: asked again
