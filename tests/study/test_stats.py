"""Intervals, paired differences, the schema-form gap and difficulty prediction,
checked against scipy and against small cases computed by hand."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

from toolbias.study.stats import (
    bootstrap_ci,
    bootstrap_means,
    cell_stats,
    difficulty_prediction,
    model_differences,
    paired_bootstrap,
    pearson,
    rankdata,
    rng_for,
    sample_estimate,
    schema_form_gap,
    spearman,
    task_success,
    variant_differences,
)

sps = pytest.importorskip("scipy.stats")


# -- the bootstrap itself -------------------------------------------------------

def test_index_resampling_matches_scipy_exactly_with_the_same_generator() -> None:
    x = np.random.default_rng(1).normal(size=80)  # continuous: the index-resampling path
    ours = bootstrap_means(x, n_resamples=4000, rng=np.random.default_rng(7))
    ref = sps.bootstrap((x,), np.mean, n_resamples=4000, method="percentile", rng=np.random.default_rng(7))
    lo, hi = np.percentile(ours, [2.5, 97.5])
    assert lo == pytest.approx(ref.confidence_interval.low, abs=1e-12)
    assert hi == pytest.approx(ref.confidence_interval.high, abs=1e-12)


@pytest.mark.parametrize("data", [
    (np.arange(50) < 17).astype(float),                      # 0/1 successes (multinomial path)
    np.r_[np.zeros(12), np.full(20, 0.5), np.ones(8)],       # per-task means with repeats
    np.r_[-np.ones(9), np.zeros(25), np.ones(16)],          # paired differences
])
def test_percentile_interval_agrees_with_scipy(data: np.ndarray) -> None:
    ours = bootstrap_ci(data, n_resamples=20_000, seed=3)
    ref = sps.bootstrap((data,), np.mean, n_resamples=20_000, method="percentile",
                        rng=np.random.default_rng(11)).confidence_interval
    step = 1 / len(data) + 0.01  # the bootstrap mean moves on a grid of 1/n (times the value spacing)
    assert ours.estimate == pytest.approx(float(np.mean(data)))
    assert abs(ours.low - ref.low) <= step and abs(ours.high - ref.high) <= step
    assert ours.n == len(data)


def test_binary_bootstrap_is_the_binomial() -> None:
    # resampling n 0/1 values with replacement: the mean is Binomial(n, p) / n
    n, k = 100, 30
    ci = bootstrap_ci((np.arange(n) < k).astype(float), n_resamples=20_000, seed=0)
    lo, hi = sps.binom.ppf([0.025, 0.975], n, k / n) / n
    assert abs(ci.low - lo) <= 1 / n and abs(ci.high - hi) <= 1 / n


def test_small_cases_by_hand() -> None:
    # two tasks, one success: resampled means 0, .5, 1 with probabilities 1/4, 1/2, 1/4
    ci = bootstrap_ci([0.0, 1.0], seed=0)
    assert (ci.estimate, ci.low, ci.high, ci.n) == (0.5, 0.0, 1.0, 2)
    # every task succeeded: no uncertainty left to resample
    ci = bootstrap_ci([1.0] * 7, seed=0)
    assert (ci.estimate, ci.low, ci.high) == (1.0, 1.0, 1.0)
    # paired, common tasks only: diffs (1, 0, 0) -> mean 1/3; P(mean <= 2/3) = 26/27 < .975, so high = 1
    a = {"t1": 1.0, "t2": 1.0, "t3": 0.0}
    b = {"t1": 0.0, "t2": 1.0, "t3": 0.0, "t4": 1.0}
    d = paired_bootstrap(a, b, seed=0)
    assert d.n == 3 and d.estimate == pytest.approx(1 / 3) and (d.low, d.high) == (0.0, 1.0)
    assert math.isnan(bootstrap_ci([]).estimate)


def test_paired_bootstrap_agrees_with_scipy_paired() -> None:
    rng = np.random.default_rng(5)
    a = (rng.random(60) < 0.7).astype(float)
    b = np.where(rng.random(60) < 0.8, a, 1 - a)
    ours = paired_bootstrap(dict(enumerate(a)), dict(enumerate(b)), n_resamples=20_000, seed=1)
    ref = sps.bootstrap((a, b), lambda x, y, axis=-1: x.mean(axis=axis) - y.mean(axis=axis), paired=True,
                        n_resamples=20_000, method="percentile", rng=np.random.default_rng(2)).confidence_interval
    assert ours.estimate == pytest.approx(a.mean() - b.mean())
    assert abs(ours.low - ref.low) <= 0.03 and abs(ours.high - ref.high) <= 0.03


def test_seeded_and_reproducible() -> None:
    x = (np.arange(40) % 3 == 0).astype(float)
    assert bootstrap_ci(x, seed=4, key="cell") == bootstrap_ci(x, seed=4, key="cell")
    same = [bootstrap_means(x, n_resamples=50, rng=rng_for(4, "cell")) for _ in range(2)]
    assert np.array_equal(*same)
    assert not np.array_equal(same[0], bootstrap_means(x, n_resamples=50, rng=rng_for(5, "cell")))
    assert not np.array_equal(same[0], bootstrap_means(x, n_resamples=50, rng=rng_for(4, "other")))


# -- tables of episodes -----------------------------------------------------------

def ep(model: str, variant: str, task: str, ok: bool, mode: str | None = None, control: str = "strict",
       condition: str = "base") -> dict[str, Any]:
    return {"model": model, "variant": variant, "control": control, "condition": condition, "task_id": task,
            "success": ok, "failure_mode": None if ok else (mode or "wrong_arguments")}


def test_cell_stats_by_hand() -> None:
    rows = [ep("m", "native", "t1", True), ep("m", "native", "t2", False, "under_execution"),
            ep("m", "native", "t3", False, "livelock"), ep("m", "native", "t4", True),
            # a task run twice counts once, with its mean success
            ep("m", "native", "t4", False, "under_execution")]
    (cell,) = cell_stats(pd.DataFrame(rows), seed=0)
    assert (cell.n, cell.episodes) == (4, 5)
    assert cell.success == pytest.approx((1 + 0 + 0 + 0.5) / 4)
    assert cell.failure_modes == {"livelock": 1, "under_execution": 2}   # Table-2 order
    assert cell.dominant_failure == "under_execution"
    assert cell.ci_low <= cell.success <= cell.ci_high
    assert task_success(rows) == {"t1": 1.0, "t2": 0.0, "t3": 0.0, "t4": 0.5}


def test_dominant_failure_ties_go_to_the_earlier_rule() -> None:
    rows = [ep("m", "v", "t1", False, "over_execution"), ep("m", "v", "t2", False, "rejected_and_stuck")]
    (cell,) = cell_stats(rows)
    assert cell.dominant_failure == "rejected_and_stuck"


def test_adding_a_model_never_moves_existing_intervals() -> None:
    rng = np.random.default_rng(0)
    base = [ep("a", "native", f"t{i}", bool(rng.random() < 0.6)) for i in range(30)]
    more = base + [ep("b", "native", f"t{i}", bool(rng.random() < 0.3)) for i in range(30)]
    (a1,) = cell_stats(base, seed=9)
    a2 = next(c for c in cell_stats(more, seed=9) if c.model == "a")
    assert (a1.ci_low, a1.ci_high) == (a2.ci_low, a2.ci_high)


def _grid() -> pd.DataFrame:
    rng = np.random.default_rng(3)
    rows = []
    for model, skill in (("A", 0.8), ("B", 0.5)):
        for variant, pen in (("native", 0.0), ("fully_merged", 0.3), ("fully_split", 0.05)):
            for control, bonus in (("strict", 0.0), ("lenient", 0.1)):
                for t in range(40):
                    ok = rng.random() < max(0.0, skill - pen + (bonus if variant != "native" else 0))
                    rows.append(ep(model, variant, f"t{t}", bool(ok), control=control))
    # one task missing from one arm: pairing must drop it
    return pd.DataFrame(rows[:-1])


def _rate(df: pd.DataFrame, **keys: str) -> pd.Series:
    sel = df
    for k, v in keys.items():
        sel = sel[sel[k] == v]
    return sel.groupby("task_id")["success"].mean()


def test_variant_minus_native_is_paired_over_common_tasks() -> None:
    df = _grid()
    diffs = variant_differences(df, seed=0)
    assert len(diffs) == 2 * 2 * 2  # models x non-native variants x controls
    for d in diffs:
        va = _rate(df, model=d.a["model"], variant=d.a["variant"], control=d.a["control"])
        nb = _rate(df, model=d.a["model"], variant="native", control=d.a["control"])
        common = va.index.intersection(nb.index)
        assert d.b["variant"] == "native" and d.n == len(common)
        assert d.diff == pytest.approx(float((va[common] - nb[common]).mean()))
        assert d.ci_low <= d.diff <= d.ci_high


def test_model_a_minus_model_b() -> None:
    df = _grid()
    diffs = model_differences(df, seed=0)
    assert {(d.a["model"], d.b["model"]) for d in diffs} == {("A", "B")}
    d = next(x for x in diffs if x.a["variant"] == "native" and x.a["control"] == "strict")
    a = _rate(df, model="A", variant="native", control="strict")
    b = _rate(df, model="B", variant="native", control="strict")
    assert d.diff == pytest.approx(float((a - b).mean()))


def test_schema_form_gap_is_lenient_minus_strict() -> None:
    df = _grid()
    gaps = schema_form_gap(df, seed=0)
    assert len(gaps) == 2 * 3
    for g in gaps:
        assert (g.a["control"], g.b["control"]) == ("lenient", "strict")
        le = _rate(df, model=g.a["model"], variant=g.a["variant"], control="lenient")
        st = _rate(df, model=g.a["model"], variant=g.a["variant"], control="strict")
        common = le.index.intersection(st.index)
        assert g.diff == pytest.approx(float((le[common] - st[common]).mean()))
        assert g.success_a == pytest.approx(float(le[common].mean()))


# -- difficulty prediction --------------------------------------------------------

def test_a_sample_of_everything_is_the_full_score() -> None:
    per_task = {f"t{i}": float(i % 4 == 0) for i in range(20)}
    ci, mae, cov = sample_estimate(per_task, 50, seed=0, repeats=5)
    assert ci.n == 20 and ci.estimate == pytest.approx(0.25) and mae == 0.0 and cov == 1.0


def test_sample_intervals_cover_about_nominally() -> None:
    rng = np.random.default_rng(2)
    covers = []
    for p in np.linspace(0.15, 0.85, 8):
        per_task = {f"t{i}": float(rng.random() < p) for i in range(600)}
        _, _, cov = sample_estimate(per_task, 36, seed=int(p * 100), repeats=100, n_resamples=2000)
        covers.append(cov)
    # percentile bootstrap on n=36 under-covers a little; far below nominal would be a bug
    assert 0.85 <= float(np.mean(covers)) <= 1.0


def test_difficulty_prediction_summaries_and_compliance() -> None:
    df = _grid()
    compliance = {("A", "native", "strict", "base"): 1.0, ("A", "fully_merged", "strict", "base"): 0.2,
                  ("A", "fully_split", "strict", "base"): 0.9}
    estimates, summaries = difficulty_prediction(df, n=10, seed=0, repeats=20, compliance=compliance)
    assert len(estimates) == 12
    for e in estimates:
        full = _rate(df, model=e.model, variant=e.variant, control=e.control).mean()
        assert e.full == pytest.approx(full) and e.n_sample == 10
        assert e.error == pytest.approx(e.estimate - e.full)
        assert e.covered == (e.ci_low - 1e-12 <= e.full <= e.ci_high + 1e-12)
    s = next(x for x in summaries if (x.model, x.control, x.predictor) == ("A", "strict", "sample"))
    mine = [e for e in estimates if (e.model, e.control) == ("A", "strict")]
    assert s.variants == 3 and s.mae == pytest.approx(np.mean([abs(e.error) for e in mine]))
    assert s.coverage == pytest.approx(np.mean([e.covered for e in mine]))
    c = next(x for x in summaries if x.predictor == "compliance")
    fulls = {e.variant: e.full for e in mine}
    assert c.variants == 3
    assert c.mae == pytest.approx(np.mean([abs(compliance[("A", v, "strict", "base")] - f)
                                           for v, f in fulls.items()]))
    xs = [compliance[("A", v, "strict", "base")] for v in fulls]
    assert c.pearson == pytest.approx(sps.pearsonr(xs, list(fulls.values()))[0])


def test_rank_correlations_match_scipy() -> None:
    x = [0.3, 0.1, 0.3, 0.9, 0.5, 0.5, 0.2]
    y = [0.2, 0.0, 0.4, 0.8, 0.5, 0.7, 0.1]
    assert list(rankdata(x)) == list(sps.rankdata(x))
    assert pearson(x, y) == pytest.approx(sps.pearsonr(x, y)[0])
    assert spearman(x, y) == pytest.approx(sps.spearmanr(x, y)[0])
    assert pearson([1, 1, 1], [1, 2, 3]) is None and spearman([1, 2], [2, 1]) is None
