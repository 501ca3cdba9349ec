"""The selection study API the CLI calls: run a setting (or a sweep), perturb, mitigate, show a prompt.

Every function takes a model (a :class:`~toolbias.providers.base.ModelAPI`), a
:class:`~toolbias.selection.types.Benchmark` and :class:`~toolbias.selection.settings.RunSettings`,
stores records in a :class:`~toolbias.selection.store.SelectionStore` and returns records and
reports; nothing here prints. :func:`in_session` checks the models, runs a coroutine and closes
them in one event loop (their HTTP clients are bound to it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from ..errors import ToolbiasError
from ..providers.base import ModelAPI
from .metrics import BiasReport
from .mitigate import arun_mitigation, score_sets
from .perturb import TARGETED, PerturbationEffect, apply_condition, perturbation_effects, perturbation_label
from .present import Request, build, resolve_prompt
from .records import SelectionRecord, Status
from .runner import RunSummary, SelectionRunner, arun_selection, report_of
from .settings import RunSettings
from .store import SelectionStore
from .types import Benchmark, rotations

T = TypeVar("T")
OnRecord = Callable[[SelectionRecord], None]


def in_session(models: Sequence[ModelAPI], body: Callable[[], Awaitable[T]]) -> T:
    """Check the models, run ``body`` and close the models, all in one event loop."""
    async def go() -> T:
        try:
            for m in models:
                await m.check()
            return await body()
        finally:
            for m in models:
                await m.aclose()

    return asyncio.run(go())


def subset(bench: Benchmark, *, queries: int | None = None, clusters: Sequence[str] | None = None) -> Benchmark:
    """The first ``queries`` queries of the given clusters (all when None)."""
    return bench.limit_queries(queries).select_clusters(list(clusters) if clusters else None)


def trial_request(bench: Benchmark, cluster: str, query: int, rotation: int, settings: RunSettings) -> Request:
    """The request of one trial: query ``query`` (0-based) of ``cluster`` in cyclic rotation ``rotation``."""
    c = bench.cluster(cluster)
    if not 0 <= query < len(c.queries):
        raise ToolbiasError(f"query {query} outside 0..{len(c.queries) - 1}", where=f"cluster '{c.id}'")
    if not 0 <= rotation < c.k:
        raise ToolbiasError(f"rotation {rotation} outside 0..{c.k - 1}", where=f"cluster '{c.id}'")
    order = rotations(c.k)[rotation]
    return build(c.queries[query], c.presented(order), settings.presentation,
                 prompt=resolve_prompt(settings.presentation, settings.prompt),
                 tool_choice=settings.effective_tool_choice)


def base_rates(store: SelectionStore, model: ModelAPI | str, bench: Benchmark, settings: RunSettings, *,
               same_backbone: bool = True) -> Mapping[str, Sequence[float]] | None:
    """Per-cluster API rates of the model's (or model spec's) base condition under the same settings (None when
    absent); ``same_backbone=False``: whichever paper backbone it ran under."""
    prompt = resolve_prompt(settings.presentation, settings.prompt)
    spec = model if isinstance(model, str) else model.spec
    recs = [r for r in store.records(model=spec, benchmark=bench.name, condition="base",
                                     presentation=settings.presentation)
            if r.temperature == settings.temperature and r.top_p == settings.top_p
            and r.tool_choice == settings.effective_tool_choice and r.prompt == prompt.name
            and (r.backbone == settings.backbone_label or not same_backbone)]
    if not any(r.ok for r in recs):
        return None
    return {c: v["api_rates"] for c, v in report_of(recs).per_cluster.items()}


async def arun(model: ModelAPI, bench: Benchmark, settings: RunSettings, *, store: SelectionStore,
               condition: str = "base", concurrency: int = 8, on_record: OnRecord | None = None,
               rates: Mapping[str, Sequence[float]] | None = None,
               order: str = "cyclic") -> tuple[list[SelectionRecord], RunSummary]:
    """Run one setting under one condition (``base``, a perturbation or a file condition); ``order="random"``
    shows each query in independent seeded shuffles instead of the cyclic rotations (benchmark name gets
    ``[random-order]``, so the two never share a result group)."""
    if order == "random":
        bench = bench.with_clusters(bench.clusters, name=f"{bench.name}[random-order]")
    if paper_replay(condition, settings):
        return await _arun_paper_condition(model, bench, settings, condition, store=store, concurrency=concurrency,
                                           on_record=on_record, order=order)
    if condition.partition(":")[0] in TARGETED and ":" not in condition and rates is None:
        rates = base_rates(store, model, bench, settings)
    perturbed = apply_condition(bench, condition, seed=settings.seed or 0, base_rates=rates)
    return await arun_selection(model, perturbed, runs=settings.runs, presentation=settings.presentation,
                                condition=perturbation_label(condition), config=settings.config(),
                                tool_choice=settings.effective_tool_choice, concurrency=concurrency, store=store,
                                on_record=on_record, prompt=resolve_prompt(settings.presentation, settings.prompt),
                                order=order, backbone=settings.backbone_label)


def paper_replay(condition: str, settings: RunSettings) -> bool:
    """Under ``--paper`` (a backbone is set) a built-in perturbation replays the authors' files
    (:mod:`.paper_perturb`) instead of toolbias's seeded variant."""
    from .paper_perturb import PLANS

    return settings.backbone is not None and condition in PLANS


