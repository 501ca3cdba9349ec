"""The batch layer: plan a study, skip finished episodes, run the rest with
bounded concurrency, score and store them as they finish.

Layers (as in tau2-bench): :func:`~toolbias.episode.run_episode` is pure;
:func:`build_study` resolves names (catalog, variants, model); :func:`run_study`
batches with concurrency, checkpointing, resume and sharding. Providers that are
only CPU in this process (``ModelAPI.cpu_bound``: oracle, scripted, replay) play
large plans in forked worker processes (:mod:`toolbias.forked`), one per core;
this process stays the one writer of the store.
"""

from __future__ import annotations

import asyncio
import importlib
import random
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .catalog import Catalog, Task, load_catalog
from .codec import Codec, Control
from .episode import Condition, EpisodeConfig, EpisodeRecord, Termination, run_episode
from .errors import ToolbiasError
from .forked import Emit, available_cpus, fork_available, run_forked
from .providers import ModelAPI, make_provider
from .providers.base import GenerateConfig
from .providers.wrapper import ProviderWrapper, ResponseCache, WrapperStats, wrap
from .scoring import score_record
from .store import COLUMNS, EpisodeRow, Store, episode_keys, stable_hash
from .variants import VariantSpec, build_codec, resolve_variants

#: (episode key, variant codec, task): one episode of a study's plan
PlanItem = tuple[str, Codec, Task]


@dataclass
class StudyConfig:
    """Everything a study needs; every field has a CLI flag."""

    model: str = "local"
    catalog: str = "builtin"
    variants: str = "representative"
    tasks: int | None = None          # first N tasks (in file order)
    domains: tuple[str, ...] = ()     # only tasks of these domains (all when empty)
    sample: int | None = None         # stratified sample of N tasks (same for every variant)
    seed: int = 0
    control: Control = Control.STRICT
    condition: Condition = Condition.BASE
    turn_limit: int = 16
    generate: GenerateConfig = field(default_factory=GenerateConfig)
    concurrency: int = 8
    shard: tuple[int, int] | None = None
    study: str | None = None
    cache: str | None = None
    provider_options: dict[str, Any] = field(default_factory=dict)
    #: "task" for full tasks; "probe" for compliance probes (stored apart, same machinery)
    kind: str = "task"
    #: processes that play episodes of CPU-bound providers (see :func:`worker_count`): None, one
    #: per core for plans of MIN_FORKED_EPISODES or more; 1, this process only. Not part of the
    #: study's identity: a study may resume with another count.
    workers: int | None = None
    #: the user simulator of multi-turn catalogs (tau2:...): a model spec; None: the catalog's
    #: scripted user (opens with the task's request, ends at the agent's first answer)
    user_model: str | None = None

    @property
    def study_name(self) -> str:
        base = self.study or f"{self.model}|{self.control.value}|{self.condition.value}"
        return base if self.kind == "task" else f"{base}|{self.kind}"


