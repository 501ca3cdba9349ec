"""Statistics a reviewer trusts, beside the paper's in-sample R² of the feature regression (PROTOCOL.md 4).

The paper fits 7 predictors on 43 rows and reports the in-sample R² (reproduced unchanged by
:func:`~toolbias.selection.paper_features.regress`). :func:`fit_statistics` adds, for the same rows:

- **adjusted R²**: ``1 - (1 - R²)(n - 1)/(n - p - 1)``;
- **cross-validated R²** of the linear model and of the paper's random forest: 5 unshuffled folds, as
  the paper's ``rf.py`` (the mean of the folds' R²; negative = worse than predicting the fold mean);
- a **permutation baseline**: the selection rates shuffled across the APIs *within each cluster*
  (the features and the cluster structure kept), the OLS refitted, ``permutations`` times (seeded);
  its mean and 95th percentile, and ``p = (1 + #{R²_perm >= R²}) / (1 + permutations)``;
- per-feature OLS **95% confidence intervals** and two-sided t-test p-values (df = n - p - 1), with
  **Holm** and **Benjamini-Hochberg** corrections over the features; the same corrections over the
  features' Pearson correlations;
- a verdict: the fit is flagged **no better than chance** when the permutation p-value is at least
  ``alpha`` (0.05).

The correlations of several models can be corrected as one family (:func:`correct_family`): the
paper's 42 correlations (7 features x 6 models) are 42 tests.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import MissingExtraError

ALPHA = 0.05
PERMUTATIONS = 1000


def holm(p: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (NaN kept as NaN, not counted)."""
    idx = [i for i, x in enumerate(p) if not math.isnan(x)]
    m = len(idx)
    out = [float("nan")] * len(p)
    running = 0.0
    for rank, i in enumerate(sorted(idx, key=lambda j: p[j])):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out


