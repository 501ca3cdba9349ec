"""Selection metrics: hand-computed cases, an independent implementation, scripted extremes."""

from __future__ import annotations

import json
import math
import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.selection import ChooserModel, always_first, always_tool
from toolbias.errors import ToolbiasError
from toolbias.selection import (
    Selection,
    agreement,
    bias_report,
    builtin_benchmark,
    read_records,
    report_of,
    run_selection,
    tv_from_uniform,
)


def sel(run: str, cluster: str, api: int, position: int, k: int = 5, query: str = "q") -> Selection:
    return Selection(run=run, cluster=cluster, query=query, api=api, position=position, k=k)


# --- hand-computed ---------------------------------------------------------------------------------------


def test_tv_hand_computed() -> None:
    assert tv_from_uniform([1, 1, 1, 1, 1]) == pytest.approx(0.0)
    assert tv_from_uniform([5, 0, 0, 0, 0]) == pytest.approx(0.8)      # 1/2 (0.8 + 4 * 0.2)
    assert tv_from_uniform([1, 1, 0, 0]) == pytest.approx(0.5)         # 1/2 (2 * 0.25 + 2 * 0.25)
    assert tv_from_uniform([3, 1]) == pytest.approx(0.25)              # 1/2 (0.25 + 0.25)
    assert tv_from_uniform([2, 1, 1]) == pytest.approx(1 / 6)          # 1/2 (1/6 + 1/12 + 1/12)


def test_report_hand_computed_two_runs_two_clusters() -> None:
    # run 0: cluster A (k=2): api [0, 0, 1, 0] -> P=(3/4, 1/4): dA=0.25; positions [0, 1, 0, 0] -> 0.25
    #        cluster B (k=3): api [0, 1, 2] -> 0; positions [0, 0, 0] -> 1/2 (2/3 + 1/3 + 1/3) = 2/3
    # run 1: cluster A: api [1, 1] -> 0.5; positions [0, 1] -> 0
    #        cluster B: api [2, 2, 2] -> 2/3; positions [0, 1, 2] -> 0
    sels = [sel("0", "A", 0, 0, 2), sel("0", "A", 0, 1, 2), sel("0", "A", 1, 0, 2), sel("0", "A", 0, 0, 2),
            sel("0", "B", 0, 0, 3), sel("0", "B", 1, 0, 3), sel("0", "B", 2, 0, 3),
            sel("1", "A", 1, 0, 2), sel("1", "A", 1, 1, 2),
            sel("1", "B", 2, 0, 3), sel("1", "B", 2, 1, 3), sel("1", "B", 2, 2, 3)]
    rep = bias_report(sels, n_unparsed=3)
    run0_api, run0_pos = (0.25 + 0) / 2, (0.25 + 2 / 3) / 2
    run1_api, run1_pos = (0.5 + 2 / 3) / 2, 0.0
    assert rep.per_run["0"]["delta_api"] == pytest.approx(run0_api)
    assert rep.per_run["1"]["delta_pos"] == pytest.approx(run1_pos)
    assert rep.delta_api == pytest.approx((run0_api + run1_api) / 2)
    assert rep.delta_pos == pytest.approx((run0_pos + run1_pos) / 2)
    m0, m1 = (run0_api + run0_pos) / 2, (run1_api + run1_pos) / 2
    assert rep.delta_model == pytest.approx((m0 + m1) / 2)
    assert rep.std["delta_api"] == pytest.approx(abs(run0_api - run1_api) / 2)   # population std of two values
    assert rep.std["delta_model"] == pytest.approx(abs(m0 - m1) / 2)
    assert rep.per_cluster["A"]["delta_api"] == pytest.approx((0.25 + 0.5) / 2)
    assert rep.per_cluster["A"]["api_counts"] == [3, 3]
    assert rep.n_selections == 12 and rep.n_unparsed == 3
    d = rep.to_dict()
    assert {"delta_api", "delta_pos", "delta_model", "std", "per_cluster", "n_selections", "n_unparsed"} <= set(d)
    assert set(d["std"]) == {"delta_api", "delta_pos", "delta_model"}