@dataclass
class Study:
    config: StudyConfig
    catalog: Catalog
    codecs: list[Codec]
    tasks: list[Task]
    model: ModelAPI
    settings_hash: str
    #: the provider's own cap on episodes in flight (the embedded model: 1)
    max_concurrency: int | None = None
    #: the user simulator (``StudyConfig.user_model``), for catalogs with their own episodes
    user: ModelAPI | None = None

    def episode_parts(self, task: Task) -> dict[str, Any]:
        """``env`` and ``user`` for :func:`run_episode` from the catalog's episode hook
        (``Catalog.meta["episode"]``, ``"module:factory"``; tau2-bench), else nothing."""
        hook = self.catalog.meta.get("episode")
        if not hook:
            return {}
        module, _, attr = str(hook).partition(":")
        factory = getattr(importlib.import_module(module), attr)
        parts: dict[str, Any] = factory(self.catalog, task, self.user)
        return parts

    @property
    def classes(self) -> dict[str, str]:
        """Native tool uid -> class, for wrong-class scoring."""
        cached: dict[str, str] | None = self.__dict__.get("_classes")
        if cached is None:
            cached = self.__dict__["_classes"] = {t.uid: t.cls for t in self.catalog.tools}
        return cached

    def plan(self) -> list[PlanItem]:
        """(key, codec, task) for every episode of this shard, variant by variant and
        domain by domain, so a local model reuses its prompt prefix (system + tools)."""
        cfg = self.config
        cat = f"{self.catalog.name}#{self.catalog.fingerprint()}"
        tasks = sorted(self.tasks, key=lambda t: (t.domain, t.id))
        out: list[PlanItem] = []
        for codec in self.codecs:
            key = episode_keys(model=cfg.model, settings_hash=self.settings_hash, catalog=cat,
                               variant=f"{codec.name}#{stable_hash(codec_steps(codec), 8)}",
                               control=cfg.control.value, condition=cfg.condition.value, seed=cfg.seed,
                               kind=cfg.kind)
            out.extend((key(task.id), codec, task) for task in tasks)
        if cfg.shard:
            i, n = cfg.shard
            out = [item for item in out if int(item[0][:8], 16) % n == i]
        return out

    def identity(self) -> dict[str, Any]:
        """What must not change when a study resumes."""
        cfg = self.config
        return {
            "model": cfg.model, "settings_hash": self.settings_hash,
            # the settings themselves (not only their hash), so a refusal can say what changed
            "settings": {"provider": model_behaviour(self.model), "generate": cfg.generate.to_dict()},
            "catalog": f"{self.catalog.name}#{self.catalog.fingerprint()}",
            "variants": [c.name for c in self.codecs],
            # a variant's definition, so an edited spec file under the same name is not mixed in
            "variant_steps": {c.name: stable_hash(codec_steps(c), 8) for c in self.codecs},
            "tasks": stable_hash(sorted(t.id for t in self.tasks)),
            "n_tasks": len(self.tasks), "control": cfg.control.value, "condition": cfg.condition.value,
            "turn_limit": cfg.turn_limit, "seed": cfg.seed,
        }


def codec_steps(codec: Codec) -> list[Any]:
    return [[layer.op, layer.params] for layer in codec.layers]


def model_behaviour(model: ModelAPI) -> dict[str, Any]:
    """A provider's settings minus where its requests go: replicas, ports and extra --base-url
    servers may change between a study's runs (resume, shards) without changing its episodes."""
    return {k: v for k, v in model.settings().items() if k not in ("base_url", "base_urls")}


def sample_tasks(tasks: Sequence[Task], n: int, seed: int) -> list[Task]:
    """A stratified (domain x gold length) sample of ``n`` tasks, deterministic for a seed."""
    if n >= len(tasks):
        return list(tasks)
    strata: dict[tuple[str, int], list[Task]] = defaultdict(list)
    for t in sorted(tasks, key=lambda t: t.id):
        strata[(t.domain, len(t.gold))].append(t)
    total = len(tasks)
    quotas = {k: n * len(v) / total for k, v in strata.items()}
    alloc = {k: int(q) for k, q in quotas.items()}
    left = n - sum(alloc.values())
    for k in sorted(quotas, key=lambda k: (-(quotas[k] - alloc[k]), k))[:left]:
        alloc[k] += 1
    rng = random.Random(seed)
    picked: list[Task] = []
    for k in sorted(strata):
        picked.extend(rng.sample(strata[k], alloc[k]))
    return sorted(picked, key=lambda t: t.id)


def select_tasks(catalog: Catalog, cfg: StudyConfig) -> list[Task]:
    tasks = list(catalog.tasks)
    if not tasks:
        raise ToolbiasError(f"catalog '{catalog.name}' has no tasks", fix="use a catalog with a query set")
    if cfg.domains:
        for d in cfg.domains:
            catalog.domain(d)  # unknown domain: CatalogError listing the valid ones
        tasks = [t for t in tasks if t.domain in cfg.domains]
    if cfg.sample:
        tasks = sample_tasks(tasks, cfg.sample, cfg.seed)
    if cfg.tasks:
        tasks = tasks[: cfg.tasks]
    return tasks


