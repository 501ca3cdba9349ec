"""Selection-bias metrics: total-variation distances from uniform over APIs and positions.

Input record format (JSON Lines, one selection per line)::

    {"run": str, "cluster": str|int, "query": str|int, "api": int, "position": int, "k": int}

- ``run``: which repetition of the benchmark the selection belongs to;
- ``cluster``: the cluster id; ``query``: the query id or text (not used by the metrics);
- ``api``: 0-based index of the chosen tool in the cluster's **canonical** order;
- ``position``: 0-based position of the chosen tool in the list **as presented**;
- ``k``: the cluster size (the same on every record of a cluster).

A line whose ``api`` is ``null`` (or with ``"status": "unparsed"``) is an answer that
named no single candidate: it is counted in ``n_unparsed`` and left out of every
denominator. Blank lines are skipped.

For each run r and cluster c with at least one selection::

    P_api[i] = share of selections with api == i      (i = 0..k-1)
    P_pos[j] = share of selections with position == j
    delta_api = TV(P_api, U) = 1/2 * sum_i |P_api[i] - 1/k|
    delta_pos = TV(P_pos, U)
    delta_model = (delta_api + delta_pos) / 2

A run's figure is the mean over its clusters; the report gives the mean over runs and
the **population** standard deviation over runs (``numpy.std``, ddof=0), and per-cluster
values (mean over runs of that cluster's figures, with pooled selection rates).

``noise_floor`` is the delta a perfectly fair selector would still show with the same
numbers of selections: the expected TV(P_hat, U) of n uniform draws over k options
(exact, binomial marginals), averaged like the deltas. A delta near it is
indistinguishable from fair at this sample size.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..errors import ToolbiasError

METRICS = ("delta_api", "delta_pos", "delta_model")


@dataclass(frozen=True)
class Selection:
    """One parsed selection (the documented record format)."""

    run: str
    cluster: str
    query: str
    api: int
    position: int
    k: int

    def to_dict(self) -> dict[str, Any]:
        return {"run": self.run, "cluster": self.cluster, "query": self.query, "api": self.api,
                "position": self.position, "k": self.k}


def tv_from_uniform(counts: Sequence[float]) -> float:
    """TV distance between the distribution ``counts`` (any non-negative weights) and uniform."""
    total = float(sum(counts))
    if total <= 0:
        raise ValueError("no selections")
    k = len(counts)
    return 0.5 * sum(abs(c / total - 1.0 / k) for c in counts)


def tv_distance(p: Sequence[float], q: Sequence[float]) -> float:
    """TV distance between two distributions given as weights (each normalised first)."""
    if len(p) != len(q):
        raise ValueError("distributions of different sizes")
    sp, sq = float(sum(p)), float(sum(q))
    if sp <= 0 or sq <= 0:
        raise ValueError("empty distribution")
    return 0.5 * sum(abs(a / sp - b / sq) for a, b in zip(p, q, strict=True))


@dataclass(frozen=True)
class ClusterFigures:
    cluster: str
    k: int
    n: int
    api_counts: tuple[int, ...]
    pos_counts: tuple[int, ...]
    delta_api: float
    delta_pos: float

    @property
    def delta_model(self) -> float:
        return (self.delta_api + self.delta_pos) / 2

    @property
    def api_rates(self) -> tuple[float, ...]:
        return tuple(c / self.n for c in self.api_counts)

    @property
    def pos_rates(self) -> tuple[float, ...]:
        return tuple(c / self.n for c in self.pos_counts)


def cluster_figures(selections: Iterable[Selection]) -> dict[str, dict[str, ClusterFigures]]:
    """run -> cluster -> figures, for every (run, cluster) with at least one selection."""
    counts: dict[tuple[str, str], tuple[list[int], list[int]]] = {}
    ks: dict[str, int] = {}
    for s in selections:
        if s.k < 1:
            raise ToolbiasError(f"k must be positive, got {s.k}", where=f"cluster {s.cluster}")
        known = ks.setdefault(s.cluster, s.k)
        if known != s.k:
            raise ToolbiasError(f"cluster has records with k={known} and k={s.k}", where=f"cluster {s.cluster}",
                                fix="give every record of a cluster the same k")
        if not (0 <= s.api < s.k and 0 <= s.position < s.k):
            raise ToolbiasError(f"api {s.api} / position {s.position} outside 0..{s.k - 1}",
                                where=f"cluster {s.cluster}, run {s.run}, query {s.query}")
        api, pos = counts.setdefault((s.run, s.cluster), ([0] * s.k, [0] * s.k))
        api[s.api] += 1
        pos[s.position] += 1
    out: dict[str, dict[str, ClusterFigures]] = defaultdict(dict)
    for (run, cluster), (api, pos) in counts.items():
        out[run][cluster] = ClusterFigures(cluster=cluster, k=ks[cluster], n=sum(api), api_counts=tuple(api),
                                           pos_counts=tuple(pos), delta_api=tv_from_uniform(api),
                                           delta_pos=tv_from_uniform(pos))
    return dict(out)


@lru_cache(maxsize=4096)
def uniform_noise_floor(n: int, k: int) -> float:
    """E[TV(P_hat, U)] for n independent uniform draws over k options: k/2 * E|X/n - 1/k|, X ~ Bin(n, 1/k)."""
    if n <= 0 or k <= 1:
        return 0.0
    p = 1.0 / k
    total = 0.0
    log_p, log_q = math.log(p), math.log1p(-p)
    base = math.lgamma(n + 1)
    for x in range(n + 1):
        log_pmf = base - math.lgamma(x + 1) - math.lgamma(n - x + 1) + x * log_p + (n - x) * log_q
        total += math.exp(log_pmf) * abs(x / n - p)
    return 0.5 * k * total


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs)


def _pstd(xs: Sequence[float]) -> float:
    m = _mean(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs))


@dataclass(frozen=True)
class BiasReport:
    """Mean over runs (and population std over runs) of per-run cluster-mean TV figures."""

    delta_api: float
    delta_pos: float
    delta_model: float
    std: Mapping[str, float]
    per_cluster: Mapping[str, Mapping[str, Any]]
    per_run: Mapping[str, Mapping[str, float]]
    n_selections: int
    n_unparsed: int
    n_runs: int
    noise_floor: float = 0.0
    label: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def unparsed_rate(self) -> float:
        total = self.n_selections + self.n_unparsed
        return self.n_unparsed / total if total else 0.0

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "delta_api": self.delta_api, "delta_pos": self.delta_pos, "delta_model": self.delta_model,
            "std": dict(self.std), "per_cluster": {c: dict(v) for c, v in self.per_cluster.items()},
            "n_selections": self.n_selections, "n_unparsed": self.n_unparsed, "n_runs": self.n_runs,
            "noise_floor": self.noise_floor, "per_run": {r: dict(v) for r, v in self.per_run.items()},
        }
        if self.label:
            d["label"] = self.label
        d.update(self.extra)
        return d

    def api_rates(self) -> dict[str, tuple[float, ...]]:
        """cluster -> pooled selection rate of each canonical API."""
        return {c: tuple(v["api_rates"]) for c, v in self.per_cluster.items()}


def bias_report(selections: Iterable[Selection], *, n_unparsed: int = 0, label: str = "") -> BiasReport:
    """The metrics of the module docstring. Raises ToolbiasError when there is no selection."""
    sels = list(selections)
    if not sels:
        raise ToolbiasError("no parsed selections to measure",
                            fix="check the records (all unparsed?) or run `toolbias select run` first")
    figures = cluster_figures(sels)
    per_run: dict[str, dict[str, float]] = {}
    for run in sorted(figures, key=_sort_key):
        fs = list(figures[run].values())
        per_run[run] = {m: _mean([getattr(f, m) for f in fs]) for m in METRICS}
        per_run[run]["noise_floor"] = _mean([uniform_noise_floor(f.n, f.k) for f in fs])
        per_run[run]["n_clusters"] = len(fs)
    runs = list(per_run)
    means = {m: _mean([per_run[r][m] for r in runs]) for m in METRICS}
    stds = {m: _pstd([per_run[r][m] for r in runs]) for m in METRICS}
    per_cluster: dict[str, dict[str, Any]] = {}
    clusters = sorted({c for r in figures.values() for c in r}, key=_sort_key)
    for c in clusters:
        fs = [figures[r][c] for r in runs if c in figures[r]]
        k = fs[0].k
        api = [sum(f.api_counts[i] for f in fs) for i in range(k)]
        pos = [sum(f.pos_counts[i] for f in fs) for i in range(k)]
        n = sum(api)
        per_cluster[c] = {
            **{m: _mean([getattr(f, m) for f in fs]) for m in METRICS},
            **{f"std_{m}": _pstd([getattr(f, m) for f in fs]) for m in METRICS},
            "noise_floor": _mean([uniform_noise_floor(f.n, f.k) for f in fs]),
            "k": k, "n": n, "api_counts": api, "pos_counts": pos,
            "api_counts_by_run": {r: list(figures[r][c].api_counts) for r in runs if c in figures[r]},
            "api_rates": [x / n for x in api], "pos_rates": [x / n for x in pos],
        }
    return BiasReport(delta_api=means["delta_api"], delta_pos=means["delta_pos"],
                      delta_model=means["delta_model"], std=stds, per_cluster=per_cluster, per_run=per_run,
                      n_selections=len(sels), n_unparsed=n_unparsed, n_runs=len(runs),
                      noise_floor=_mean([per_run[r]["noise_floor"] for r in runs]), label=label)


def _sort_key(x: str) -> tuple[int, Any]:
    return (0, int(x)) if x.lstrip("-").isdigit() else (1, x)


# --- reading records ------------------------------------------------------------------------------------


def parse_record(d: Mapping[str, Any], where: str = "") -> Selection | None:
    """A documented record as a Selection, or None for an unparsed answer (``api`` null)."""
    missing = [f for f in ("run", "cluster", "k") if f not in d]
    if missing:
        raise ToolbiasError(f"record lacks {', '.join(missing)}", where=where,
                            fix='write {"run", "cluster", "query", "api", "position", "k"} on each line')
    if d.get("status") not in (None, "ok") or d.get("api") is None or d.get("position") is None:
        return None
    try:
        return Selection(run=str(d["run"]), cluster=str(d["cluster"]), query=str(d.get("query", "")),
                         api=_int(d["api"]), position=_int(d["position"]), k=_int(d["k"]))
    except (TypeError, ValueError):
        raise ToolbiasError("api, position and k must be integers", where=where) from None


def _int(v: Any) -> int:
    if isinstance(v, bool) or (isinstance(v, float) and not v.is_integer()):
        raise ValueError(v)
    return int(v)


def read_records(path: str | Path) -> tuple[list[Selection], int]:
    """Selections and the number of unparsed answers in a JSONL file of documented records."""
    p = Path(path)
    if not p.is_file():
        raise ToolbiasError("records file not found", where=str(p), fix="check the path")
    sels: list[Selection] = []
    unparsed = 0
    fix = 'write one {"run", "cluster", "query", "api", "position", "k"} object per line'
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ToolbiasError(f"cannot read records: {exc}", where=str(p), fix="point at a UTF-8 JSONL file") from None
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ToolbiasError(f"invalid JSON: {exc.msg}", where=f"{p}:{lineno}:{exc.colno}", fix=fix) from None
        if not isinstance(d, dict):
            raise ToolbiasError("each line must be a JSON object", where=f"{p}:{lineno}", fix=fix)
        s = parse_record(d, where=f"{p}:{lineno}")
        if s is None:
            unparsed += 1
        else:
            sels.append(s)
    return sels, unparsed


# --- cross-model agreement ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Agreement:
    """Correlation of per-tool selection rates between models (over all (cluster, api) pairs)."""

    models: tuple[str, ...]
    pearson: Mapping[tuple[str, str], float]
    spearman: Mapping[tuple[str, str], float]
    n_tools: int

    @property
    def mean_pearson(self) -> float:
        vals = [v for v in self.pearson.values() if not math.isnan(v)]
        return _mean(vals) if vals else float("nan")

    @property
    def mean_spearman(self) -> float:
        vals = [v for v in self.spearman.values() if not math.isnan(v)]
        return _mean(vals) if vals else float("nan")

    def intervals(self, kind: str = "pearson") -> dict[tuple[str, str], Any]:
        """Each pair's 95% Fisher-z interval (:func:`toolbias.selection.intervals.correlation_interval`) over
        the ``n_tools`` (cluster, api) pairs."""
        from ..study.stats import correlation_interval

        values = self.pearson if kind == "pearson" else self.spearman
        return {pair: correlation_interval(r, self.n_tools, kind=kind) for pair, r in values.items()}

    def to_dict(self) -> dict[str, Any]:
        from ..study.stats import interval_dict

        return {"models": list(self.models), "n_tools": self.n_tools,
                "pearson": {f"{a} | {b}": v for (a, b), v in self.pearson.items()},
                "spearman": {f"{a} | {b}": v for (a, b), v in self.spearman.items()},
                **{f"{kind}_ci": {f"{a} | {b}": interval_dict(iv) for (a, b), iv in self.intervals(kind).items()}
                   for kind in ("pearson", "spearman")},
                "mean_pearson": self.mean_pearson, "mean_spearman": self.mean_spearman}


def agreement(rates: Mapping[str, Mapping[str, Sequence[float]]]) -> Agreement:
    """``rates``: model -> cluster -> per-API selection rates (e.g. ``BiasReport.api_rates()``).

    Only clusters every model has are compared. Pearson and Spearman correlations are
    computed over the concatenated (cluster, api) rates for every pair of models.
    """
    from scipy import stats

    models = tuple(rates)
    if len(models) < 2:
        raise ToolbiasError("agreement needs at least two models")
    shared = set.intersection(*(set(r) for r in rates.values()))
    clusters = sorted(shared, key=_sort_key)
    if not clusters:
        raise ToolbiasError("the models share no cluster")
    vectors = {m: [x for c in clusters for x in rates[m][c]] for m in models}
    pearson: dict[tuple[str, str], float] = {}
    spearman: dict[tuple[str, str], float] = {}
    for i, a in enumerate(models):
        for b in models[i + 1:]:
            va, vb = vectors[a], vectors[b]
            if len(va) != len(vb):
                raise ToolbiasError(f"models {a} and {b} have clusters of different sizes")
            if len(set(va)) < 2 or len(set(vb)) < 2:
                pearson[(a, b)] = spearman[(a, b)] = float("nan")
                continue
            pearson[(a, b)] = float(stats.pearsonr(va, vb)[0])
            spearman[(a, b)] = float(stats.spearmanr(va, vb)[0])
    return Agreement(models=models, pearson=pearson, spearman=spearman, n_tools=len(vectors[models[0]]))