def benjamini_hochberg(p: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values (q-values); NaN kept as NaN, not counted."""
    idx = [i for i, x in enumerate(p) if not math.isnan(x)]
    m = len(idx)
    out = [float("nan")] * len(p)
    running = 1.0
    for rank, i in reversed(list(enumerate(sorted(idx, key=lambda j: p[j]), 1))):
        running = min(running, p[i] * m / rank)
        out[i] = min(1.0, max(p[i], running))   # p * m / m can fall one ulp below p
    return out


def _ols(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
    design = np.column_stack([np.ones(len(y)), x])
    beta, *_ = np.linalg.lstsq(design, y, rcond=None)
    resid = y - design @ beta
    ss_tot = float(((y - y.mean()) ** 2).sum())
    return beta, (1 - float((resid ** 2).sum()) / ss_tot) if ss_tot > 0 else float("nan")


def _cv_r2(estimator: Any, x: np.ndarray, y: np.ndarray, folds: int = 5) -> list[float]:
    from sklearn.model_selection import KFold, cross_val_score

    return [float(s) for s in cross_val_score(estimator, x, y, cv=KFold(n_splits=folds, shuffle=False), scoring="r2")]


def permutation_r2(x: np.ndarray, y: np.ndarray, clusters: Sequence[str], *, permutations: int = PERMUTATIONS,
                   seed: int = 0) -> np.ndarray:
    """OLS R² with ``y`` shuffled within each cluster, ``permutations`` times."""
    rng = np.random.default_rng(seed)
    groups = [np.flatnonzero(np.asarray(clusters) == c) for c in dict.fromkeys(clusters)]
    out = np.empty(permutations)
    for b in range(permutations):
        yp = y.copy()
        for g in groups:
            yp[g] = y[rng.permutation(g)]
        out[b] = _ols(x, yp)[1]
    return out


def fit_statistics(centred: Any, rate: str, features: Sequence[str], *, permutations: int = PERMUTATIONS,
                   seed: int = 0, alpha: float = ALPHA, forest_cv: Sequence[float] | None = None,
                   correlations: Mapping[str, Mapping[str, float]] | None = None) -> dict[str, Any]:
    """The statistics of the module doc for the OLS of ``rate`` on ``features`` (rows with a missing value
    dropped, as the paper); ``forest_cv``: the forest's fold R² when already computed."""
    from scipy import stats

    data = centred.dropna(subset=[*features, rate])
    x = data[list(features)].to_numpy(dtype=float)
    y = data[rate].to_numpy(dtype=float)
    n, p = len(y), len(features)
    beta, r2 = _ols(x, y)
    dof = n - p - 1
    adj = 1 - (1 - r2) * (n - 1) / dof if dof > 0 else float("nan")
    design = np.column_stack([np.ones(n), x])
    resid = y - design @ beta
    sigma2 = float(resid @ resid) / dof if dof > 0 else float("nan")
    try:
        cov = sigma2 * np.linalg.inv(design.T @ design)
        se = np.sqrt(np.clip(np.diag(cov), 0, None))
    except np.linalg.LinAlgError:
        se = np.full(p + 1, float("nan"))
    tcrit = float(stats.t.ppf(0.975, dof)) if dof > 0 else float("nan")
    pvals = [float(2 * stats.t.sf(abs(b / s), dof)) if s > 0 and dof > 0 else float("nan")
             for b, s in zip(beta[1:], se[1:], strict=True)]
    p_holm, p_bh = holm(pvals), benjamini_hochberg(pvals)
    coefficients = {f: {"coef": float(beta[j + 1]), "se": float(se[j + 1]),
                        "ci95": [float(beta[j + 1] - tcrit * se[j + 1]), float(beta[j + 1] + tcrit * se[j + 1])],
                        "p": pvals[j], "p_holm": p_holm[j], "p_bh": p_bh[j]} for j, f in enumerate(features)}
    try:
        from sklearn.linear_model import LinearRegression
    except ImportError:
        raise MissingExtraError("scikit-learn", "explain", "the cross-validated R²") from None
    linear_cv = _cv_r2(LinearRegression(), x, y) if n >= 10 else []
    perm = permutation_r2(x, y, list(data["cluster"]), permutations=permutations, seed=seed)
    p_perm = float((1 + int((perm >= r2).sum())) / (1 + permutations))
    out: dict[str, Any] = {
        "n": n, "predictors": p, "r2": r2, "adjusted_r2": adj,
        "linear_cv_r2": float(np.mean(linear_cv)) if linear_cv else float("nan"), "linear_cv_r2_folds": linear_cv,
        "forest_cv_r2": float(np.mean(forest_cv)) if forest_cv else float("nan"),
        "permutation": {"permutations": permutations, "seed": seed, "within": "cluster",
                        "mean_r2": float(perm.mean()), "p95_r2": float(np.quantile(perm, 0.95)), "p_value": p_perm},
        "coefficients": coefficients, "alpha": alpha,
    }
    if correlations:
        names = [f for f in features if f in correlations]
        rp = [float(correlations[f].get("pearson_p", float("nan"))) for f in names]
        out["correlations"] = {f: {"p": rp[i], "p_holm": h, "p_bh": q} for i, (f, h, q) in
                               enumerate(zip(names, holm(rp), benjamini_hochberg(rp), strict=True))}
    chance = not p_perm < alpha
    out["chance"] = chance
    out["verdict"] = (f"no better than chance: R² {r2:.3f} vs. {perm.mean():.3f} on average when the rates are "
                      f"shuffled within clusters (permutation p = {p_perm:.3f}); adjusted R² {adj:.3f}"
                      if chance else
                      f"better than chance: R² {r2:.3f} vs. {perm.mean():.3f} shuffled (permutation p = {p_perm:.3f}); "
                      f"adjusted R² {adj:.3f}")
    return out


def correct_family(results: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Holm and BH over every model's feature correlations together (``results``: model -> statistics with
    ``correlations``); the count of tests with p < 0.05 before and after."""
    keys = [(m, f) for m, s in results.items() for f in (s.get("correlations") or {})]
    ps = [float(results[m]["correlations"][f]["p"]) for m, f in keys]
    h, q = holm(ps), benjamini_hochberg(ps)
    return {"tests": len(keys),
            "p_below_0.05": sum(1 for x in ps if x < ALPHA),
            "holm_below_0.05": sum(1 for x in h if x < ALPHA),
            "bh_below_0.05": sum(1 for x in q if x < ALPHA),
            "tests_detail": [{"model": m, "feature": f, "p": ps[i], "p_holm": h[i], "p_bh": q[i]}
                             for i, (m, f) in enumerate(keys)]}


__all__ = ["ALPHA", "PERMUTATIONS", "benjamini_hochberg", "correct_family", "fit_statistics", "holm",
           "permutation_r2"]