def condition_name(condition: str, settings: RunSettings) -> str:
    """The condition as records store it: ``<condition>[paper]`` for the authors' replays."""
    from .paper_perturb import paper_label

    return paper_label(condition) if paper_replay(condition, settings) else perturbation_label(condition)


async def _arun_paper_condition(model: ModelAPI, bench: Benchmark, settings: RunSettings, condition: str, *,
                                store: SelectionStore, concurrency: int, on_record: OnRecord | None,
                                order: str) -> tuple[list[SelectionRecord], RunSummary]:
    """Each run on the benchmark as the authors showed it in that run (their per-run mapping files)."""
    from dataclasses import replace as _replace

    from .paper_perturb import paper_label, paper_runs
    from .runner import plan_trials

    records: list[SelectionRecord] = []
    total = RunSummary()
    for run, shown in paper_runs(bench, condition, settings.runs):
        runner = SelectionRunner(model, benchmark_name=shown.name, presentation=settings.presentation,
                                 condition=paper_label(condition), config=settings.config(),
                                 tool_choice=settings.effective_tool_choice, concurrency=concurrency, store=store,
                                 on_record=on_record, prompt=resolve_prompt(settings.presentation, settings.prompt),
                                 benchmark=shown, order=order, backbone=settings.backbone_label)
        trials = [_replace(t, run=run) for t in plan_trials(shown, 1, order=order, seed=settings.seed or 0)]
        records += await runner.run(trials)
        for k, v in runner.summary.to_dict().items():
            setattr(total, k, getattr(total, k) + v)
    return records, total


K_ORDERS = ("b2w", "w2b", "random")


def k_subsets(bench: Benchmark, ks: Sequence[int], kind: str, *, rates: Mapping[str, Sequence[float]] | None = None,
              seed: int = 0, rank_tag: str = "") -> list[Benchmark]:
    """The K sweep's benchmarks (PROTOCOL.md 6): each cluster cut to K tools, named ``<name>[k=K,<kind>]``.

    ``b2w``: the K most-selected tools (best to worst, by ``rates``), ``w2b``: the K least-selected (worst to
    best), ``random``: K tools drawn with ``seed`` in a random order. The K tools are then shown in all K
    cyclic rotations; records index the K tools (δ is over K APIs and K positions). ``rank_tag`` names a ranking
    other than the model's own base run (``[k=K,<kind>,by=<tag>]``, :func:`.ksweep.rank_tag`)."""
    import random as _random

    from .perturb import ranked_tools

    if kind not in K_ORDERS:
        raise ToolbiasError(f"unknown K-subset order '{kind}'", fix=f"use {', '.join(K_ORDERS)}")
    out = []
    for k in ks:
        clusters = []
        for c in bench.clusters:
            if not 2 <= k <= c.k:
                raise ToolbiasError(f"K={k} outside 2..{c.k}", where=f"cluster '{c.id}'")
            if kind == "random":
                idx = _random.Random(f"{seed}:{c.id}:{k}").sample(range(c.k), k)
            else:
                ranked = ranked_tools(c, rates, f"K subsets ({kind})")
                idx = ranked[:k] if kind == "b2w" else list(reversed(ranked))[:k]
            clusters.append(c.with_tools([c.tools[i] for i in idx]))
        by = f",by={rank_tag}" if rank_tag and kind != "random" else ""
        out.append(bench.with_clusters(clusters, name=f"{bench.name}[k={k},{kind}{by}]"))
    return out


