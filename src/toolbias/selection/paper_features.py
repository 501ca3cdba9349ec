"""The paper's feature analysis (PROTOCOL.md 4): seven features, cluster centring, OLS and a random forest.

Features per (cluster, API), with the paper's definitions:

=============================  ===========================================================================
``avg_similarity_tool_desc``   mean cosine similarity of the cluster's queries with the tool blurb *
``avg_similarity_api_desc``    the same with the API description *
``age_days``                   days since the tool's RapidAPI ``createdAt`` **
``desc_name_length_sum``       characters of blurb + API description + ``slug(api)_for_slug(tool)`` (no ``get_``)
``num_params``                 required + optional parameters
``flesch_reading_ease``        Flesch reading ease of ``blurb + " " + API description`` ***
``positive_word_count``        word tokens of the same text in :data:`POSITIVE_WORDS` (19 words)
=============================  ===========================================================================

\\* The paper embedded with OpenAI ``text-embedding-ada-002``; here the packaged all-MiniLM-L6-v2
(:mod:`.embed`; ``tfidf`` when asked), so similarity values differ from the paper's.
\\** From the data where it exists: the ``age_days`` of ``final_features.json`` beside the BiasBusters
files (``metadata["age_days"]``; null for 7 APIs, as in the paper), else a tool's
``metadata["created"]`` (ISO date) counted to today; absent otherwise (the regression then drops it).
\\*** textstat's default syllable source (CMUdict through nltk) is a run-time download, so syllables
come from pyphen (:func:`~toolbias.selection.features.flesch`); values differ from the paper's.

Centring as the paper: each feature minus its cluster mean over the APIs where it is not null;
selection rates are not centred. Linear regression (OLS with intercept) on the centred features in
raw units, rows with a missing predictor dropped, in-sample R²; coefficients raw and standardised
(coef x sd(x) / sd(y)). Random forest as ``rf.py``: ``age_days`` left out, 200 trees, maximum depth
5, random state 42, 5-fold cross-validated R² over unshuffled folds, impurity and permutation
importances (10 repeats, random state 0, all rows).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import MissingExtraError, ToolbiasError
from .embed import similarity_matrix
from .features import flesch
from .paper_parse import slug
from .toolbench import api_of
from .types import Benchmark

PAPER_FEATURES = ("avg_similarity_tool_desc", "avg_similarity_api_desc", "age_days", "desc_name_length_sum",
                  "num_params", "flesch_reading_ease", "positive_word_count")
POSITIVE_WORDS = frozenset(("good", "great", "excellent", "effective", "efficient", "simple", "reliable",
                            "affordable", "powerful", "fast", "easy", "robust", "accurate", "ideal", "best",
                            "innovative", "highly", "top", "advanced"))
FEATURES_FILE = "final_features.json"
CENTRED_FILE = "final_features_subtract_mean.json"

SimilarityFn = Callable[[Sequence[str], Sequence[str]], np.ndarray]


def positive_word_count(text: str) -> int:
    return sum(1 for w in re.findall(r"\b\w+\b", text.lower()) if w in POSITIVE_WORDS)


def _bare_slug(text: str) -> str:
    """The slug of ``correct_api_meta.json`` names: without the ``get_`` put before a leading digit."""
    s = slug(text)
    return s[4:] if s.startswith("get_") and s[4:5].isdigit() else s


def _age(meta: Mapping[str, Any], today: dt.date) -> float:
    if isinstance(meta.get("age_days"), (int, float)) and not isinstance(meta.get("age_days"), bool):
        return float(meta["age_days"])
    created = meta.get("created")
    if isinstance(created, str):
        try:
            return float((today - dt.date.fromisoformat(created[:10])).days)
        except ValueError:
            return float("nan")
    return float("nan")


def feature_table(bench: Benchmark, *, similarity: str | SimilarityFn = "minilm", today: dt.date | None = None) -> Any:
    """A pandas DataFrame: one row per (cluster, api) with the seven raw (uncentred) features."""
    import pandas as pd

    today = today or dt.date.today()
    kind = similarity if isinstance(similarity, str) else ""

    def by_kind(q: Sequence[str], d: Sequence[str]) -> np.ndarray:
        return similarity_matrix(q, d, kind)

    sim: SimilarityFn = similarity if callable(similarity) else by_kind
    rows = []
    for c in bench.clusters:
        apis = [api_of(t) for t in c.tools]
        docs = [a.tool_description for a in apis] + [a.api_description for a in apis]
        mean_sim = np.asarray(sim(list(c.queries), docs)).mean(axis=0)
        for i, (t, a) in enumerate(zip(c.tools, apis, strict=True)):
            name = f"{_bare_slug(a.api_name)}_for_{_bare_slug(a.tool_name)}"
            text = f"{a.tool_description} {a.api_description}"
            total = t.metadata.get("parameters_total")
            rows.append({
                "cluster": c.id, "api": i, "name": t.name,
                "avg_similarity_tool_desc": float(mean_sim[i]) if a.tool_description.strip() else float("nan"),
                "avg_similarity_api_desc": float(mean_sim[c.k + i]) if a.api_description.strip() else float("nan"),
                "age_days": _age(t.metadata, today),
                "desc_name_length_sum": len(a.tool_description) + len(a.api_description) + len(name),
                "num_params": int(total) if isinstance(total, int) else
                len(a.required_parameters) + len(a.optional_parameters),
                "flesch_reading_ease": flesch(text),
                "positive_word_count": positive_word_count(text),
            })
    return pd.DataFrame(rows)


def centre(table: Any, features: Sequence[str] = PAPER_FEATURES) -> Any:
    """Each feature minus its cluster mean over the rows where it is not null (nulls stay null)."""
    out = table.copy()
    for f in features:
        if f in out:
            out[f] = out[f] - out.groupby("cluster")[f].transform("mean")
    return out


@dataclass(frozen=True)
class PaperExplanation:
    model: str
    n: int
    features: tuple[str, ...]
    r2: float
    intercept: float
    coefficients: Mapping[str, float]
    standardized: Mapping[str, float]
    correlations: Mapping[str, Mapping[str, float]]
    forest: Mapping[str, Any] = field(default_factory=dict)
    #: adjusted and cross-validated R², permutation baseline, CIs and corrected p-values (:mod:`.fit_stats`)
    statistics: Mapping[str, Any] = field(default_factory=dict)

    @property
    def chance(self) -> bool:
        """The fit is no better than chance (permutation baseline; False when not computed)."""
        return bool(self.statistics.get("chance"))

    def to_dict(self) -> dict[str, Any]:
        def clean(x: Any) -> Any:
            if isinstance(x, float) and math.isnan(x):
                return None
            if isinstance(x, Mapping):
                return {k: clean(v) for k, v in x.items()}
            return x
        return clean({"model": self.model, "n": self.n, "features": list(self.features), "r2": self.r2,
                      "intercept": self.intercept, "coefficients": dict(self.coefficients),
                      "standardized": dict(self.standardized), "correlations": dict(self.correlations),
                      "random_forest": dict(self.forest), "statistics": dict(self.statistics)})


def regress(centred: Any, rate: str = "rate", *, model: str = "", forest: bool = True, statistics: bool = True,
            permutations: int = 1000, seed: int = 0) -> PaperExplanation:
    """OLS (and the random forest) of ``rate`` on the centred features present in ``centred``; ``statistics``:
    also :func:`.fit_stats.fit_statistics` (the in-sample R² stays the paper's)."""
    features = [f for f in PAPER_FEATURES if f in centred and centred[f].notna().any()]
    data = centred.dropna(subset=[*features, rate])
    if len(data) <= len(features) + 1:
        raise ToolbiasError(f"{len(data)} complete rows for {len(features)} features", fix="explain more tools")
    x = data[features].to_numpy(dtype=float)
    y = data[rate].to_numpy(dtype=float)
    design = np.column_stack([np.ones(len(y)), x])
    beta, *_ = np.linalg.lstsq(design, y, rcond=None)
    resid = y - design @ beta
    ss_tot = float(((y - y.mean()) ** 2).sum())
    r2 = 1 - float((resid ** 2).sum()) / ss_tot if ss_tot > 0 else float("nan")
    sd_y = float(y.std(ddof=1)) if len(y) > 1 else float("nan")
    coefs = {f: float(b) for f, b in zip(features, beta[1:], strict=True)}
    std = {f: coefs[f] * float(x[:, j].std(ddof=1)) / sd_y if sd_y else float("nan") for j, f in enumerate(features)}
    corr = {}
    for f in features:
        pair = centred[[f, rate]].dropna()
        if len(pair) > 2 and pair[f].std() > 0 and pair[rate].std() > 0:
            from scipy import stats

            pearson = stats.pearsonr(pair[f], pair[rate])
            corr[f] = {"pearson": float(pearson[0]), "pearson_p": float(pearson[1]),
                       "spearman": float(stats.spearmanr(pair[f], pair[rate])[0]), "n": float(len(pair))}
    out = PaperExplanation(model=model, n=len(y), features=tuple(features), r2=r2, intercept=float(beta[0]),
                           coefficients=coefs, standardized=std, correlations=corr)
    if forest:
        out = PaperExplanation(**{**out.__dict__, "forest": random_forest(centred, rate)})
    if statistics:
        from .fit_stats import fit_statistics

        extra = fit_statistics(centred, rate, features, permutations=permutations, seed=seed,
                               forest_cv=out.forest.get("cv_r2_folds"), correlations=corr)
        out = PaperExplanation(**{**out.__dict__, "statistics": extra})
    return out


def random_forest(centred: Any, rate: str = "rate") -> dict[str, Any]:
    """The paper's forest: six predictors (age_days left out), 200 trees, depth 5, random state 42."""
    try:
        from sklearn.ensemble import RandomForestRegressor
        from sklearn.inspection import permutation_importance
        from sklearn.model_selection import KFold, cross_val_score
    except ImportError:
        raise MissingExtraError("scikit-learn", "explain", "the random forest") from None
    features = [f for f in PAPER_FEATURES if f != "age_days" and f in centred and centred[f].notna().any()]
    data = centred.dropna(subset=[*features, rate])
    x = data[features].to_numpy(dtype=float)
    y = data[rate].to_numpy(dtype=float)
    if len(y) < 10:
        return {"n": len(y), "note": "too few tools for a 5-fold forest"}
    forest = RandomForestRegressor(n_estimators=200, max_depth=5, random_state=42, n_jobs=1)
    scores = cross_val_score(forest, x, y, cv=KFold(n_splits=5, shuffle=False), scoring="r2")
    forest.fit(x, y)
    perm = permutation_importance(forest, x, y, n_repeats=10, random_state=0, n_jobs=1)
    return {"n": len(y), "features": features, "cv_r2": float(np.mean(scores)), "cv_r2_folds": [float(s) for s in scores],
            "impurity_importance": {f: float(v) for f, v in zip(features, forest.feature_importances_, strict=True)},
            "permutation_importance": {f: {"mean": float(m), "std": float(s)} for f, m, s in
                                       zip(features, perm.importances_mean, perm.importances_std, strict=True)}}


def explain_paper(bench: Benchmark, rates: Mapping[str, Sequence[float]], *, similarity: str | SimilarityFn = "minilm",
                  model: str = "", forest: bool = True, statistics: bool = True, permutations: int = 1000,
                  seed: int = 0) -> tuple[PaperExplanation, Any]:
    """Features of the benchmark's tools, centred per cluster, regressed on the given selection rates."""
    table = feature_table(bench, similarity=similarity)
    table = table[table["cluster"].isin(list(rates))].copy()
    if table.empty:
        raise ToolbiasError("no cluster has both features and selection rates")
    table["rate"] = [float(rates[c][a]) for c, a in zip(table["cluster"], table["api"], strict=True)]
    return regress(centre(table), model=model, forest=forest, statistics=statistics, permutations=permutations,
                   seed=seed), table


def load_feature_table(path: str | Path) -> Any:
    """A shared features table (``final_features*.json``): one row per API, one ``rate:<model>`` column per model."""
    import pandas as pd

    p = Path(path)
    if p.is_dir():
        p = p / CENTRED_FILE
    if not p.is_file():
        raise ToolbiasError("features table not found", where=str(p), fix=f"point at {CENTRED_FILE} or {FEATURES_FILE}")
    rows = []
    for r in json.loads(p.read_text(encoding="utf-8")):
        row = {"cluster": str(r["cluster_id"]), "api": int(r["api"]),
               **{f: (float("nan") if r.get(f) is None else float(r[f])) for f in PAPER_FEATURES}}
        row.update({f"rate:{m}": v for m, v in (r.get("selection_rate") or {}).items()})
        rows.append(row)
    return pd.DataFrame(rows)


def explain_table(path: str | Path, *, forest: bool = True, centred: bool | None = None, statistics: bool = True,
                  permutations: int = 1000, seed: int = 0) -> dict[str, PaperExplanation]:
    """The paper's regression per model on a shared features table (the centred file is used as it is; the raw
    file is centred first). With ``statistics``, each model's also holds ``correlation_family``: Holm and BH over
    all models' correlations together (:func:`.fit_stats.correct_family`)."""
    table = load_feature_table(path)
    is_centred = centred if centred is not None else Path(path).name != FEATURES_FILE
    data = table if is_centred else centre(table)
    models = [c.removeprefix("rate:") for c in table.columns if c.startswith("rate:")]
    out = {m: regress(data, f"rate:{m}", model=m, forest=forest, statistics=statistics, permutations=permutations,
                      seed=seed) for m in models}
    if statistics and len(out) > 1:
        from .fit_stats import correct_family

        family = correct_family({m: e.statistics for m, e in out.items()})
        out = {m: PaperExplanation(**{**e.__dict__, "statistics": {**e.statistics, "correlation_family": family}})
               for m, e in out.items()}
    return out


def resolve_similarity(kind: str | None) -> tuple[str, str | None]:
    """``kind`` (None: MiniLM when its weights are installed, else tfidf) and a note when it fell back."""
    if kind is not None:
        return kind, None
    from .embed import model_dir

    try:
        model_dir()
    except MissingExtraError as exc:
        return "tfidf", (f"similarity: tfidf (lexical), because the MiniLM weights are not installed ({exc.what}); "
                         f"{exc.fix} for all-MiniLM-L6-v2 (the paper used OpenAI ada-002, available to neither)")
    return "minilm", None
