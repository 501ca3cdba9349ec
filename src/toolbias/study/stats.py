"""Uncertainty for every number a study reports: bootstrap intervals over tasks,
paired task bootstraps for differences, the schema-form gap, and difficulty
prediction from a small sample.

Conventions (documented contract, tested):

* The unit of resampling is the **task**. A cell's success rate is the mean over
  its distinct tasks of each task's mean success (one episode per task in a
  normal study, so this is the plain success rate).
* Intervals are bootstrap **percentile** intervals (``confidence`` default 0.95,
  ``n_resamples`` default 10,000). Differences are **paired**: both arms are
  restricted to their common tasks, and each resample draws tasks, not episodes.
* Reproducible: every interval's generator is seeded from ``seed`` plus a stable
  hash of the quantity's key, so adding a model to a store never moves the
  intervals of the cells already there.
* Resampling ``n`` values with replacement and taking the mean is exactly a
  multinomial draw over the distinct values; for data with few distinct values
  (0/1 successes, paired differences in {-1, 0, 1}) this is what we draw (same
  distribution as index resampling, much faster). Other data resample indices
  as :func:`scipy.stats.bootstrap` does.
* Schema-form gap = success under ``lenient`` minus success under ``strict``
  (positive: the model meant the right action but wrote it off-schema; paper Figure 5).
* Every statistic of a cell reads only its :class:`CellTasks`: per task, successes and
  episodes (in the order tasks first appear), and failure-mode counts. The functions below
  take episodes (a DataFrame or mappings, reduced here) or a :class:`CellTable` reduced
  elsewhere (a report reduces a store in SQL: :mod:`toolbias.report.tally`); both give the
  same numbers.
"""

from __future__ import annotations

import hashlib
import math
import weakref
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

DEFAULT_RESAMPLES = 10_000
DEFAULT_CONFIDENCE = 0.95
#: up to this many distinct values the multinomial shortcut is used
_MULTINOMIAL_MAX_UNIQUE = 64

CELL_KEYS = ("model", "variant", "control", "condition")
#: a grid cell: (model, variant, control, condition)
CellKey = tuple[str, str, str, str]


def _seed_for(seed: int, key: Hashable = None) -> list[int]:
    if key is None:
        return [int(seed)]
    digest = hashlib.sha256(repr(key).encode("utf-8")).digest()
    return [int(seed), int.from_bytes(digest[:8], "little")]


def rng_for(seed: int, key: Hashable = None) -> np.random.Generator:
    """The generator for the quantity named ``key`` (stable across runs and orderings)."""
    return np.random.default_rng(_seed_for(seed, key))


@dataclass(frozen=True)
class Interval:
    """A point estimate with its bootstrap interval; ``n`` is the number of tasks."""

    estimate: float
    low: float
    high: float
    n: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def contains(self, value: float) -> bool:
        return self.low - 1e-12 <= value <= self.high + 1e-12


NAN_INTERVAL = Interval(math.nan, math.nan, math.nan, 0)


def bootstrap_means(values: Sequence[float] | np.ndarray, *, n_resamples: int = DEFAULT_RESAMPLES,
                    rng: np.random.Generator | None = None) -> np.ndarray:
    """``n_resamples`` bootstrap replicates of the mean of ``values``."""
    x = np.asarray(values, dtype=float)
    n = x.size
    rng = rng or np.random.default_rng(0)
    if n == 0:
        return np.full(n_resamples, np.nan)
    uniq, counts = np.unique(x, return_counts=True)
    if uniq.size == 1:
        return np.full(n_resamples, float(uniq[0]))
    if uniq.size <= _MULTINOMIAL_MAX_UNIQUE:
        draws = rng.multinomial(n, counts / n, size=n_resamples)
        means: np.ndarray = draws @ uniq / n
        return means
    idx = rng.integers(0, n, (n_resamples, n))
    means = x[idx].mean(axis=1)
    return means