def test_record_format_file(tmp_path) -> None:
    path = tmp_path / "r.jsonl"
    lines = [{"run": "a", "cluster": 1, "query": 0, "api": 0, "position": 0, "k": 2},
             {"run": "a", "cluster": 1, "query": 1, "api": 0, "position": 1, "k": 2},
             {"run": "a", "cluster": 1, "query": 2, "api": None, "position": None, "k": 2},
             {"run": "a", "cluster": 1, "query": 3, "api": 1, "position": 1, "k": 2, "status": "unparsed"}]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n")
    sels, unparsed = read_records(path)
    assert unparsed == 2 and len(sels) == 2
    rep = bias_report(sels, n_unparsed=unparsed)
    assert rep.delta_api == pytest.approx(0.5) and rep.delta_pos == pytest.approx(0.0)
    assert rep.per_cluster["1"]["n"] == 2        # unparsed answers are not in the denominator


@pytest.mark.parametrize("bad", [
    {"run": "a", "cluster": 1, "api": 5, "position": 0, "k": 5},
    {"run": "a", "cluster": 1, "api": 0.5, "position": 0, "k": 5},
    {"cluster": 1, "api": 0, "position": 0, "k": 5},
])
def test_bad_records_are_user_errors(tmp_path, bad) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(bad) + "\n")
    with pytest.raises(ToolbiasError):
        sels, n = read_records(path)
        bias_report(sels, n_unparsed=n)


def test_inconsistent_k_and_empty() -> None:
    with pytest.raises(ToolbiasError):
        bias_report([sel("0", "A", 0, 0, 2), sel("0", "A", 0, 0, 3)])
    with pytest.raises(ToolbiasError):
        bias_report([], n_unparsed=4)


# --- an independent implementation ----------------------------------------------------------------------


def reference_metrics(records: list[dict]) -> dict:
    """A second implementation written from the definition, with numpy arrays."""
    import numpy as np

    runs = sorted({r["run"] for r in records})
    per_run = []
    for run in runs:
        rr = [r for r in records if r["run"] == run]
        vals = []
        for c in sorted({r["cluster"] for r in rr}):
            cr = [r for r in rr if r["cluster"] == c]
            k = cr[0]["k"]
            pa = np.bincount([r["api"] for r in cr], minlength=k) / len(cr)
            pp = np.bincount([r["position"] for r in cr], minlength=k) / len(cr)
            da, dp = 0.5 * np.abs(pa - 1 / k).sum(), 0.5 * np.abs(pp - 1 / k).sum()
            vals.append((da, dp, (da + dp) / 2))
        per_run.append(np.mean(vals, axis=0))
    arr = np.array(per_run)
    return {"mean": arr.mean(axis=0), "std": arr.std(axis=0)}


record_strategy = st.integers(2, 6).flatmap(lambda k: st.lists(
    st.fixed_dictionaries({"run": st.sampled_from(["r0", "r1", "r2"]), "cluster": st.sampled_from(["x", "y"]),
                           "api": st.integers(0, k - 1), "position": st.integers(0, k - 1), "k": st.just(k)}),
    min_size=1, max_size=60))


@settings(max_examples=60, deadline=None)
@given(record_strategy)
def test_matches_independent_implementation(records) -> None:
    rep = bias_report([Selection(r["run"], r["cluster"], "q", r["api"], r["position"], r["k"]) for r in records])
    ref = reference_metrics(records)
    got = (rep.delta_api, rep.delta_pos, rep.delta_model)
    assert got == pytest.approx(tuple(ref["mean"]), abs=1e-12)
    assert (rep.std["delta_api"], rep.std["delta_pos"], rep.std["delta_model"]) == pytest.approx(
        tuple(ref["std"]), abs=1e-12)
    for v in got:
        assert 0.0 <= v <= 1 - 1 / records[0]["k"] + 1e-12


