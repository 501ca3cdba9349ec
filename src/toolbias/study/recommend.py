"""Which schema suits a model? Estimate candidate variants' success on a small stratified
sample (the same tasks for each, so comparisons are paired) and rank them.

:func:`successive_halving` (``toolbias recommend``) spends the sample where it matters:
every candidate plays the first tasks of the sample, the better half goes on to play
twice as many, and so on until two finalists have played the whole sample. The sample
is a stratified draw (domain x gold length) ordered round-robin over domains, so each
prefix a round plays covers the domains evenly; every round plays only tasks new to it
(stored as its own study, so a re-run resumes and the store keeps each episode once).
The finalists are compared paired over the whole sample: the choice is the better one,
with how often it stays best when the tasks are resampled (bootstrap) and a paired
interval of its lead. :func:`rank_variants` ranks one fully played study (no halving).

Each candidate gets a task-bootstrap interval and a paired interval of its difference
to the best; variants whose paired interval contains 0 are statistically tied with
the best at this sample size (the honest answer is then "any of these").
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..catalog.model import Catalog, Task
from ..providers import make_provider
from ..providers.base import GenerateConfig, Message, ModelAPI, ModelOutput
from ..store import Store
from ..variants import resolve_variants
from ..variants.codec import Codec
from .runner import Study, StudyConfig, build_study, run_study, sample_tasks
from .stats import bootstrap_ci, paired_bootstrap, rng_for, task_success


@dataclass
class VariantEstimate:
    """A candidate's success on the tasks it played, with a task-bootstrap interval."""

    variant: str
    functions: int
    ratio: float
    n: int
    success: float
    ci_low: float
    ci_high: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Recommendation(VariantEstimate):
    diff_to_best: float
    diff_ci_low: float
    diff_ci_high: float
    tied_with_best: bool


def rank_variants(study: Study, store: Store, *, seed: int = 0) -> list[Recommendation]:
    """Rank the study's variants by success on its stored episodes (best first)."""
    rows = [r for r in store.rows(study=study.config.study_name, with_record=False)]
    by_variant: dict[str, dict[str, float]] = {}
    for codec in study.codecs:
        by_variant[codec.name] = task_success(
            [{"task_id": r.task_id, "success": r.success} for r in rows if r.variant == codec.name])
    native = len(study.catalog.tools) or 1
    scored = []
    for codec in study.codecs:
        per_task = by_variant[codec.name]
        ci = bootstrap_ci(list(per_task.values()), seed=seed, key=("recommend", codec.name))
        scored.append((codec, per_task, ci))
    order = {c.name: i for i, c in enumerate(study.codecs)}  # ties keep the candidates' order (native first)
    scored.sort(key=lambda x: (-x[2].estimate if x[2].n else 1.0, order[x[0].name]))
    best_tasks = scored[0][1] if scored else {}
    out = []
    for codec, per_task, ci in scored:
        d = paired_bootstrap(per_task, best_tasks, seed=seed, key=("recommend-diff", codec.name))
        tied = codec is scored[0][0] or (d.low <= 0 <= d.high)
        out.append(Recommendation(codec.name, codec.function_count(), codec.function_count() / native, ci.n,
                                  ci.estimate, ci.low, ci.high, d.estimate, d.low, d.high, bool(tied)))
    return out


def recommend(cfg: StudyConfig, store: Store | str = "recommend.db", *, seed: int = 0) -> list[Recommendation]:
    """Run (or resume) the sample study for ``cfg`` and rank its variants."""
    study = build_study(cfg)
    st = store if isinstance(store, Store) else Store(store)
    try:
        run_study(study, st)
        return rank_variants(study, st, seed=seed)
    finally:
        if not isinstance(store, Store):
            st.close()


@dataclass
class Round:
    """One halving round: who played, on how many tasks in all (paired), and who went on."""

    index: int
    tasks: int
    candidates: list[str]
    kept: list[str]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Ranked(VariantEstimate):
    """A candidate after halving, and the round it left in (None: a finalist, which played the
    whole sample)."""

    eliminated_in: int | None