def planned(bench: Benchmark, settings: RunSettings) -> int:
    return settings.runs * sum(len(c.queries) * c.k for c in bench.clusters)


@dataclass
class SweepGroup:
    """One result group of a sweep: a benchmark (cut to K, or whole) under one setting."""

    bench: Benchmark
    settings: RunSettings
    label: str
    records: list[SelectionRecord]
    summary: RunSummary


#: ``(label, planned trials)`` -> a context yielding the per-record callback (a progress bar)
GroupProgress = Callable[[str, int], AbstractContextManager[Callable[[SelectionRecord], None] | None]]


def _no_progress(label: str, total: int) -> AbstractContextManager[None]:
    return nullcontext()


def run_sweep(model: ModelAPI, bench: Benchmark, settings: RunSettings, *, store: SelectionStore,
              condition: str = "base", temperatures: Sequence[float] = (), top_ps: Sequence[float] = (),
              ks: Sequence[int] = (), k_order: str = "b2w", order: str = "cyclic", concurrency: int = 8,
              progress: GroupProgress | None = None,
              on_group: Callable[[SweepGroup], None] | None = None, k_rank: str | None = None,
              on_note: Callable[[str], None] | None = None) -> list[SweepGroup]:
    """``select run``: every (K-cut benchmark x temperature x top-p) group, each run (resuming from
    ``store``) in its own session; ``ks`` cut each cluster to K tools ranked by a named base run
    (``k_rank``, :func:`.ksweep.ranking_rates`: the model's own by default, under ``--paper`` the authors'
    Qwen3-235B cluster-7 ranking on cluster 7 only), no ``ks`` runs the whole benchmark. Groups come back
    in run order; ``on_note`` hears where the ranking came from."""
    sweep = settings.sweep(temperatures=temperatures, top_ps=top_ps)
    progress = progress or _no_progress
    benches = [bench]
    if ks:
        from . import ksweep

        rank = k_rank or ("paper" if settings.backbone is not None else "own")
        rates = None
        if k_order != "random":
            if rank == "paper":
                bench = subset(bench, clusters=ksweep.paper_clusters(bench))
            rates, source = ksweep.ranking_rates(
                rank, bench=bench, own=lambda: base_rates(store, model, bench, settings),
                other=lambda spec: base_rates(store, spec, bench, settings, same_backbone=False))
            if on_note is not None:
                on_note(f"K tools ranked by {source}")
        benches = k_subsets(bench, list(ks), k_order, rates=rates, seed=settings.seed or 0,
                            rank_tag=ksweep.rank_tag(rank))
    groups: list[SweepGroup] = []
    for b in benches:
        for one in sweep:
            label = f"{model.spec} {b.name} {one.presentation}/{condition} T={one.temperature:g}"
            with progress(label, planned(b, one)) as on_record:
                records, summary = in_session([model], partial(
                    arun, model, b, one, store=store, condition=condition, concurrency=concurrency,
                    on_record=on_record, order=order))
            group = SweepGroup(b, one, label, records, summary)
            groups.append(group)
            if on_group is not None:
                on_group(group)
    return groups


@dataclass
class PerturbationStudy:
    base: BiasReport
    effects: list[PerturbationEffect]
    summaries: dict[str, RunSummary] = field(default_factory=dict)


def expand_conditions(spec: str) -> list[str]:
    """``all`` (every built-in condition), comma lists, and file conditions (``names:FILE``), combinable."""
    from .perturb import CONDITIONS

    out: list[str] = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        for cond in (CONDITIONS if part == "all" else (part,)):
            if cond not in out:
                out.append(cond)
    if not out:
        raise ToolbiasError("no condition given", fix="use all, or a comma list of conditions")
    return out