def bootstrap_ci(values: Sequence[float] | np.ndarray, *, confidence: float = DEFAULT_CONFIDENCE,
                 n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0, key: Hashable = None,
                 rng: np.random.Generator | None = None) -> Interval:
    """Percentile bootstrap interval for the mean of ``values`` (one value per task)."""
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return NAN_INTERVAL
    reps = bootstrap_means(x, n_resamples=n_resamples, rng=rng or rng_for(seed, key))
    alpha = (1 - confidence) / 2
    low, high = np.percentile(reps, [100 * alpha, 100 * (1 - alpha)])
    return Interval(float(x.mean()), float(low), float(high), int(x.size))


def paired_bootstrap(a: Mapping[Any, float], b: Mapping[Any, float], *,
                     confidence: float = DEFAULT_CONFIDENCE, n_resamples: int = DEFAULT_RESAMPLES,
                     seed: int = 0, key: Hashable = None) -> Interval:
    """Paired task bootstrap of ``mean(a) - mean(b)`` over the tasks both arms share."""
    common = sorted(set(a) & set(b), key=str)
    diffs = np.array([float(a[t]) - float(b[t]) for t in common], dtype=float)
    return bootstrap_ci(diffs, confidence=confidence, n_resamples=n_resamples, seed=seed, key=key)


# -- tables of episodes -------------------------------------------------------

def _records(df: Any) -> list[dict[str, Any]]:
    """Rows of a DataFrame (or an iterable of mappings) as dicts."""
    if hasattr(df, "to_dict"):  # column by column (tolist: native values), far faster than to_dict("records")
        names = [str(c) for c in df.columns]
        columns = [df[c].tolist() for c in df.columns]
        return [dict(zip(names, values, strict=True)) for values in zip(*columns, strict=True)]
    return [dict(r) for r in df]