@dataclass
class HalvingResult:
    ranking: list[Ranked]
    choice: str
    #: share of task-bootstrap resamples of the finalists' paired results in which the choice is best
    p_best: float
    #: the choice's lead over the runner-up finalist (paired, with an interval); None with one candidate
    lead: tuple[float, float, float] | None
    rounds: list[Round]
    episodes: int       # episodes the halving played
    episodes_full: int  # what every candidate on the whole sample would have cost

    def to_dict(self) -> dict[str, Any]:
        return {"choice": self.choice, "p_best": self.p_best,
                "lead": None if self.lead is None else dict(zip(("estimate", "low", "high"), self.lead, strict=True)),
                "ranking": [r.to_dict() for r in self.ranking], "rounds": [r.to_dict() for r in self.rounds],
                "episodes": self.episodes, "episodes_full": self.episodes_full}


def round_robin(tasks: Sequence[Task]) -> list[Task]:
    """``tasks`` ordered so every prefix spreads over the domains (one per domain in turn, each
    domain's tasks in their given order)."""
    by_domain: dict[str, list[Task]] = {}
    for t in tasks:
        by_domain.setdefault(t.domain, []).append(t)
    queues = [list(v) for _, v in sorted(by_domain.items())]
    out: list[Task] = []
    while any(queues):
        for q in queues:
            if q:
                out.append(q.pop(0))
    return out


def halving_schedule(candidates: int, n: int, *, min_tasks: int = 4) -> list[tuple[int, int]]:
    """(candidates playing, tasks played in all) per round: halve until two finalists, the tasks
    doubling so the finalists play all ``n``."""
    sizes = [max(1, candidates)]
    while sizes[-1] > 2:
        sizes.append(math.ceil(sizes[-1] / 2))
    last = len(sizes) - 1
    return [(k, min(n, max(min(min_tasks, n), math.ceil(n / 2 ** (last - i))))) for i, k in enumerate(sizes)]


def _bootstrap_best(per_task: Mapping[str, Mapping[str, float]], names: Sequence[str], choice: str, *,
                    seed: int, n_resamples: int = 2000) -> float:
    tasks = sorted(set.intersection(*(set(per_task[v]) for v in names)))
    if len(names) < 2 or not tasks:
        return 1.0
    m = np.array([[per_task[v][t] for t in tasks] for v in names])
    rng = rng_for(seed, ("recommend-best", *names))
    idx = rng.integers(0, len(tasks), size=(n_resamples, len(tasks)))
    means = m[:, idx].mean(axis=2)  # candidates x resamples
    best = means.max(axis=0)
    ties = (means == best).sum(axis=0)
    mine = means[names.index(choice)] == best
    return float((mine / ties).mean())  # a tie shares the win


class _OpenAcrossRounds(ModelAPI):
    """The provider every round plays with: each round's run closes its provider at the end, so
    this one closes only when :func:`successive_halving` is done (a local model loads once)."""

    def __init__(self, inner: ModelAPI) -> None:
        self.inner = inner
        self.spec, self.base_url = inner.spec, inner.base_url
        self.max_concurrency, self.cpu_bound = inner.max_concurrency, inner.cpu_bound

    async def generate(self, messages: list[Message], tools: list[dict[str, Any]], tool_choice: str | None,
                       config: GenerateConfig) -> ModelOutput:
        return await self.inner.generate(messages, tools, tool_choice, config)

    def settings(self) -> dict[str, Any]:
        return self.inner.settings()

    def for_episode(self, task: Task, codec: Codec) -> ModelAPI:
        return self.inner.for_episode(task, codec)

    async def check(self) -> None:
        await self.inner.check()

    async def aclose(self) -> None:
        """Kept open between rounds (see the class doc)."""


def successive_halving(cfg: StudyConfig, store: Store, *, model: ModelAPI | None = None,
                       catalog: Catalog | None = None, seed: int = 0, min_tasks: int = 4,
                       on_round: Callable[[Round], None] | None = None) -> HalvingResult:
    """Successive halving on a paired stratified sample of ``cfg.sample`` tasks (see the module doc).
    ``cfg.variants`` are the candidates, in preference order for ties."""
    raw = model or make_provider(cfg.model, **cfg.provider_options)
    provider = _OpenAcrossRounds(raw)
    try:
        return _halve(cfg, store, provider, catalog, seed, min_tasks, on_round)
    finally:
        asyncio.run(raw.aclose())