# --- scripted extremes over full rotations ---------------------------------------------------------------


def test_always_first_position_gives_pos_bias_only() -> None:
    bench = builtin_benchmark().limit_queries(4)
    records, summary = run_selection(ChooserModel(always_first), bench, runs=2)
    assert summary.ok == len(records) == 2 * 12 * 4 * 5
    rep = report_of(records)
    assert rep.delta_pos == pytest.approx(0.8)
    assert rep.delta_api == pytest.approx(0.0)
    assert rep.delta_model == pytest.approx(0.4)
    assert rep.std["delta_pos"] == pytest.approx(0.0)


def test_always_tool_x_gives_api_bias_only() -> None:
    bench = builtin_benchmark().limit_queries(3).select_clusters(["forward_geocoding"])
    records, _ = run_selection(ChooserModel(always_tool("geocode")), bench, runs=1)
    rep = report_of(records)
    assert rep.delta_api == pytest.approx(0.8)
    assert rep.delta_pos == pytest.approx(0.0)
    geocode = bench.clusters[0].names.index("geocode")
    assert rep.per_cluster["forward_geocoding"]["api_rates"][geocode] == pytest.approx(1.0)
    # the substring trap: forward_geocode is never counted for geocode
    assert Counter(r.api for r in records) == {geocode: 15}


def test_text_presentation_same_extremes() -> None:
    bench = builtin_benchmark().limit_queries(2)
    for style in ("number", "name"):
        records, _ = run_selection(ChooserModel(always_first, answer_style=style), bench, presentation="text")
        rep = report_of(records)
        assert (rep.delta_pos, rep.delta_api) == pytest.approx((0.8, 0.0))


# --- agreement ----------------------------------------------------------------------------------------


def test_agreement_correlations() -> None:
    a = {"c1": [0.5, 0.3, 0.2], "c2": [0.1, 0.1, 0.8]}
    b = {"c1": [0.6, 0.25, 0.15], "c2": [0.05, 0.15, 0.8]}
    c = {"c1": [0.2, 0.3, 0.5], "c2": [0.8, 0.1, 0.1]}
    res = agreement({"a": a, "b": b, "c": c})
    assert res.pearson[("a", "b")] > 0.95
    assert res.pearson[("a", "c")] < 0
    import numpy as np
    va, vb = a["c1"] + a["c2"], b["c1"] + b["c2"]
    assert res.pearson[("a", "b")] == pytest.approx(float(np.corrcoef(va, vb)[0, 1]))
    assert res.n_tools == 6 and not math.isnan(res.mean_pearson)
    with pytest.raises(ToolbiasError):
        agreement({"a": a})


def test_random_model_is_near_uniform() -> None:
    rng = random.Random(3)
    bench = builtin_benchmark().limit_queries(20)
    records, _ = run_selection(ChooserModel(lambda names, q: rng.randrange(len(names))), bench)
    rep = report_of(records)
    assert rep.delta_api < 0.15 and rep.delta_pos < 0.15


def test_noise_floor() -> None:
    from toolbias.selection.metrics import uniform_noise_floor

    assert uniform_noise_floor(1, 5) == pytest.approx(0.8)          # one draw: always all mass on one option
    assert uniform_noise_floor(2, 2) == pytest.approx(0.25)         # (0.5 * 0.5 + 0.5 * 0 ...) by hand: 1/2 * 1/2
    rng = random.Random(0)
    sims = []
    for _ in range(400):
        counts = Counter(rng.randrange(5) for _ in range(300))
        sims.append(tv_from_uniform([counts.get(i, 0) for i in range(5)]))
    assert uniform_noise_floor(300, 5) == pytest.approx(sum(sims) / len(sims), abs=0.004)
    rep = bias_report([sel("0", "A", i % 5, i % 5) for i in range(10)])
    assert rep.noise_floor == pytest.approx(uniform_noise_floor(10, 5)) and rep.delta_api == 0.0