def task_success(rows: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """task id -> mean success over that task's episodes."""
    sums: dict[str, list[float]] = {}
    for r in rows:
        s = sums.setdefault(str(r["task_id"]), [0.0, 0.0])
        s[0] += float(bool(r["success"]))
        s[1] += 1
    return {t: ok / n for t, (ok, n) in sums.items()}


#: the last DataFrame grouped and its groups: a report groups the same frame in every section
_LAST_GROUPED: list[Any] = []


def _forget(groups_id: int) -> None:
    if len(_LAST_GROUPED) == 3 and id(_LAST_GROUPED[2]) == groups_id:
        _LAST_GROUPED.clear()


def group_rows(df: Any) -> dict[CellKey, list[dict[str, Any]]]:
    """Rows grouped by cell (model, variant, control, condition), in first-appearance order.
    The groups of a DataFrame are kept for the next call on the same, unchanged frame (same
    object, shape and columns); callers read them and never change them."""
    frame = hasattr(df, "to_dict")
    stamp = (df.shape, tuple(df.columns)) if frame else None
    if frame and _LAST_GROUPED and _LAST_GROUPED[0]() is df and _LAST_GROUPED[1] == stamp:
        cached: dict[CellKey, list[dict[str, Any]]] = _LAST_GROUPED[2]
        return cached
    groups: dict[CellKey, list[dict[str, Any]]] = {}
    for r in _records(df):
        key = (str(r["model"]), str(r["variant"]), str(r["control"]), str(r["condition"]))
        groups.setdefault(key, []).append(r)
    if frame:
        _LAST_GROUPED[:] = [weakref.ref(df), stamp, groups]
        weakref.finalize(df, _forget, id(groups))  # the groups go with the frame
    return groups


@dataclass
class CellTasks:
    """One cell's episodes reduced to what its statistics read: per task ``[successes,
    episodes]`` in the order tasks first appear, the episodes in all, and failure-mode counts."""

    tasks: dict[str, list[int]] = field(default_factory=dict)
    episodes: int = 0
    failure_modes: dict[str, int] = field(default_factory=dict)

    def add(self, task_id: str, successes: int, episodes: int, failure_mode: Any = None) -> None:
        """Count ``episodes`` episodes of ``task_id`` (``successes`` of them successful), all
        ending in ``failure_mode`` (None or NaN: none)."""
        t = self.tasks.get(task_id)
        if t is None:
            self.tasks[task_id] = [successes, episodes]
        else:
            t[0] += successes
            t[1] += episodes
        self.episodes += episodes
        if failure_mode and not (isinstance(failure_mode, float) and math.isnan(failure_mode)):
            m = str(failure_mode)
            self.failure_modes[m] = self.failure_modes.get(m, 0) + episodes

    def per_task(self) -> dict[str, float]:
        """Task id -> mean success over its episodes (as :func:`task_success`)."""
        return {t: ok / n for t, (ok, n) in self.tasks.items()}


class CellTable(dict[CellKey, CellTasks]):
    """Cell key -> :class:`CellTasks`, in the order cells first appear."""


def cell_table(df: Any) -> CellTable:
    """Episodes (a DataFrame or mappings with model, variant, control, condition, task_id,
    success and optionally failure_mode) reduced per cell; a :class:`CellTable` is returned as
    it is."""
    if isinstance(df, CellTable):
        return df
    out = CellTable()
    for key, rows in group_rows(df).items():
        cell = out[key] = CellTasks()
        for r in rows:
            cell.add(str(r["task_id"]), int(bool(r["success"])), 1, r.get("failure_mode"))
    return out


def cell_success(df: Any) -> dict[CellKey, float]:
    """Cell key -> success rate (mean over tasks of per-task mean success), no intervals."""
    out = {}
    for key, cell in cell_table(df).items():
        per_task = cell.per_task()
        out[key] = sum(per_task.values()) / len(per_task)
    return out


@dataclass
class CellStats:
    """One (model, variant, control, condition) cell of the grid."""

    model: str
    variant: str
    control: str
    condition: str
    n: int                      # distinct tasks
    episodes: int
    success: float
    ci_low: float
    ci_high: float
    failure_modes: dict[str, int] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.model, self.variant, self.control, self.condition)

    @property
    def dominant_failure(self) -> str | None:
        """The most frequent failure mode (ties go to the earlier Table-2 rule)."""
        from .scoring import FAILURE_ORDER

        if not self.failure_modes:
            return None
        order = {m.value: i for i, m in enumerate(FAILURE_ORDER)}
        return min(self.failure_modes, key=lambda m: (-self.failure_modes[m], order.get(m, 99), m))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["dominant_failure"] = self.dominant_failure
        return d


def cell_stats(df: Any, *, seed: int = 0, n_resamples: int = DEFAULT_RESAMPLES,
               confidence: float = DEFAULT_CONFIDENCE) -> list[CellStats]:
    """Success with a task-bootstrap interval and failure-mode counts for every cell."""
    from .scoring import FAILURE_ORDER

    order = {m.value: i for i, m in enumerate(FAILURE_ORDER)}
    out = []
    for key, cell in cell_table(df).items():
        per_task = cell.per_task()
        ci = bootstrap_ci(list(per_task.values()), confidence=confidence, n_resamples=n_resamples, seed=seed,
                          key=("cell", *key))
        modes = dict(sorted(cell.failure_modes.items(), key=lambda kv: (order.get(kv[0], 99), kv[0])))
        out.append(CellStats(*key, n=len(per_task), episodes=cell.episodes, success=ci.estimate, ci_low=ci.low,
                             ci_high=ci.high, failure_modes=modes))
    return out


