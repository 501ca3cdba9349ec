"""Intervals for the selection study's numbers: δ's over queries, shares, filter scores, correlations.

- **δ's** (:func:`delta_intervals`): a cluster-stratified bootstrap over *queries*. A query's
  selections in every rotation and every run go together (the rotations of one query share
  its wording, the runs its model state); each replicate draws each cluster's queries with
  replacement, recomputes the per-(run, cluster) rates and TV distances exactly as
  :func:`~toolbias.selection.metrics.bias_report` does (mean over clusters per run, then
  over runs). The TV distance of a sample from uniform is biased upward (a fair chooser
  still shows the noise floor), and a resample's more so, so the percentile interval of the
  replicates is shifted down by the bootstrap estimate of that bias (mean of the replicates
  minus the estimate) and clipped to [0, 1]; without the shift a near-fair δ's interval would
  lie wholly above its own estimate. Seeded (``seed`` and a hash of ``key``), so intervals
  are reproducible.
- **shares** (:func:`wilson`): the Wilson score interval of k successes in n trials.
- **filter scores** (:func:`filter_intervals`): micro precision and recall are ratios of sums,
  exact match a mean; a bootstrap over examples (weights drawn once, every score read from the
  same replicate).
- **correlations** (:func:`correlation_interval`): Fisher's z interval, ``atanh(r) ± z/sqrt(n-3)``;
  for Spearman's rho with the Fieller-Hartley-Pearson standard error ``sqrt(1.06/(n-3))``.

Every interval is a :class:`toolbias.study.stats.Interval` (estimate, low, high, n).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ..study.stats import (
    DEFAULT_CONFIDENCE,
    NAN_INTERVAL,
    Interval,
    correlation_interval,
    interval_dict,
    normal_quantile,
    rng_for,
)
from .metrics import METRICS, BiasReport, Selection

#: fewer replicates than the task study's 10,000: a replicate recomputes every cluster's TV
DELTA_RESAMPLES = 2000


def wilson(k: int, n: int, *, confidence: float = DEFAULT_CONFIDENCE) -> Interval:
    """Wilson score interval of a share k/n (NaN interval when n is 0)."""
    if n <= 0:
        return NAN_INTERVAL
    z = normal_quantile(confidence)
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    low = 0.0 if k == 0 else max(0.0, centre - half)
    high = 1.0 if k == n else min(1.0, centre + half)
    return Interval(p, low, high, n)


def _percentile(reps: np.ndarray, estimate: float, n: int, confidence: float, *,
                bias_shift: bool = False) -> Interval:
    reps = reps[~np.isnan(reps)]
    if reps.size == 0:
        return Interval(estimate, math.nan, math.nan, n)
    alpha = (1 - confidence) / 2
    low, high = np.percentile(reps, [100 * alpha, 100 * (1 - alpha)])
    if bias_shift:
        bias = float(reps.mean()) - estimate
        low, high = max(0.0, low - bias), min(1.0, high - bias)
    return Interval(estimate, float(low), float(high), n)


def delta_intervals(selections: Iterable[Selection], *, confidence: float = DEFAULT_CONFIDENCE,
                    n_resamples: int = DELTA_RESAMPLES, seed: int = 0,
                    key: Hashable = None) -> dict[str, Interval]:
    """``{"delta_api", "delta_pos", "delta_model"}`` -> bootstrap interval over queries (module doc);
    ``n`` is the number of distinct (cluster, query) pairs."""
    sels = list(selections)
    if not sels:
        return {m: NAN_INTERVAL for m in METRICS}
    runs = sorted({s.run for s in sels})
    run_ix = {r: i for i, r in enumerate(runs)}
    by_cluster: dict[str, dict[str, list[Selection]]] = defaultdict(lambda: defaultdict(list))
    for s in sels:
        by_cluster[s.cluster][s.query].append(s)
    rng = rng_for(seed, key)
    n_runs = len(runs)
    # per replicate and run: the sum over clusters of TV, and the number of clusters with selections
    sums = {m: np.zeros((n_resamples, n_runs)) for m in ("delta_api", "delta_pos")}
    point = {m: np.zeros(n_runs) for m in ("delta_api", "delta_pos")}
    n_clusters = np.zeros((n_resamples, n_runs))
    n_clusters_point = np.zeros(n_runs)
    n_queries = 0
    for queries in by_cluster.values():
        k = next(iter(queries.values()))[0].k
        names = list(queries)
        n_queries += len(names)
        counts = {"delta_api": np.zeros((len(names), n_runs, k)), "delta_pos": np.zeros((len(names), n_runs, k))}
        for qi, q in enumerate(names):
            for s in queries[q]:
                counts["delta_api"][qi, run_ix[s.run], s.api] += 1
                counts["delta_pos"][qi, run_ix[s.run], s.position] += 1
        weights = rng.multinomial(len(names), np.full(len(names), 1 / len(names)), size=n_resamples)
        for m, c in counts.items():
            totals = np.einsum("bq,qrk->brk", weights, c)             # replicate x run x k
            n = totals.sum(axis=2, keepdims=True)
            with np.errstate(invalid="ignore", divide="ignore"):
                tv = 0.5 * np.abs(totals / n - 1 / k).sum(axis=2)      # NaN where the run has no selection
            present = ~np.isnan(tv)
            sums[m] += np.where(present, tv, 0.0)
            if m == "delta_api":
                n_clusters += present
            whole = c.sum(axis=0)                                      # run x k
            wn = whole.sum(axis=1, keepdims=True)
            with np.errstate(invalid="ignore", divide="ignore"):
                ptv = 0.5 * np.abs(whole / wn - 1 / k).sum(axis=1)
            point[m] += np.where(np.isnan(ptv), 0.0, ptv)
            if m == "delta_api":
                n_clusters_point += ~np.isnan(ptv)
    with np.errstate(invalid="ignore", divide="ignore"):
        per_run = {m: sums[m] / n_clusters for m in sums}
        point_run = {m: point[m] / n_clusters_point for m in point}
    reps = {m: np.nanmean(v, axis=1) for m, v in per_run.items()}
    reps["delta_model"] = (reps["delta_api"] + reps["delta_pos"]) / 2
    est = {m: float(np.nanmean(v)) for m, v in point_run.items()}
    est["delta_model"] = (est["delta_api"] + est["delta_pos"]) / 2
    return {m: _percentile(reps[m], est[m], n_queries, confidence, bias_shift=True) for m in METRICS}


def with_intervals(report: BiasReport, selections: Iterable[Selection], *, seed: int = 0,
                   key: Hashable = None) -> BiasReport:
    """``report`` with ``extra["intervals"]``: each δ's bootstrap interval over queries (JSON-ready)."""
    ivs = delta_intervals(selections, seed=seed, key=key if key is not None else report.label)
    return replace(report, extra={**report.extra, "intervals": {m: interval_dict(v) for m, v in ivs.items()}})


