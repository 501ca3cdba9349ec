"""The K sweep as the authors ran it (PROTOCOL.md 6): which ranking cuts the clusters, and δ normalised.

- **Ranking** (:func:`ranking_rates`): the K tools of ``b2w`` / ``w2b`` are taken from a *named* base
  run: ``own`` (the model's own base run under the same settings, this project's default), ``paper``
  (the authors' Qwen3-235B cluster-7 ranking, 7.1 > 7.4 > 7.2 > 7.3 > 7.5: :data:`PAPER_RANKING`),
  ``model:SPEC`` (another model's stored base run under the same settings) or ``file:PATH`` (JSON
  ``{cluster id: [rate of each canonical API]}``). Under ``--paper`` the default is ``paper``, on the
  authors' cluster (:data:`PAPER_CLUSTER`, 7) only.
- **Normalisation** (:func:`k_sweep_rows`): δ over K APIs and K positions can reach at most 1 - 1/K,
  so the authors divide by it; each row gives the raw and the normalised δ, as mean and sample
  standard deviation (ddof 1, as the figure) over runs, in [0, 1] (the figure shows %).

Not reproduced: the authors' random orders were unseeded draws (listed in PROTOCOL.md 6) with one
subset per run; ``random`` here draws one seeded subset per K for every run.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import ToolbiasError
from .metrics import BiasReport
from .records import GroupKey
from .types import Benchmark

PAPER_CLUSTER = "7"
#: the authors' best-to-worst order of cluster 7 (0-based canonical indices: 7.1, 7.4, 7.2, 7.3, 7.5)
PAPER_RANKING: dict[str, tuple[int, ...]] = {PAPER_CLUSTER: (0, 3, 1, 2, 4)}
RANK_SOURCES = ("own", "paper", "model:SPEC", "file:PATH")
_K_NAME = re.compile(r"\[k=(\d+),(\w+)(?:,by=[^\]]*)?\]")


def rates_of_ranking(ranking: Mapping[str, Sequence[int]]) -> dict[str, tuple[float, ...]]:
    """Scores that sort like a ranking (best first): K - place, per canonical index."""
    out = {}
    for c, order in ranking.items():
        scores = [0.0] * len(order)
        for place, i in enumerate(order):
            scores[i] = float(len(order) - place)
        out[c] = tuple(scores)
    return out


def paper_clusters(bench: Benchmark) -> list[str]:
    """The authors' K-sweep cluster, checked to be in the benchmark with its five tools."""
    ids = [c.id for c in bench.clusters]
    if PAPER_CLUSTER not in ids or bench.cluster(PAPER_CLUSTER).k != len(PAPER_RANKING[PAPER_CLUSTER]):
        raise ToolbiasError(f"the paper's K sweep runs on cluster {PAPER_CLUSTER} (Sentiment Analysis), which this "
                            "benchmark lacks", where=f"benchmark '{bench.name}'",
                            fix="use --benchmark biasbusters:DIR, or --k-rank own/file:PATH with --clusters")
    return [PAPER_CLUSTER]


def rank_tag(source: str) -> str:
    """The ranking's tag in the K benchmarks' names (``[k=K,b2w,by=TAG]``; "" for ``own``), so subsets cut by
    different rankings never share a result group."""
    if source == "own":
        return ""
    kind, _, arg = source.partition(":")
    if kind == "file":
        import hashlib

        try:
            digest = hashlib.sha256(Path(arg).read_bytes()).hexdigest()[:8]
        except OSError:
            digest = "missing"
        return f"file:{Path(arg).name}@{digest}"
    return arg if kind == "model" else source


def ranking_rates(source: str, *, own: Any = None, other: Any = None,
                  bench: Benchmark | None = None) -> tuple[dict[str, tuple[float, ...]] | None, str]:
    """Rates that rank each cluster's tools, and a line naming where they come from.

    ``own`` / ``other``: callables giving the stored base rates of this model / of a model spec (None
    when absent); ``file:PATH`` is read here."""
    kind, _, arg = source.partition(":")
    if source == "paper":
        rates = rates_of_ranking(PAPER_RANKING)
        if bench is not None:
            missing = [c.id for c in bench.clusters if c.id not in rates]
            if missing:
                raise ToolbiasError(f"the paper's ranking covers cluster {PAPER_CLUSTER} only, not {missing}",
                                    fix=f"add --clusters {PAPER_CLUSTER}, or use --k-rank own")
        return rates, "the authors' Qwen3-235B cluster-7 ranking (7.1 > 7.4 > 7.2 > 7.3 > 7.5)"
    if source == "own":
        found = own() if own else None
        if found is None:
            raise ToolbiasError("--k-rank own needs this model's base run (same settings, same store)",
                                fix="run `select run` without --k first, or use --k-rank paper/model:SPEC/file:PATH")
        return dict(found), "this model's own base run"
    if kind == "model" and arg:
        theirs = other(arg) if other else None
        if theirs is None:
            raise ToolbiasError(f"no stored base run of {arg} under these settings",
                                fix="run it first into the same store, or use --k-rank file:PATH")
        return dict(theirs), f"the base run of {arg}"
    if kind == "file" and arg:
        try:
            data = json.loads(Path(arg).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ToolbiasError(f"cannot read the ranking: {exc}", where=arg,
                                fix="give a JSON object {cluster id: [rate of each canonical API]}") from None
        if not isinstance(data, dict) or not all(isinstance(v, list) for v in data.values()):
            raise ToolbiasError("the ranking file is not {cluster id: [rates]}", where=arg)
        return {str(c): tuple(float(x) for x in v) for c, v in data.items()}, f"the rates in {arg}"
    raise ToolbiasError(f"unknown ranking '{source}'", fix=f"use {', '.join(RANK_SOURCES)}")


def k_sweep_rows(reports: Mapping[GroupKey, BiasReport] | Mapping[str, BiasReport]) -> list[dict[str, Any]]:
    """One row per K-subset report: K, order, raw and normalised (÷ (1 - 1/K)) δ, mean and ddof-1 std over runs."""
    rows = []
    for key, rep in reports.items():
        name = key.benchmark if isinstance(key, GroupKey) else str(key)
        m = _K_NAME.search(name) or _K_NAME.search(rep.label or "")
        if not m:
            continue
        k, order = int(m.group(1)), m.group(2)
        top = 1 - 1 / k
        row: dict[str, Any] = {"k": k, "order": order, "max": top, "n_runs": rep.n_runs}
        for what in ("delta_api", "delta_pos", "delta_model"):
            per_run = [float(v[what]) for v in rep.per_run.values() if not math.isnan(float(v[what]))]
            mean = getattr(rep, what)
            row[what] = mean
            row[f"{what}_norm"] = mean / top
            row[f"{what}_norm_std"] = statistics.stdev([x / top for x in per_run]) if len(per_run) > 1 else 0.0
        rows.append(row)
    return sorted(rows, key=lambda r: (r["order"], r["k"]))


__all__ = ["PAPER_CLUSTER", "PAPER_RANKING", "RANK_SOURCES", "k_sweep_rows", "paper_clusters", "rank_tag",
           "ranking_rates",
           "rates_of_ranking"]