@dataclass
class Difference:
    """A paired difference ``a - b`` (e.g. variant - native, model A - model B)."""

    kind: str                   # "variant_vs_native" | "model_vs_model" | "lenient_vs_strict"
    a: dict[str, str]           # the cell keys of arm a
    b: dict[str, str]
    n: int                      # common tasks
    success_a: float
    success_b: float
    diff: float
    ci_low: float
    ci_high: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _difference(kind: str, a_key: Mapping[str, str], a_cell: CellTasks, b_key: Mapping[str, str],
                b_cell: CellTasks, *, seed: int, n_resamples: int, confidence: float) -> Difference:
    ta, tb = a_cell.per_task(), b_cell.per_task()
    common = set(ta) & set(tb)
    ci = paired_bootstrap(ta, tb, confidence=confidence, n_resamples=n_resamples, seed=seed,
                          key=(kind, tuple(a_key.items()), tuple(b_key.items())))
    sa = float(np.mean([ta[t] for t in common])) if common else math.nan
    sb = float(np.mean([tb[t] for t in common])) if common else math.nan
    return Difference(kind, dict(a_key), dict(b_key), len(common), sa, sb, ci.estimate, ci.low, ci.high)


def variant_differences(df: Any, *, baseline: str = "native", seed: int = 0,
                        n_resamples: int = DEFAULT_RESAMPLES,
                        confidence: float = DEFAULT_CONFIDENCE) -> list[Difference]:
    """Every variant minus ``baseline`` for each (model, control, condition), paired over tasks; where a
    study played the artifact's renderings (``paper.<name>``, the paper's protocol) and not ``baseline``
    itself, the rendering of ``baseline`` is its baseline."""
    groups = cell_table(df)
    out = []
    for (model, variant, control, condition), rows in groups.items():
        found = next(((name, groups[key]) for name in (baseline, f"paper.{baseline}")
                      if (key := (model, name, control, condition)) in groups), None)
        if found is None or variant == found[0]:
            continue
        name, base = found
        a = dict(zip(CELL_KEYS, (model, variant, control, condition), strict=True))
        b = dict(a, variant=name)
        out.append(_difference("variant_vs_native", a, rows, b, base, seed=seed, n_resamples=n_resamples,
                               confidence=confidence))
    return out


def model_differences(df: Any, *, seed: int = 0, n_resamples: int = DEFAULT_RESAMPLES,
                      confidence: float = DEFAULT_CONFIDENCE) -> list[Difference]:
    """Model A minus model B on each (variant, control, condition), for every pair of models
    (A before B in order of first appearance), paired over tasks."""
    groups = cell_table(df)
    models: list[str] = list(dict.fromkeys(k[0] for k in groups))
    out = []
    for i, ma in enumerate(models):
        for mb in models[i + 1:]:
            for (model, variant, control, condition), rows in groups.items():
                if model != ma:
                    continue
                other = groups.get((mb, variant, control, condition))
                if not other:
                    continue
                a = dict(zip(CELL_KEYS, (ma, variant, control, condition), strict=True))
                out.append(_difference("model_vs_model", a, rows, dict(a, model=mb), other, seed=seed,
                                       n_resamples=n_resamples, confidence=confidence))
    return out


def schema_form_gap(df: Any, *, seed: int = 0, n_resamples: int = DEFAULT_RESAMPLES,
                    confidence: float = DEFAULT_CONFIDENCE) -> list[Difference]:
    """Per (model, variant, condition): lenient minus strict success, paired over tasks (Figure 5)."""
    groups = cell_table(df)
    out = []
    for (model, variant, control, condition), rows in groups.items():
        if control != "lenient":
            continue
        strict = groups.get((model, variant, "strict", condition))
        if not strict:
            continue
        a = dict(zip(CELL_KEYS, (model, variant, "lenient", condition), strict=True))
        out.append(_difference("lenient_vs_strict", a, rows, dict(a, control="strict"), strict, seed=seed,
                               n_resamples=n_resamples, confidence=confidence))
    return out


# -- difficulty prediction ----------------------------------------------------