def filter_intervals(golds: Sequence[frozenset[Any]], predictions: Sequence[frozenset[Any] | None], *,
                     confidence: float = DEFAULT_CONFIDENCE, n_resamples: int = DELTA_RESAMPLES, seed: int = 0,
                     key: Hashable = None) -> dict[str, Interval]:
    """Bootstrap intervals (over examples) of micro precision, micro recall and exact match
    (:func:`toolbias.selection.mitigate.score_sets`'s definitions; None = unparsed = empty)."""
    n = len(golds)
    if n == 0:
        return {m: NAN_INTERVAL for m in ("micro_precision", "micro_recall", "exact_match")}
    preds = [p or frozenset() for p in predictions]
    tp = np.array([len(p & g) for g, p in zip(golds, preds, strict=True)], dtype=float)
    npred = np.array([len(p) for p in preds], dtype=float)
    ngold = np.array([len(g) for g in golds], dtype=float)
    exact = np.array([p == g for g, p in zip(golds, preds, strict=True)], dtype=float)
    w = rng_for(seed, key).multinomial(n, np.full(n, 1 / n), size=n_resamples).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        reps = {"micro_precision": (w @ tp) / (w @ npred), "micro_recall": (w @ tp) / (w @ ngold),
                "exact_match": (w @ exact) / n}
    est = {"micro_precision": tp.sum() / npred.sum() if npred.sum() else 0.0,
           "micro_recall": tp.sum() / ngold.sum() if ngold.sum() else 0.0, "exact_match": float(exact.mean())}
    return {m: _percentile(reps[m], float(est[m]), n, confidence) for m in reps}


def format_interval(iv: Interval | None, digits: int = 3) -> str:
    """``0.123 [0.100, 0.150]`` (``n/a`` parts for NaN)."""
    if iv is None:
        return "n/a"

    def f(x: float) -> str:
        return "n/a" if math.isnan(x) else f"{x:.{digits}f}"
    if math.isnan(iv.low):
        return f(iv.estimate)
    return f"{f(iv.estimate)} [{f(iv.low)}, {f(iv.high)}]"


__all__ = ["DELTA_RESAMPLES", "correlation_interval", "delta_intervals", "filter_intervals", "format_interval",
           "interval_dict", "wilson", "with_intervals"]
