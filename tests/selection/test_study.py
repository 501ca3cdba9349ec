"""Selection studies end to end without a model (the chooser:RULE selector) and against a loopback
OpenAI-compatible server: the paper preset, result groups, sweeps, mitigation coverage."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tests.support.selection import SHARED, SHARED_REASON
from toolbias.cli import cli, main
from toolbias.selection.selector import candidates

needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason=SHARED_REASON)


def invoke(*args: str) -> dict:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_chooser_rules_drive_select_run(tmp_path) -> None:
    db = str(tmp_path / "s.db")
    common = ["--queries", "2", "--clusters", "translation,qr_code", "--store", db, "--json"]
    first = invoke("select", "run", "--model", "chooser:first", *common)
    assert first["delta_pos"] == pytest.approx(0.8) and first["delta_api"] == pytest.approx(0.0)
    assert first["n_unparsed"] == 0 and first["n_selections"] == 20
    text = invoke("select", "run", "--model", "chooser:last", "--presentation", "text", *common)
    assert text["delta_pos"] == pytest.approx(0.8)
    assert all(v["pos_rates"][-1] == 1.0 for v in text["per_cluster"].values())
    rand = invoke("select", "run", "--model", "chooser:random=7", "--runs", "2", *common)
    again = invoke("select", "run", "--model", "chooser:random=7", "--runs", "2", *common)
    assert rand["delta_api"] == again["delta_api"] and 0 < rand["delta_pos"] < 0.8
    assert rand["n_selections"] == 40


def test_episode_models_are_refused_clearly(tmp_path, capsys) -> None:
    for spec in ("oracle", "replay:x.jsonl", "scripted:x.json", "chooser:bogus"):
        with pytest.raises(SystemExit) as exc:
            main(["select", "run", "--model", spec, "--queries", "1", "--store", str(tmp_path / "s.db")])
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert "chooser:" in err and "Traceback" not in err


def test_settings_are_result_groups_never_pooled(tmp_path) -> None:
    db = str(tmp_path / "s.db")
    common = ["--model", "chooser:random=3", "--queries", "2", "--clusters", "translation,qr_code", "--store", db]
    sweep = invoke("select", "run", *common, "--temperatures", "0,1", "--json")
    assert len(sweep["groups"]) == 2
    invoke("select", "run", *common, "--tool-choice", "auto", "--temperature", "1", "--json")
    groups = invoke("select", "metrics", "--store", db, "--json")["groups"]
    keys = sorted((g["group"]["temperature"], g["group"]["tool_choice"]) for g in groups.values())
    assert keys == [(0.0, "required"), (1.0, "auto"), (1.0, "required")]
    assert all(g["n_selections"] == 20 for g in groups.values())
    one = invoke("select", "metrics", "--store", db, "--temperature", "1", "--tool-choice", "auto", "--json")
    assert one["group"]["tool_choice"] == "auto"
    # commands that need one group refuse a mixture instead of pooling it
    result = CliRunner().invoke(cli, ["select", "explain", "--store", db, "--similarity", "tfidf"])
    assert result.exit_code != 0 and "3 result groups" in str(result.exception)
    with pytest.raises(SystemExit):
        main(["select", "export", "--store", db, "-o", str(tmp_path / "x.jsonl")])


def test_mitigation_counts_every_trial(tmp_path) -> None:
    db = str(tmp_path / "s.db")
    common = ["--model", "chooser:first", "--queries", "2", "--clusters", "translation,qr_code", "--json"]
    # a filter that keeps nothing: the paper's handling lets the selecting model choose among all candidates
    paper = invoke("select", "mitigate", "--filter-model", "chooser:contains=zzz", *common, "--store", db)
    assert paper["coverage"]["coverage"] == 0.0 and paper["coverage"]["filter"] == {"empty": 20}
    assert paper["coverage"]["filter_quality"]["micro_recall"] == 0.0
    assert paper["after"]["n_selections"] == 20 and paper["after"]["delta_pos"] == pytest.approx(0.8)
    uniform = invoke("select", "mitigate", "--filter-model", "chooser:contains=zzz", "--on-empty", "uniform",
                     *common, "--store", str(tmp_path / "u.db"))
    assert uniform["after"]["n_selections"] == 20 and uniform["after"]["delta_pos"] < 0.8
    dropped = invoke("select", "mitigate", "--filter-model", "chooser:contains=zzz", "--on-empty", "drop", *common,
                     "--store", str(tmp_path / "d.db"))
    assert dropped["coverage"]["trials"] == 20 and dropped["after"] is None


@needs_shared
def test_paper_preset_against_a_loopback_server(tmp_path, monkeypatch) -> None:
    from tests.support import servers
    pytest.importorskip("openai")

    def responder(body):
        names = candidates(body["messages"], body.get("tools") or [])
        pick = next(n for n in names if "api_ninjas" in n)
        return servers.Reply.text(f"Thought: ninjas.\nAction: {pick}\nAction Input: {{}}")

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with servers.FakeOpenAIServer(responder=responder) as srv:
        db = str(tmp_path / "s.db")
        out = invoke("select", "run", "--model", "openai:fake-model", "--base-url", srv.base_url, "--paper",
                     "--benchmark", f"biasbusters:{SHARED}", "--clusters", "8", "--queries", "2", "--store", db,
                     "--json")
        body = srv.requests[0]
        assert body["messages"][0] == {"role": "system", "content": ""}
        assert body["messages"][1]["content"].startswith("System: You are AutoGPT")
        assert body["temperature"] == 0.5 and body["top_p"] == 1.0 and "tool_choice" not in body
        assert "seed" not in body and not body.get("tools")
        assert len(srv.requests) == 3 * 2 * 5 and out["n_runs"] == 3
        assert out["per_cluster"]["8"]["api_rates"][2] == 1.0  # Text Language by API-Ninjas
    exact = invoke("select", "metrics", "--store", db, "--json")
    assert exact["group"]["presentation"] == "toolbench" and exact["group"]["prompt"] == "base"
    assert exact["group"]["tool_choice"] is None and exact["group"]["temperature"] == 0.5
    paper = invoke("select", "metrics", "--store", db, "--parse", "paper", "--json")
    assert paper["rule"] == "paper" and paper["delta_api"] == pytest.approx(exact["delta_api"])


def test_k_and_order_sweeps(tmp_path) -> None:
    db = str(tmp_path / "s.db")
    common = ["--queries", "3", "--clusters", "translation", "--store", db, "--json"]
    # the chooser always takes the tool whose name contains "_v2" (text_translation_v2)
    base = invoke("select", "run", "--model", "chooser:contains=_v2", *common)
    assert base["delta_api"] == pytest.approx(0.8)
    b2w = invoke("select", "run", "--model", "chooser:contains=_v2", "--k", "2,3", "--k-order", "b2w", *common)
    w2b = invoke("select", "run", "--model", "chooser:contains=_v2", "--k", "2", "--k-order", "w2b", *common)
    assert set(b2w["groups"]) == {k for k in b2w["groups"] if "builtin[k=" in k} and len(b2w["groups"]) == 2
    for label, rep in b2w["groups"].items():
        k = 2 if "k=2" in label else 3
        assert rep["delta_api"] == pytest.approx(1 - 1 / k)    # the favourite is among the best K
    # the worst two never include the favourite: the chooser falls back to the first listed
    assert w2b["delta_api"] == pytest.approx(0.0) and w2b["delta_pos"] == pytest.approx(0.5)
    rand = invoke("select", "run", "--model", "chooser:first", "--order", "random", *common)
    cyclic = invoke("select", "run", "--model", "chooser:first", *common)
    assert rand["delta_pos"] == cyclic["delta_pos"] == pytest.approx(0.8)
    assert cyclic["delta_api"] == pytest.approx(0.0) and rand["delta_api"] > 0
    groups = invoke("select", "metrics", "--store", db, "--json")["groups"]
    assert any("builtin[random-order]" in g for g in groups) and any("builtin[k=2,w2b]" in g for g in groups)


@needs_shared
def test_paper_mitigation_sees_the_papers_candidates(tmp_path) -> None:
    bench = ["--benchmark", f"biasbusters:{SHARED}", "--clusters", "8", "--queries", "2", "--runs", "1"]
    out = invoke("select", "mitigate", "--paper", "--filter-model", "chooser:contains=api_ninjas", "--model",
                 "chooser:first", *bench, "--store", str(tmp_path / "m.db"), "--json")
    # the paper's filter prompt lists ToolBench names; the filter keeps the API-Ninjas tool only
    assert out["coverage"]["coverage"] == 1.0 and out["after"]["per_cluster"]["8"]["api_rates"][2] == 1.0
    quality = out["coverage"]["filter_quality"]
    assert quality["micro_precision"] == 1.0 and quality["micro_recall"] == pytest.approx(0.2)
    assert out["before"]["delta_pos"] == pytest.approx(0.8)
    from toolbias.selection.benchmark import load_benchmark
    from toolbias.selection.mitigate import paper_filter_messages, paper_filter_names

    tools = load_benchmark(f"biasbusters:{SHARED}").cluster("8").tools
    prompt = paper_filter_messages("q?", tools)[1]["content"]
    assert prompt.startswith("System: You are an API subset selector.\n\n Given the user's request")
    assert "return the list only.\n\nThese are the APIs: [{'name': 'languagedetection_for_what_s_language'" in prompt
    assert "'name': 'Finish'" not in prompt and prompt.endswith("User: \nq?\nBegin!\n\nAssistant:\n")
    assert paper_filter_names('Sure: ["a", "b"] and ["c"]') == ["a", "b"]
    assert paper_filter_names("nothing") == [] and paper_filter_names('["x"]') == ["x"]