async def aperturb(model: ModelAPI, bench: Benchmark, settings: RunSettings, conditions: Sequence[str], *,
                   store: SelectionStore, concurrency: int = 8) -> PerturbationStudy:
    """The base condition, then each condition; TV of each to the base and to uniform."""
    base_recs, base_summary = await arun(model, bench, settings, store=store, concurrency=concurrency)
    base = report_of(base_recs, label="base")
    reports: dict[str, BiasReport] = {}
    summaries = {"base": base_summary}
    for cond in conditions:
        recs, summary = await arun(model, bench, settings, store=store, condition=cond, concurrency=concurrency,
                                   rates=base.api_rates())
        summaries[condition_name(cond, settings)] = summary
        if any(r.ok for r in recs):
            reports[condition_name(cond, settings)] = report_of(recs, label=cond)
    return PerturbationStudy(base, perturbation_effects(base, reports), summaries)


@dataclass
class MitigationStudy:
    before: BiasReport
    #: None when no mitigated trial selected anything (e.g. every filter answer empty and dropped)
    after: BiasReport | None
    coverage: dict[str, Any]
    summary: RunSummary
    #: δ's before and after with intervals, position shares, coverage and filter scores
    #: (:func:`.mitigation_stats.mitigation_figures`)
    figures: dict[str, Any] = field(default_factory=dict)


async def amitigate(chooser: ModelAPI, filter_model: ModelAPI, bench: Benchmark, settings: RunSettings, *,
                    store: SelectionStore, filter_settings: RunSettings | None = None, concurrency: int = 8,
                    on_empty: str = "paper", filter_style: str = "toolbias", seed: int = 0,
                    on_record: OnRecord | None = None, pick: str = "model") -> MitigationStudy:
    """Selection bias before (the chooser picks) and after: the filter (sampled with ``filter_settings``,
    default ``settings``) keeps a subset, a uniform draw picks one, and (``pick="model"``, end to end) the
    chooser, shown only the drawn function, answers; its answer is the selection (:mod:`.mitigate`). An
    empty filter answer is handled by ``on_empty``."""
    from .mitigation_stats import mitigation_figures

    before_recs, summary = await arun(chooser, bench, settings, store=store, concurrency=concurrency,
                                      on_record=on_record)
    fs = filter_settings or settings
    picker = SelectionRunner(chooser, benchmark_name=bench.name, presentation=settings.presentation,
                             config=settings.config(), tool_choice=settings.effective_tool_choice,
                             prompt=resolve_prompt(settings.presentation, settings.prompt), benchmark=bench,
                             backbone=settings.backbone_label)
    after_recs = await arun_mitigation(filter_model, bench, runs=fs.runs, seed=seed, config=fs.config(),
                                       concurrency=concurrency, store=store, on_empty=on_empty,
                                       filter_style=filter_style, chooser=picker, on_record=on_record,
                                       pick=pick)
    before = report_of(before_recs, label=f"before ({chooser.spec})")
    how = f"+ uniform + {chooser.spec}" if pick == "model" else "+ uniform draw"
    after = report_of(after_recs, label=f"after (filter {filter_model.spec} {how})") \
        if any(r.ok for r in after_recs) else None
    return MitigationStudy(before, after, coverage(after_recs), summary,
                           mitigation_figures(before_recs, after_recs, seed=seed))


def coverage(records: Sequence[SelectionRecord]) -> dict[str, Any]:
    """How many mitigated trials the filter covered: every trial counts, empty and unparseable answers too."""
    answered = [r for r in records if r.status is not Status.ERROR]
    by_kind: dict[str, int] = {}
    for r in answered:
        kind = str(r.extra.get("filter", "kept"))
        by_kind[kind] = by_kind.get(kind, 0) + 1
    kept = by_kind.get("kept", 0)
    # every tool of a cluster serves its queries: the gold subset is the whole presented list
    golds = [frozenset(range(r.k)) for r in answered]
    preds: list[frozenset[int] | None] = [frozenset(r.extra.get("subset") or ()) if r.extra.get("filter") != "unparsed"
                                          else None for r in answered]
    quality = score_sets(golds, preds).to_dict() if answered else {}
    return {"trials": len(answered), "errors": len(records) - len(answered), "filter": by_kind,
            "coverage": kept / len(answered) if answered else 0.0, "filter_quality": quality}
