"""``toolbias reproduce selection``: the paper's protocol on a new model, its row among the paper's seven, the
optional rows, JSON and HTML; the paper's values as data with their sources."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tests.support import servers
from tests.support.cli import run_cli
from tests.support.selection import SHARED, SHARED_REASON
from toolbias.cli import cli
from toolbias.selection.reproduce import paper_values
from toolbias.selection.selector import candidates


@pytest.fixture(autouse=True)
def _no_key(monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("TOOLBIAS_BIASBUSTERS", raising=False)


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["reproduce", "selection", *args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_paper_values_hold_the_papers_table_with_sources() -> None:
    values = paper_values()
    rows = {r["model"]: r for r in values["main_table"]["rows"]}
    assert len(rows) == 7
    assert (rows["Qwen3 235B"]["delta_api"], rows["Qwen3 235B"]["delta_pos"], rows["Qwen3 235B"]["delta_model"]) \
        == (0.330, 0.168, 0.249)
    assert rows["GPT-4.1 mini"]["delta_model"] == 0.377
    for name, section in values.items():
        if isinstance(section, dict):
            assert section["source"], name                   # every section says where it comes from


def test_paper_values_equal_the_replayed_records() -> None:
    """The published main table equals the authors' records replayed (PROTOCOL.md 1.9)."""
    if not (SHARED / "selection_stats.json").is_file():
        pytest.skip(SHARED_REASON)
    from toolbias.selection.paper_stats import load_selection_stats, main_table

    replayed = main_table(load_selection_stats(SHARED / "selection_stats.json"))
    for row in paper_values()["main_table"]["rows"]:
        rep = replayed[row["model"]]
        assert round(rep.delta_api, 3) == row["delta_api"] and round(rep.delta_pos, 3) == row["delta_pos"]
        assert round(rep.delta_model, 3) == row["delta_model"]


def test_an_offline_chooser_is_placed_among_the_papers_models(tmp_path) -> None:
    code, out, err = invoke("--model", "chooser:first", "--benchmark", "builtin", "--sample", "2", "--runs", "1",
                            "--store", str(tmp_path / "r.db"), "--json")
    assert code == 0, err
    result = json.loads(out)
    assert "backbone: text" in err
    mine = [r for r in result["main_table"] if r["source"] == "this run"]
    assert len(mine) == 1 and len(result["main_table"]) == 8
    assert mine[0]["delta_pos"] == pytest.approx(0.8)              # always the first listed
    assert mine[0]["delta_api"] == pytest.approx(0.0)              # every tool first once per query
    iv = mine[0]["intervals"]["delta_pos"]
    assert iv["low"] == pytest.approx(0.8) and iv["high"] == pytest.approx(0.8) and iv["n"] == 24
    order = [r["delta_model"] for r in result["main_table"]]
    assert order == sorted(order)                                   # sorted as the paper's table
    assert result["settings"]["temperature"] == 0.5 and result["settings"]["max_tokens"] == 512


def test_without_a_benchmark_it_says_where_to_find_the_papers(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)                                    # no ../shared/data/biasbusters from here
    code, out, err = run_cli(capsys, "reproduce", "selection", "--model", "chooser:first", "--store",
                             str(tmp_path / "r.db"))
    assert code == 2 and "biasbusters:DIR" in err and "TOOLBIAS_BIASBUSTERS" in err and "Traceback" not in err


@pytest.mark.skipif(not (SHARED / "duplicate_api_clusters.json").is_file(), reason=SHARED_REASON)
def test_a_served_model_on_the_papers_clusters_with_every_optional_row(tmp_path) -> None:
    def react(body: dict) -> servers.Reply:
        names = candidates([{"role": "user", "content": body["messages"][-1]["content"]}], [])
        return servers.Reply.text(f"Thought: x\nAction: {names[-1]}\nAction Input: {{}}")

    page = tmp_path / "r.html"
    with servers.FakeOpenAIServer(models=("evil<b>model",), responder=react) as srv:
        code, out, err = invoke("--model", "openai:evil<b>model", "--base-url", srv.base_url, "--backbone", "text",
                                "--benchmark", f"biasbusters:{SHARED}", "--sample", "1", "--runs", "1",
                                "--temperatures", "0", "--prompts", "similar", "--perturbations", "shuffled_names",
                                "--store", str(tmp_path / "r.db"), "--json", "--html", str(page))
        bodies = list(srv.requests)
    assert code == 0, err
    result = json.loads(out)
    assert bodies[0]["stop"] == ["End Action"] and bodies[0]["max_tokens"] == 512
    assert {b["temperature"] for b in bodies} == {0.5, 0.0}
    mine = next(r for r in result["main_table"] if r["source"] == "this run")
    assert mine["delta_pos"] == pytest.approx(0.8)                 # always the last listed
    assert mine["n_runs"] == 1 and mine["intervals"]["delta_api"]["n"] == 10
    temp = result["temperature"]["rows"][0]
    assert temp["temperature"] == 0.0 and temp["paper_delta_model"] == 0.350
    prompt = result["prompt"]["rows"][0]
    assert prompt["prompt"] == "similar" and prompt["paper"]["delta_model"] == 0.358
    pert = result["perturbation"]["rows"][0]
    assert pert["condition"] == "shuffled_names[paper]" and pert["paper_tv_vs_base"]["Gemini 2.5 Flash"] == 0.196
    assert any("function calling" in n for n in result["notes"])
    text = page.read_text(encoding="utf-8")
    assert "evil&lt;b&gt;model" in text and "evil<b>model" not in text
    assert "Claude 3.5 Sonnet" in text and "Shuff. Name" in text