@dataclass
class SampleEstimate:
    """A variant's success estimated from a random sample of its tasks, against the full score."""

    model: str
    variant: str
    control: str
    condition: str
    n_sample: int
    n_full: int
    full: float
    estimate: float
    ci_low: float
    ci_high: float
    error: float                # estimate - full
    covered: bool               # full score inside the sample's interval
    #: over ``repeats`` independent draws: mean |error| and the share of intervals covering the full score
    mean_abs_error: float
    coverage: float
    compliance: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class PredictionSummary:
    """How well a predictor tracks full-set success across the variants of one
    (model, control, condition): errors, interval coverage and correlations."""

    model: str
    control: str
    condition: str
    predictor: str              # "sample" | "compliance"
    variants: int
    mae: float                  # mean |prediction - full| across variants
    max_abs_error: float
    coverage: float | None      # share of variants whose interval covers the full score (sample only)
    repeat_coverage: float | None  # the same, averaged over all repeats
    pearson: float | None
    spearman: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def rankdata(x: Sequence[float] | np.ndarray) -> np.ndarray:
    """Ranks starting at 1, ties get their average rank (as ``scipy.stats.rankdata``)."""
    a = np.asarray(x, dtype=float)
    order = np.argsort(a, kind="mergesort")
    ranks = np.empty(a.size, dtype=float)
    sorted_a = a[order]
    i = 0
    while i < a.size:
        j = i
        while j + 1 < a.size and sorted_a[j + 1] == sorted_a[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def pearson(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float | None:
    """Pearson correlation; None when undefined (fewer than 3 points or a constant series)."""
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if a.size < 3 or np.std(a) == 0 or np.std(b) == 0:
        return None
    return float(np.corrcoef(a, b)[0, 1])


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman rank correlation (Pearson on average ranks); None when undefined."""
    if len(x) < 3:
        return None
    return pearson(rankdata(x), rankdata(y))


def _corr(x: Sequence[float], y: Sequence[float]) -> tuple[float | None, float | None]:
    return pearson(x, y), spearman(x, y)


def sample_estimate(per_task: Mapping[str, float], n: int, *, seed: int = 0, key: Hashable = None,
                    repeats: int = 200, n_resamples: int = 2000, confidence: float = DEFAULT_CONFIDENCE,
                    cache: dict[Any, Interval] | None = None) -> tuple[Interval, float, float]:
    """Estimate mean success from a random sample of ``n`` tasks (without replacement).

    Returns the first draw's estimate and bootstrap interval, and over ``repeats`` draws
    the mean absolute error against the full mean and the share of covering intervals.
    A sample's interval depends only on its multiset of values, so intervals are cached
    by it (``cache`` may be shared between calls)."""
    tasks = sorted(per_task)
    values = np.array([per_task[t] for t in tasks], dtype=float)
    full = float(values.mean())
    k = min(n, len(tasks))
    rng = rng_for(seed, ("sample", key))
    cache = {} if cache is None else cache
    first: Interval | None = None
    errors, covers = [], []
    for _ in range(max(1, repeats)):
        pick = values[rng.choice(len(values), size=k, replace=False)]
        uniq, counts = np.unique(pick, return_counts=True)
        ck = (tuple(uniq.tolist()), tuple(counts.tolist()), n_resamples, confidence)
        ci = cache.get(ck)
        if ci is None:
            ci = cache[ck] = bootstrap_ci(pick, confidence=confidence, n_resamples=n_resamples, seed=seed,
                                          key=("sample-ci", ck))
        first = first or ci
        errors.append(abs(ci.estimate - full))
        covers.append(ci.contains(full))
    assert first is not None
    return first, float(np.mean(errors)), float(np.mean(covers))


def difficulty_prediction(df: Any, *, n: int = 36, seed: int = 0, repeats: int = 200,
                          n_resamples: int = 2000, confidence: float = DEFAULT_CONFIDENCE,
                          compliance: Mapping[CellKey, float] | None = None,
                          ) -> tuple[list[SampleEstimate], list[PredictionSummary]]:
    """For every cell: estimate success from a random sample of ``n`` tasks and compare it
    with the full-set score; per (model, control, condition), summarise the error and
    interval coverage across variants, and how well probe compliance (keyed like cells)
    predicts full success."""
    compliance = compliance or {}
    cache: dict[Any, Interval] = {}
    estimates: list[SampleEstimate] = []
    for key, cell in cell_table(df).items():
        per_task = cell.per_task()
        if not per_task:
            continue
        ci, mae, cov = sample_estimate(per_task, n, seed=seed, key=key, repeats=repeats,
                                       n_resamples=n_resamples, confidence=confidence, cache=cache)
        full_mean = float(np.mean(list(per_task.values())))
        estimates.append(SampleEstimate(*key, n_sample=ci.n, n_full=len(per_task), full=full_mean, estimate=ci.estimate,
                                        ci_low=ci.low, ci_high=ci.high, error=ci.estimate - full_mean,
                                        covered=ci.contains(full_mean), mean_abs_error=mae, coverage=cov,
                                        compliance=compliance.get(key)))
    summaries: list[PredictionSummary] = []
    by_group: dict[tuple[str, str, str], list[SampleEstimate]] = {}
    for e in estimates:
        by_group.setdefault((e.model, e.control, e.condition), []).append(e)
    for (model, control, condition), items in by_group.items():
        full = [e.full for e in items]
        est = [e.estimate for e in items]
        p, s = _corr(est, full)
        summaries.append(PredictionSummary(
            model, control, condition, "sample", len(items),
            mae=float(np.mean([abs(e.error) for e in items])), max_abs_error=float(max(abs(e.error) for e in items)),
            coverage=float(np.mean([e.covered for e in items])),
            repeat_coverage=float(np.mean([e.coverage for e in items])), pearson=p, spearman=s))
        with_c = [e for e in items if e.compliance is not None]
        if with_c:
            comp = [float(e.compliance) for e in with_c if e.compliance is not None]
            fc = [e.full for e in with_c]
            p, s = _corr(comp, fc)
            errs = [abs(c - f) for c, f in zip(comp, fc, strict=True)]
            summaries.append(PredictionSummary(model, control, condition, "compliance", len(with_c),
                                               mae=float(np.mean(errs)), max_abs_error=float(max(errs)),
                                               coverage=None, repeat_coverage=None, pearson=p, spearman=s))
    return estimates, summaries


def normal_quantile(confidence: float) -> float:
    """The two-sided standard normal quantile of ``confidence`` (1.96 at 0.95)."""
    from statistics import NormalDist

    return NormalDist().inv_cdf(0.5 + confidence / 2)


def correlation_interval(r: float, n: int, *, kind: str = "pearson",
                         confidence: float = DEFAULT_CONFIDENCE) -> Interval:
    """Fisher-z interval of a correlation ``r`` over ``n`` pairs (NaN when n < 4 or r is NaN)."""
    if n < 4 or math.isnan(r):
        return Interval(r, math.nan, math.nan, n)
    if abs(r) >= 1:
        return Interval(r, r, r, n)
    se = math.sqrt((1.06 if kind == "spearman" else 1.0) / (n - 3))
    z = math.atanh(r)
    half = normal_quantile(confidence) * se
    return Interval(r, math.tanh(z - half), math.tanh(z + half), n)


def interval_dict(iv: Interval) -> dict[str, Any]:
    """An interval as JSON (NaN as null)."""
    def num(x: float) -> float | None:
        return None if isinstance(x, float) and math.isnan(x) else x
    return {"estimate": num(iv.estimate), "low": num(iv.low), "high": num(iv.high), "n": iv.n}


__all__ = ["CELL_KEYS", "CellKey", "CellStats", "CellTable", "CellTasks", "Difference", "Interval", "PredictionSummary", "SampleEstimate",
           "bootstrap_ci", "bootstrap_means", "cell_stats", "correlation_interval", "interval_dict", "normal_quantile", "cell_success", "cell_table", "difficulty_prediction", "model_differences",
           "paired_bootstrap", "pearson", "rankdata", "rng_for", "spearman", "sample_estimate", "schema_form_gap", "task_success",
           "variant_differences"]
