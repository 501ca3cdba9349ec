"""Explain selection rates by tool metadata (BiasBusters section 5.1).

Seven features per tool:

==================  ==========================================================================
``sim_tool_desc``   mean cosine similarity between the cluster's queries and the tool description
``sim_api_desc``    the same for the endpoint (API) description
``length``          characters in name + description (tool and endpoint description)
``n_params``        number of parameters
``readability``     Flesch reading ease of the description (``textstat`` counts, pyphen syllables)
``promo_words``     count of promotional words (``PROMO_WORDS``) in name + description
``exposure``        an exposure proxy from metadata (``exposure``, ``popularity``, ``calls``, ``downloads``,
                    the first present on every tool of the benchmark); absent otherwise, and then
                    left out of the models and reported as absent
==================  ==========================================================================

Similarity uses all-MiniLM-L6-v2 (:mod:`.embed`) unless TF-IDF is asked for.
Features and the target (each tool's selection rate) are **centred on their cluster
mean**, so only differences between equivalent tools are explained. Then: Pearson
correlations; a linear regression on standardised features (in-sample R^2 and
coefficients); a random forest (cross-validated R^2 over 5 shuffled folds, and
permutation importance on the fitted forest).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import MissingExtraError, ToolbiasError
from .embed import similarity_matrix
from .types import Benchmark

FEATURES = ("sim_tool_desc", "sim_api_desc", "length", "n_params", "readability", "promo_words", "exposure")
EXPOSURE_KEYS = ("exposure", "popularity", "calls", "downloads")

#: words that sell rather than describe (matched whole, case-insensitive; ``#1`` counts too)
PROMO_WORDS = frozenset("""
best fastest fast blazing lightning instant instantly instantaneous ultimate unbeatable unmatched unrivalled
unrivaled unparalleled leading industry-leading world-class best-in-class premium powerful revolutionary
cutting-edge state-of-the-art advanced smartest smart amazing awesome incredible incredibly stunning gorgeous
beautiful perfect flawless guaranteed trusted loved love favorite favourite free affordable cheapest enterprise-grade
award-winning top seamless seamlessly effortless effortlessly super ultra pro exclusive innovative reliable
accurate most #1 no.1 jaw-dropping unlimited boost supercharge magic magical genius
""".split())

SimilarityFn = Callable[[Sequence[str], Sequence[str]], np.ndarray]


def promo_count(text: str) -> int:
    tokens = re.findall(r"#1|[A-Za-z][A-Za-z0-9.\-]*[A-Za-z0-9]|[A-Za-z]", text.lower())
    return sum(1 for t in tokens if t in PROMO_WORDS)


def flesch(text: str) -> float:
    """Flesch reading ease, 206.835 - 1.015 words/sentence - 84.6 syllables/word, with textstat's word and
    sentence counts and pyphen syllables (textstat's own fallback counter). textstat's default syllable
    source, CMUdict through nltk, is downloaded at run time, so it is never used: results are the same
    on every machine and nothing is fetched. NaN for an empty text."""
    try:
        import pyphen
        import textstat
    except ImportError:
        raise MissingExtraError("textstat", "explain", "the readability feature") from None
    if not text.strip():
        return float("nan")
    words = int(textstat.lexicon_count(text, removepunct=True))
    if words == 0:
        return float("nan")
    sentences = max(1, int(textstat.sentence_count(text)))
    dic = _pyphen_en(pyphen)
    tokens = re.sub(r"[^\w\s'-]", " ", text.lower()).split()
    syllables = sum(len(dic.positions(w)) + 1 for w in tokens)
    return 206.835 - 1.015 * words / sentences - 84.6 * syllables / max(1, len(tokens))


_PYPHEN: dict[str, Any] = {}


def _pyphen_en(pyphen: Any) -> Any:
    if "en" not in _PYPHEN:
        _PYPHEN["en"] = pyphen.Pyphen(lang="en_US")
    return _PYPHEN["en"]


def _exposure_key(bench: Benchmark) -> str | None:
    tools = [t for c in bench.clusters for t in c.tools]
    for key in EXPOSURE_KEYS:
        if all(isinstance(t.metadata.get(key), (int, float)) and not isinstance(t.metadata.get(key), bool)
               for t in tools):
            return key
    return None


def tool_features(bench: Benchmark, *, similarity: str | SimilarityFn = "minilm") -> Any:
    """A pandas DataFrame: one row per (cluster, api) with the raw (uncentred) features."""
    import pandas as pd

    sim: SimilarityFn
    if callable(similarity):
        sim = similarity
    else:
        kind = similarity

        def sim(q: Sequence[str], d: Sequence[str]) -> np.ndarray:
            return similarity_matrix(q, d, kind)

    exposure_key = _exposure_key(bench)
    rows = []
    for c in bench.clusters:
        docs = [t.tool_description for t in c.tools] + [t.api_description for t in c.tools]
        mean_sim = np.asarray(sim(list(c.queries), docs)).mean(axis=0)
        s_tool, s_api = mean_sim[: c.k], mean_sim[c.k:]
        for i, t in enumerate(c.tools):
            rows.append({
                "cluster": c.id, "api": i, "name": t.name,
                "sim_tool_desc": float(s_tool[i]) if t.tool_description.strip() else float("nan"),
                "sim_api_desc": float(s_api[i]) if t.api_description.strip() else float("nan"),
                "length": len(t.name) + len(t.description),
                "n_params": t.n_parameters,
                "readability": flesch(t.description),
                "promo_words": promo_count(f"{t.name} {t.description}"),
                "exposure": float(t.metadata[exposure_key]) if exposure_key else float("nan"),
            })
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class Explanation:
    features: tuple[str, ...]
    absent: tuple[str, ...]
    n_tools: int
    correlations: Mapping[str, Mapping[str, float]]
    linear_r2: float
    linear_coefficients: Mapping[str, float]
    forest_cv_r2: float
    forest_cv_r2_std: float
    permutation_importance: Mapping[str, Mapping[str, float]]
    similarity: str
    table: Any = field(repr=False, default=None)

    def to_dict(self) -> dict[str, Any]:
        return {"features": list(self.features), "absent": list(self.absent), "n_tools": self.n_tools,
                "similarity": self.similarity,
                "correlations": {k: dict(v) for k, v in self.correlations.items()},
                "linear": {"r2": self.linear_r2, "coefficients": dict(self.linear_coefficients)},
                "random_forest": {"cv_r2": self.forest_cv_r2, "cv_r2_std": self.forest_cv_r2_std,
                                  "permutation_importance": {k: dict(v)
                                                             for k, v in self.permutation_importance.items()}},
                "tools": _records(self.table)}


def _records(table: Any) -> list[dict[str, Any]]:
    if table is None:
        return []
    out = []
    for row in table.to_dict(orient="records"):
        out.append({k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()})
    return out


def explain(bench: Benchmark, rates: Mapping[str, Sequence[float]], *, similarity: str | SimilarityFn = "minilm",
            seed: int = 0, n_estimators: int = 100, n_repeats: int = 10, table: Any = None) -> Explanation:
    """Fit the feature models to selection ``rates`` (cluster -> per-API rates, canonical order)."""
    try:
        from scipy import stats
        from sklearn.ensemble import RandomForestRegressor
        from sklearn.inspection import permutation_importance
        from sklearn.linear_model import LinearRegression
        from sklearn.model_selection import KFold, cross_val_score
    except ImportError:
        raise MissingExtraError("scikit-learn", "explain", "the feature regressions") from None

    df = table if table is not None else tool_features(bench, similarity=similarity)
    df = df[df["cluster"].isin(list(rates))].copy()
    if df.empty:
        raise ToolbiasError("no cluster has both features and selection rates")
    df["rate"] = [float(rates[c][a]) for c, a in zip(df["cluster"], df["api"], strict=True)]
    absent = tuple(f for f in FEATURES if df[f].isna().all())
    used = [f for f in FEATURES if f not in absent]
    centred = df.copy()
    for col in [*used, "rate"]:
        # a missing value (e.g. no endpoint description) takes its cluster's mean: centred to 0
        centred[col] = centred.groupby("cluster")[col].transform(lambda s: s.fillna(s.mean()) - s.mean())
        centred[col] = centred[col].fillna(0.0)
    used = [f for f in used if float(centred[f].std(ddof=0)) > 1e-12]
    absent = tuple(f for f in FEATURES if f not in used)
    if not used:
        raise ToolbiasError("no feature varies within clusters")
    x = centred[used].to_numpy(dtype=float)
    y = centred["rate"].to_numpy(dtype=float)
    sd = x.std(axis=0)
    xz = (x - x.mean(axis=0)) / sd
    corr: dict[str, dict[str, float]] = {}
    for j, f in enumerate(used):
        if np.std(y) > 0:
            r, p = stats.pearsonr(x[:, j], y)
            corr[f] = {"r": float(r), "p": float(p)}
        else:
            corr[f] = {"r": float("nan"), "p": float("nan")}
    lin = LinearRegression().fit(xz, y)
    r2 = float(lin.score(xz, y)) if np.std(y) > 0 else float("nan")
    coefs = {f: float(c) for f, c in zip(used, lin.coef_, strict=True)}
    n = len(y)
    forest = RandomForestRegressor(n_estimators=n_estimators, min_samples_leaf=2, random_state=seed, n_jobs=1)
    if n >= 4 and np.std(y) > 0:
        folds = KFold(n_splits=min(5, n), shuffle=True, random_state=seed)
        scores = cross_val_score(forest, xz, y, cv=folds, scoring="r2")
        cv_r2, cv_std = float(np.mean(scores)), float(np.std(scores))
        forest.fit(xz, y)
        imp = permutation_importance(forest, xz, y, n_repeats=n_repeats, random_state=seed, n_jobs=1)
        importance = {f: {"mean": float(m), "std": float(s)}
                      for f, m, s in zip(used, imp.importances_mean, imp.importances_std, strict=True)}
    else:
        cv_r2 = cv_std = float("nan")
        importance = {f: {"mean": float("nan"), "std": float("nan")} for f in used}
    return Explanation(features=tuple(used), absent=absent, n_tools=n, correlations=corr, linear_r2=r2,
                       linear_coefficients=coefs, forest_cv_r2=cv_r2, forest_cv_r2_std=cv_std,
                       permutation_importance=importance,
                       similarity=similarity if isinstance(similarity, str) else "custom", table=df)