def build_study(cfg: StudyConfig, model: ModelAPI | None = None,
                tasks: Sequence[Task] | None = None, catalog: Catalog | None = None) -> Study:
    """Resolve names into objects; raises ToolbiasError listing valid names on bad input.
    ``tasks`` replaces the catalog's task selection (compliance probes use this);
    ``catalog`` an in-memory catalog instead of ``cfg.catalog``'s spec."""
    provider = model or make_provider(cfg.model, **cfg.provider_options)
    catalog = catalog or load_catalog(cfg.catalog)
    specs: list[VariantSpec] = resolve_variants(cfg.variants)
    codecs = [build_codec(catalog, s) for s in specs]
    chosen = list(tasks) if tasks is not None else select_tasks(catalog, cfg)
    cache = ResponseCache(cfg.cache) if cfg.cache else None
    wrapped = wrap(provider, concurrency=cfg.concurrency, cache=cache)
    settings = {"provider": model_behaviour(provider), "generate": cfg.generate.to_dict(), "turn_limit": cfg.turn_limit}
    user = None
    if cfg.user_model:
        settings["user_model"] = cfg.user_model
        user = wrap(make_provider(cfg.user_model, **cfg.provider_options), concurrency=cfg.concurrency, cache=cache)
    return Study(cfg, catalog, codecs, chosen, wrapped, stable_hash(settings), provider.max_concurrency, user)


def row_for(study: Study, key: str, rec: EpisodeRecord) -> EpisodeRow:
    classes = study.classes
    infra = rec.termination is Termination.INFRA_ERROR
    record = rec.to_dict()
    ok, mode = (None, None) if infra else score_record(record, classes)
    cfg = study.config
    return EpisodeRow(
        key=key, study=cfg.study_name, kind=cfg.kind, model=cfg.model, settings_hash=study.settings_hash,
        catalog=study.catalog.name, variant=rec.variant, task_id=rec.task_id, domain=rec.domain,
        control=rec.control, condition=rec.condition, seed=cfg.seed,
        status="infra_error" if infra else "done", success=ok, failure_mode=mode.value if mode else None,
        termination=rec.termination.value, n_gold=len(rec.gold), n_executed=len(rec.executed),
        n_rejections=rec.rejections, turns=rec.turns, prompt_tokens=rec.prompt_tokens,
        completion_tokens=rec.completion_tokens, wall_s=rec.wall_s, record=record,
    )


@dataclass
class Progress:
    total: int = 0
    done: int = 0
    skipped: int = 0
    successes: int = 0
    infra_errors: int = 0
    started: float = field(default_factory=time.perf_counter)


ProgressFn = Callable[[Progress], None]

#: below this many episodes to play, forking workers costs more than it saves
MIN_FORKED_EPISODES = 2000
_SUCCESS, _STATUS = COLUMNS.index("success"), COLUMNS.index("status")


def worker_count(study: Study, n_episodes: int) -> int:
    """How many processes play ``n_episodes``: ``config.workers`` (None: one per core from
    MIN_FORKED_EPISODES episodes on), but 1 unless the provider is CPU-bound, has no response
    cache (a file the workers would share) and this platform forks."""
    want = study.config.workers
    model = study.model
    if (want is not None and want <= 1) or n_episodes < 2 or not model.cpu_bound \
            or getattr(model, "cache", None) is not None or not fork_available():
        return 1
    if want is None:
        want = available_cpus() if n_episodes >= MIN_FORKED_EPISODES else 1
    return max(1, min(want, n_episodes))


class _Sink:
    """The one writer: stores finished rows (column values) and counts them into the progress."""

    def __init__(self, store: Store, prog: Progress, on_progress: ProgressFn | None) -> None:
        self.store, self.prog, self.on_progress = store, prog, on_progress
        self.buffer: list[tuple[Any, ...]] = []
        self.last_flush = time.perf_counter()

    def add(self, values: tuple[Any, ...]) -> None:
        """One row played here: buffered, written every 256 rows or second."""
        self.buffer.append(values)
        self._count(values, report=False)
        if len(self.buffer) >= 256 or time.perf_counter() - self.last_flush > 1.0:
            self.flush()
        if self.on_progress:
            self.on_progress(self.prog)

    def add_batch(self, batch: list[tuple[Any, ...]], report: bool = True) -> None:
        """A worker's batch: written at once (one transaction), then counted."""
        self.store.put_values(batch)
        for values in batch:
            self._count(values, report)

    def keep(self, batch: list[tuple[Any, ...]]) -> None:
        """A batch arriving after an interrupt or a failure: written and counted, not reported."""
        self.add_batch(batch, report=False)

    def flush(self) -> None:
        self.store.put_values(self.buffer)
        self.buffer.clear()
        self.last_flush = time.perf_counter()

    def _count(self, values: tuple[Any, ...], report: bool) -> None:
        self.prog.done += 1
        self.prog.successes += int(bool(values[_SUCCESS]))
        self.prog.infra_errors += int(values[_STATUS] == "infra_error")
        if report and self.on_progress:
            self.on_progress(self.prog)