def _halve(cfg: StudyConfig, store: Store, provider: ModelAPI, catalog: Catalog | None, seed: int, min_tasks: int,
           on_round: Callable[[Round], None] | None) -> HalvingResult:
    base = build_study(replace(cfg, sample=None), model=provider, catalog=catalog)
    n = cfg.sample or len(base.tasks)
    tasks = round_robin(sample_tasks(base.tasks, n, cfg.seed))
    n = len(tasks)
    codecs = {c.name: c for c in base.codecs}
    order = list(codecs)
    # how each candidate is named again in a round: a spec file by its path (its name is no registry entry)
    selector = {s.name: s.source or s.name for s in resolve_variants(cfg.variants)}
    native = len(base.catalog.tools) or 1
    # the condition label carries a non-default match rule: a re-run under another rule is its own session
    session = cfg.study or f"recommend|{cfg.model}|{cfg.control.value}|{base.config.condition_label}|{n}|{cfg.seed}"
    per_task: dict[str, dict[str, float]] = {v: {} for v in order}
    alive, rounds, played, eliminated = list(order), [], 0, {}
    done_tasks = 0
    for i, (_, m) in enumerate(halving_schedule(len(order), n, min_tasks=min_tasks)):
        new = tasks[done_tasks:m]
        if new:
            names = ",".join(alive)
            study = build_study(replace(cfg, variants=",".join(selector.get(v, v) for v in alive), sample=None,
                                        study=f"{session}|round{i}|{names}"),
                                model=provider, tasks=new, catalog=base.catalog)
            prog = run_study(study, store, check=i == 0)
            played += prog.total - prog.skipped
        done_tasks = max(done_tasks, m)
        for r in store.rows(with_record=False):
            if r.study.startswith(f"{session}|round") and r.variant in per_task:
                per_task[r.variant][r.task_id] = float(bool(r.success))
        score = {v: sum(per_task[v].get(t.id, 0.0) for t in tasks[:m]) / max(m, 1) for v in alive}
        ranked = sorted(alive, key=lambda v: (-score[v], order.index(v)))
        keep = ranked[:max(2, math.ceil(len(alive) / 2))] if m < n else ranked
        rounds.append(Round(i, m, list(alive), keep))
        if on_round is not None:
            on_round(rounds[-1])
        for v in alive:
            if v not in keep:
                eliminated[v] = i
        alive = keep
        if m >= n:
            break
    out = []
    for v in order:
        vals = [per_task[v][t.id] for t in tasks if t.id in per_task[v]]
        ci = bootstrap_ci(vals, seed=seed, key=("recommend", v))
        out.append(Ranked(v, codecs[v].function_count(), codecs[v].function_count() / native, ci.n, ci.estimate,
                          ci.low, ci.high, eliminated.get(v)))
    # finalists first (by success), then the rest by how far they got, then success
    out.sort(key=lambda r: (r.eliminated_in is not None, -(r.eliminated_in or 0), -r.success, order.index(r.variant)))
    finalists = [r.variant for r in out if r.eliminated_in is None]
    choice = finalists[0]
    lead = None
    if len(finalists) > 1:
        d = paired_bootstrap(per_task[choice], per_task[finalists[1]], seed=seed, key=("recommend-lead", choice))
        lead = (d.estimate, d.low, d.high)
    return HalvingResult(out, choice, _bootstrap_best(per_task, finalists, choice, seed=seed), lead, rounds,
                         played, len(order) * n)


def export_variant(choice: str, cfg: StudyConfig, directory: str | Path, result: HalvingResult | None = None
                   ) -> list[Path]:
    """Write the chosen variant for the proxy: ``variant.json`` (its spec: ``toolbias proxy
    --variant DIR/variant.json``), ``tools.json`` (its tool list per domain) and, given a result,
    ``recommendation.json``."""
    from ..catalog import load_catalog
    from ..variants import build_codec

    spec = next(s for s in resolve_variants(cfg.variants) if s.name == choice)
    catalog = load_catalog(cfg.catalog)
    codec = build_codec(catalog, spec)
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    files = {"variant.json": spec.to_dict(),
             "tools.json": {"variant": choice, "catalog": catalog.name,
                            "domains": {d.name: codec.schema(d.name) for d in catalog.domains}}}
    if result is not None:
        files["recommendation.json"] = {"model": cfg.model, "catalog": cfg.catalog, **result.to_dict()}
    paths = []
    for name, value in files.items():
        p = out / name
        p.write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        paths.append(p)
    return paths


__all__ = ["HalvingResult", "Ranked", "Recommendation", "Round", "VariantEstimate", "export_variant", "halving_schedule",
           "rank_variants", "recommend", "round_robin", "successive_halving"]
