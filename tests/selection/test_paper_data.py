"""The paper's numbers recomputed from the authors' logged selections (PROTOCOL.md 1.9, 3, 6)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tests.support.selection import SHARED, SHARED_REASON
from toolbias.cli import cli
from toolbias.selection import paper_stats as ps

pytestmark = pytest.mark.skipif(not SHARED.is_dir(), reason=SHARED_REASON)


@pytest.fixture(scope="module")
def stats():
    return ps.load_selection_stats(SHARED)


def test_main_table(stats) -> None:
    expected = {"GPT-3.5-turbo": (0.320, 0.336, 0.328), "GPT-4.1 mini": (0.331, 0.423, 0.377),
                "Claude 3.5 Sonnet": (0.370, 0.325, 0.347), "Gemini 2.5 Flash": (0.365, 0.306, 0.335),
                "DeepSeek-V3.2-Exp": (0.249, 0.504, 0.377), "ToolLLaMA": (0.277, 0.391, 0.334),
                "Qwen3 235B": (0.330, 0.168, 0.249)}
    table = ps.main_table(stats)
    for model, values in expected.items():
        r = table[model]
        assert (round(r.delta_api, 3), round(r.delta_pos, 3), round(r.delta_model, 3)) == values, model
        assert r.n_runs == 3


def test_sweeps(stats) -> None:
    def dm(name: str) -> list[float]:
        return [p["delta_model"] for p in ps.sweep(stats, name)]

    assert dm("temperature") == pytest.approx([0.350, 0.341, 0.321, 0.285], abs=6e-4)
    assert dm("top_p") == pytest.approx([0.347, 0.341, 0.340], abs=6e-4)
    assert dm("model_size") == pytest.approx([0.431, 0.374, 0.363, 0.365, 0.290, 0.279], abs=6e-4)
    prompts = ps.sweep(stats, "system_prompt")
    assert [(round(p["delta_api"], 3), round(p["delta_pos"], 3), round(p["delta_model"], 3)) for p in prompts] == \
        [(0.359, 0.321, 0.340), (0.399, 0.317, 0.358), (0.370, 0.332, 0.351)]
    random_order = ps.sweep(stats, "order")[1]
    assert (round(random_order["delta_api"], 3), round(random_order["delta_pos"], 3)) == (0.352, 0.093)
    mitigated = ps.sweep(stats, "mitigation")[1]
    assert (round(mitigated["delta_api"], 3), round(mitigated["delta_pos"], 3)) == (0.108, 0.079)


def test_perturbation_figure(stats) -> None:
    expected = {"Rand. Name": (0.209, 0.175), "Shuff. Name": (0.196, 0.179), "Targ. Name": (0.162, 0.118),
                "Desc. + Param.": (0.450, 0.257), "Desc.": (0.350, 0.222), "Targ. Desc.": (0.419, 0.342),
                "Param.": (0.170, 0.111), "Swap. Desc.": (0.338, 0.283), "Full": (0.496, 0.421)}
    table = ps.perturbation_table(stats)
    for label, (gemini, gpt) in expected.items():
        assert round(table[label]["Gemini"].tv_to_base, 3) == gemini, label
        assert round(table[label]["GPT-4.1 mini"].tv_to_base, 3) == gpt, label
    assert round(table["AbO"]["Gemini"].tv_to_base, 3) == 0.559 and "GPT-4.1 mini" not in table["AbO"]
    assert len(table["Rand. Name"]["Gemini"].tv_to_base_runs) == 3


def test_k_sweep_values() -> None:
    raw = json.loads((SHARED / "tv_results_vary_k.json").read_text())
    ks = ps.k_sweep(raw)
    runs = raw["b2w"]["2"]
    api = [r["api_tv"] / 0.5 * 100 for r in runs.values()]
    assert ks["b2w"][2]["api"] == pytest.approx(sum(api) / 3)
    assert ks["b2w"][2]["runs"] == 3
    # the random K = 5 point is copied to both ranked orders
    assert ks["b2w"][5] == ks["w2b"][5] == ks["random"][5]
    assert sorted(ks["random"]) == [2, 3, 4, 5]


def test_paper_command(tmp_path) -> None:
    result = CliRunner().invoke(cli, ["select", "paper", "--data", str(SHARED), "--figures", str(tmp_path),
                                      "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert round(out["main_table"]["GPT-4.1 mini"]["delta_model"], 3) == 0.377
    assert round(out["perturbations"]["Full"]["Gemini"]["tv_to_base"], 3) == 0.496
    assert out["agreement"]["n_tools"] == 50 and len(out["agreement"]["models"]) == 7
    names = {p.name for p in tmp_path.iterdir()}
    assert {"main_table.png", "sweep_temperature.png", "k_sweep_api.png", "model_correlation.png"} <= names
    assert (tmp_path / "model_correlation.png").read_bytes().startswith(b"\x89PNG")


def test_feature_regression_reproduces_the_papers_r2() -> None:
    from toolbias.selection import paper_features as pf

    expected = {"ChatGPT 3.5": 0.222, "ChatGPT 4.1": 0.143, "Gemini": 0.120, "DeepSeek": 0.182, "Qwen": 0.226,
                "ToolLLaMA": 0.387}
    centred = pf.explain_table(SHARED / "final_features_subtract_mean.json", forest=False)
    assert {m: round(e.r2, 3) for m, e in centred.items()} == expected
    assert all(e.n == 43 for e in centred.values())
    assert float(f"{centred['ChatGPT 3.5'].coefficients['avg_similarity_tool_desc']:.3g}") == 2.67
    assert float(f"{centred['ToolLLaMA'].coefficients['age_days']:.3g}") == -6.13e-05
    # centring the raw table ourselves gives the same fits
    raw = pf.explain_table(SHARED / "final_features.json", forest=False)
    assert {m: round(e.r2, 3) for m, e in raw.items()} == expected


def test_paper_features_from_the_benchmark_match_the_authors_table() -> None:
    from toolbias.selection import paper_features as pf
    from toolbias.selection.benchmark import load_benchmark

    bench = load_benchmark(f"biasbusters:{SHARED}")
    ours = pf.feature_table(bench, similarity="tfidf").set_index(["cluster", "api"])
    theirs = json.loads((SHARED / "final_features.json").read_text())
    for row in theirs:
        mine = ours.loc[(str(row["cluster_id"]), row["api"])]
        for f in ("desc_name_length_sum", "num_params", "positive_word_count"):
            assert mine[f] == row[f], (row["cluster_id"], row["api"], f)
        assert (row["age_days"] is None) == (mine["age_days"] != mine["age_days"])  # NaN where the paper has null
    rates = {c.id: [0.6, 0.1, 0.1, 0.1, 0.1] for c in bench}
    result, _ = pf.explain_paper(bench, rates, similarity="tfidf", model="m")
    assert result.n == 43 and 0 <= result.r2 <= 1 and "age_days" not in result.forest["features"]


def test_explain_command_on_the_table() -> None:
    result = CliRunner().invoke(cli, ["select", "explain", "--table", str(SHARED / "final_features_subtract_mean.json"),
                                      "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert round(out["Qwen"]["r2"], 3) == 0.226 and out["Qwen"]["random_forest"]["n"] == 50