async def _play(study: Study, items: Iterator[PlanItem], episode_cfg: EpisodeConfig, emit: Emit) -> None:
    """Play ``items`` with bounded concurrency; emit each episode's row (column values)."""
    cfg = study.config

    async def worker() -> None:
        hooked = bool(study.catalog.meta.get("episode"))
        for key, codec, task in items:  # one iterator shared by the tasks: each item is played once
            if hooked:
                rec = await run_episode(task, codec, study.model, episode_cfg, **study.episode_parts(task))
            else:
                rec = await run_episode(task, codec, study.model, episode_cfg)
            emit(row_for(study, key, rec).values())

    n = min(cfg.concurrency, study.max_concurrency or cfg.concurrency)
    workers = [asyncio.create_task(worker()) for _ in range(max(1, n))]
    try:
        await asyncio.gather(*workers)
    finally:
        for w in workers:
            w.cancel()


async def _play_forked(study: Study, todo: list[PlanItem], episode_cfg: EpisodeConfig, sink: _Sink,
                       n_workers: int) -> None:
    found = getattr(study.model, "stats", None)
    stats = found if isinstance(found, WrapperStats) else None

    async def work(indices: Iterator[int], emit: Emit) -> WrapperStats | None:
        before = replace(stats) if stats is not None else None
        await _play(study, (todo[i] for i in indices), episode_cfg, emit)
        return stats.since(before) if stats is not None and before is not None else None

    for counted in await run_forked(len(todo), n_workers, work, sink.add_batch, sink.keep):
        if stats is not None and counted is not None:
            stats.add(counted)  # the workers' calls and retries, as if made here


async def run_study_async(study: Study, store: Store, on_progress: ProgressFn | None = None,
                          check: bool = True) -> Progress:
    cfg = study.config
    if check:
        await study.model.check()
    store.begin_study(cfg.study_name, study.identity())
    plan = study.plan()
    done = store.done_keys(cfg.study_name)
    todo = [item for item in plan if item[0] not in done]
    prog = Progress(total=len(plan), skipped=len(plan) - len(todo), done=len(plan) - len(todo))
    episode_cfg = EpisodeConfig(control=cfg.control, condition=cfg.condition, turn_limit=cfg.turn_limit,
                                generate=cfg.generate)
    sink = _Sink(store, prog, on_progress)
    n_workers = worker_count(study, len(todo))
    try:
        if n_workers > 1:
            await _play_forked(study, todo, episode_cfg, sink, n_workers)
        else:
            try:
                await _play(study, iter(todo), episode_cfg, sink.add)
            finally:
                sink.flush()  # Ctrl-C or a crash keeps every finished episode
    finally:
        await study.model.aclose()
        if study.user is not None:
            await study.user.aclose()
    return prog


def run_study(cfg: StudyConfig | Study, store: Store | str = "toolbias.db", on_progress: ProgressFn | None = None,
              model: ModelAPI | None = None, check: bool = True) -> Progress:
    """Build (unless given a built Study) and run a study (blocking). Re-running resumes."""
    study = cfg if isinstance(cfg, Study) else build_study(cfg, model)
    own = not isinstance(store, Store)
    st = Store(store) if not isinstance(store, Store) else store
    try:
        return asyncio.run(run_study_async(study, st, on_progress, check=check))
    finally:
        if own:
            st.close()


__all__ = ["MIN_FORKED_EPISODES", "Progress", "Study", "StudyConfig", "build_study", "run_study",
           "run_study_async", "sample_tasks", "worker_count", "ProviderWrapper"]
