"""Schema-bias studies: plan a study, and run its episodes through the batch engine.

Layers (as in tau2-bench): :func:`~toolbias.study.episode.run_episode` is pure;
:func:`build_study` resolves names (catalog, variants, model); :func:`run_study`
runs the plan as :class:`EpisodeJobs` of :mod:`toolbias.base.engine` (skip finished keys,
concurrency, one buffered writer, sharding by key). Providers that are only CPU in
this process (``ModelAPI.cpu_bound``: oracle, scripted, replay) play large plans in
forked worker processes, one per core; this process stays the one writer of the store.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..base.engine import MIN_FORKED_JOBS, JobKind, Writer, pending, play
from ..base.engine import worker_count as engine_worker_count
from ..catalog import Catalog, Task, load_catalog
from ..catalog.phrasing import with_phrasing
from ..catalog.taskfile import with_task_file
from ..errors import ToolbiasError
from ..providers import ModelAPI, make_provider
from ..providers.base import GenerateConfig
from ..providers.wrapper import ProviderWrapper, ResponseCache, WrapperStats, wrap
from ..store import COLUMNS, DomainMeta, EpisodeRow, Store, StudyMeta, VariantMeta, episode_keys, stable_hash
from ..variants import VariantSpec, build_codec, resolve_variants
from ..variants.codec import Codec, Control
from ..variants.isolated import IsolatedCodec, isolated
from .env import environment_kind, make_environment
from .episode import Condition, EpisodeConfig, EpisodeRecord, Termination, run_episode
from .paper_env import PaperCallMap, check_paper_catalog
from .paper_protocol import Protocol, protocol_label
from .paper_seam import AdapterEpisode, AdapterPlan, adapter_plan
from .scoring import score_record
from .success import MatchRule, condition_label

#: (episode key, variant codec, task): one episode of a study's plan
PlanItem = tuple[str, Codec, Task]
#: the catalog a default study name does not name (a study on any other catalog is named
#: ``model|control|condition|CATALOG``, so two catalogs can share a store)
DEFAULT_CATALOG = "builtin"


@dataclass
class StudyConfig:
    """Everything a study needs; every field has a CLI flag."""

    model: str = "local"
    catalog: str = "builtin"
    variants: str = "representative"
    tasks: int | None = None          # first N tasks (in file order)
    domains: tuple[str, ...] = ()     # only tasks of these domains (all when empty)
    split: str | None = None          # only this part ("train" / "eval") of the splits manifest
    splits: str = "default"           # the manifest (toolbias.study.splits.load_splits spec)
    sample: int | None = None         # stratified sample of N tasks (same for every variant)
    calls: tuple[int, ...] = ()       # only tasks whose gold has one of these numbers of calls (all when empty)
    seed: int = 0
    control: Control = Control.STRICT
    condition: Condition = Condition.BASE
    #: the success rule (toolbias.study.success); None: the catalog's own (``Catalog.meta["match"]``: BFCL's
    #: is ``bfcl``), else exact. A non-default rule is part of the stored condition.
    match: MatchRule | None = None
    turn_limit: int = 16
    generate: GenerateConfig = field(default_factory=GenerateConfig)
    #: episodes (model requests) in flight at once; None: :func:`episodes_at_once`'s default
    concurrency: int | None = None
    shard: tuple[int, int] | None = None
    study: str | None = None
    cache: str | None = None
    provider_options: dict[str, Any] = field(default_factory=dict)
    #: "task" for full tasks; "probe" for compliance probes (stored apart, same machinery)
    kind: str = "task"
    #: which phrasing of the queries the tasks ask in (:mod:`toolbias.catalog.phrasing`)
    phrasing: str = "query"
    #: processes that play episodes of CPU-bound providers (see :func:`worker_count`): None, one
    #: per core for plans of MIN_FORKED_EPISODES or more; 1, this process only. Not part of the
    #: study's identity: a study may resume with another count.
    workers: int | None = None
    #: the user simulator of multi-turn catalogs (tau2:...): a model spec; None: the catalog's
    #: scripted user (opens with the task's request, ends at the agent's first answer)
    user_model: str | None = None
    #: whose evaluation protocol (toolbias.study.paper_protocol): part of the stored condition
    #: (``base@paper``), so the two are never pooled
    protocol: Protocol = Protocol.TOOLBIAS
    #: the catalog's tasks from this JSONL file instead of its own (:mod:`toolbias.catalog.taskfile`);
    #: a default study name carries it, so each task file is a study of its own
    task_file: str | None = None

    @property
    def condition_label(self) -> str:
        if self.protocol is Protocol.PAPER:
            return protocol_label(self.condition.value, self.protocol)
        return condition_label(self.condition.value, self.match or MatchRule.EXACT)

    @property
    def study_name(self) -> str:
        base = self.study or f"{self.model}|{self.control.value}|{self.condition_label}"
        if self.study is None and self.catalog != DEFAULT_CATALOG:  # another catalog: its own study
            base += f"|{self.catalog}"
        if self.study is None and self.task_file:
            base += f"|tasks:{self.task_file}"
        if self.study is None and self.split:
            base += f"|{self.split}"
        if self.study is None and self.phrasing != "query":
            base += f"|{self.phrasing}"
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
    #: under the paper's protocol, each variant's reading as the artifact's call map (by variant name)
    paper_maps: dict[str, PaperCallMap] = field(default_factory=dict)
    #: under the paper's protocol in a harness of its own (tau2), how the artifact's adapter plays each variant
    adapters: dict[str, AdapterPlan] = field(default_factory=dict)

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
                               control=cfg.control.value, condition=cfg.condition_label, seed=cfg.seed,
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
            "settings": {"provider": self.model.behaviour(), "generate": cfg.generate.to_dict()},
            "catalog": f"{self.catalog.name}#{self.catalog.fingerprint()}",
            "variants": [c.name for c in self.codecs],
            # a variant's definition, so an edited spec file under the same name is not mixed in
            "variant_steps": {c.name: stable_hash(codec_steps(c), 8) for c in self.codecs},
            "tasks": stable_hash(sorted(t.id for t in self.tasks)),
            "n_tasks": len(self.tasks), "control": cfg.control.value, "condition": cfg.condition_label,
            "turn_limit": cfg.turn_limit, "seed": cfg.seed,
            # only when it says something: studies of toolbias's protocol keep their old identity
            **({"protocol": cfg.protocol.value} if cfg.protocol is not Protocol.TOOLBIAS else {}),
        }

    def meta(self) -> StudyMeta:
        """What the report needs to know about this study's catalog and variants, stored when it runs.
        On a catalog of isolated domains (BFCL entries: each variant built per entry, when an episode
        needs it) the function counts are those of the entries the study plays: building every
        entry's variants for a sample of a few cost tens of seconds."""
        played = sorted({t.domain for t in self.tasks})
        entries = played if isolated(self.catalog) else None
        native = sum(len(self.catalog.domain(d).tools) for d in played) if entries is not None \
            else Codec(self.catalog, []).function_count()

        def count(codec: Codec) -> int:
            return codec.function_count(entries) if isinstance(codec, IsolatedCodec) else codec.function_count()
        variants = {c.name: VariantMeta(c.name, codec_steps(c), stable_hash(codec_steps(c), 8), count(c))
                    for c in self.codecs}
        # what an episode in each played domain sees: the report's query-weighted ratios, with no codec rebuilt
        domains = {d: DomainMeta(len(self.catalog.domain(d).tools), {c.name: len(c.tools_for(d)) for c in self.codecs})
                   for d in played}
        return StudyMeta(self.config.study_name, self.catalog.name, self.catalog.fingerprint(), native,
                         dict(self.classes), variants, domains)


#: episodes in flight at once when neither the user nor the model says
DEFAULT_CONCURRENCY = 8


def episodes_at_once(requested: int | None, model_max: int | None) -> int:
    """Episodes a study plays at once: what the user asked (``--concurrency``), else as many as the
    model takes at once (the embedded model: its batch), else :data:`DEFAULT_CONCURRENCY`; never
    more than the model takes."""
    n = requested or model_max or DEFAULT_CONCURRENCY
    return min(n, model_max) if model_max else n


def codec_steps(codec: Codec) -> list[Any]:
    return [[layer.op, layer.params] for layer in codec.layers]


def paper_variants(selector: str) -> list[VariantSpec]:
    """The variants a study under the paper's protocol plays: each name (or group: representative,
    all, paper-*) as the artifact renders it (``paper.<name>``, :mod:`toolbias.variants.paper`)
    where it has a rendering, else toolbias's own variant of that name (read as the artifact would
    read it, or refused: :class:`~toolbias.study.paper_env.PaperCallMap`)."""
    from ..errors import VariantError
    from ..variants.paper import paper_renderings

    out: dict[str, VariantSpec] = {}
    for name in (n.strip() for n in selector.split(",")):
        if not name:
            continue
        try:
            specs = paper_renderings(name)
        except VariantError:
            specs = resolve_variants(name)
        for spec in specs:
            out.setdefault(spec.name, spec)
    return list(out.values())


def apportion(sizes: Mapping[Any, int], n: int, rng: random.Random) -> dict[Any, int]:
    """``n`` units over strata in proportion to ``sizes``: each gets the whole part of its quota,
    and the units left go to strata drawn (seeded, without replacement) with probability
    proportional to their fractional parts, so every stratum's expected share is its quota and
    small samples reach small strata across seeds (largest-remainder with name order as tie-break
    gave the same few strata for every seed)."""
    total = sum(sizes.values())
    quotas = {k: n * v / total for k, v in sizes.items()} if total else {}
    alloc = {k: int(q) for k, q in quotas.items()}
    left = n - sum(alloc.values())
    weights = {k: quotas[k] - alloc[k] for k in sorted(quotas, key=str)}
    # Efraimidis-Spirakis: the ``left`` largest u ** (1 / w) are a weighted draw without replacement
    keyed = sorted(((rng.random() ** (1 / w) if w > 0 else 0.0, i, k) for i, (k, w) in enumerate(weights.items())),
                   reverse=True)
    for _, _, k in keyed[:left]:
        alloc[k] += 1
    return alloc


def sample_tasks(tasks: Sequence[Task], n: int, seed: int) -> list[Task]:
    """A stratified sample of ``n`` tasks (domains in proportion to their sizes, then gold lengths
    within each domain; remainders drawn at random by seed: :func:`apportion`), deterministic for
    a seed."""
    if n >= len(tasks):
        return list(tasks)
    strata: dict[str, dict[int, list[Task]]] = defaultdict(lambda: defaultdict(list))
    for t in sorted(tasks, key=lambda t: t.id):
        # tasks with a category (BFCL's, whose every entry is a domain of its own): by category
        strata[str(t.meta.get("category") or t.domain)][len(t.gold)].append(t)
    rng = random.Random(seed)
    per_domain = apportion({d: sum(map(len, by_len.values())) for d, by_len in sorted(strata.items())}, n, rng)
    picked: list[Task] = []
    for d, by_len in sorted(strata.items()):
        per_len = apportion({k: len(v) for k, v in sorted(by_len.items())}, per_domain[d], rng)
        for k in sorted(by_len):
            picked.extend(rng.sample(by_len[k], per_len[k]))
    return sorted(picked, key=lambda t: t.id)


def select_tasks(catalog: Catalog, cfg: StudyConfig) -> list[Task]:
    tasks = list(catalog.tasks)
    if not tasks:
        raise ToolbiasError(f"catalog '{catalog.name}' has no tasks", fix="use a catalog with a query set")
    if cfg.domains:
        # a catalog of one domain per entry (BFCL) is chosen from by category too (--domains parallel)
        categories = {str(t.meta["category"]) for t in tasks if t.meta.get("category")}
        for d in cfg.domains:
            if d not in categories:
                catalog.domain(d)  # unknown domain: CatalogError listing the valid ones
        tasks = [t for t in tasks if t.domain in cfg.domains or t.meta.get("category") in cfg.domains]
    if cfg.calls:
        tasks = [t for t in tasks if len(t.gold) in cfg.calls]
        if not tasks:
            raise ToolbiasError(f"no task of catalog '{catalog.name}' has {'/'.join(map(str, cfg.calls))} gold "
                                "call(s) in the chosen domains", fix="choose other --calls or --domains")
    if cfg.split:
        from .splits import load_splits

        tasks = load_splits(cfg.splits, catalog).tasks(tasks, cfg.split)
    if cfg.sample:
        tasks = sample_tasks(tasks, cfg.sample, cfg.seed)
    if cfg.tasks:
        tasks = tasks[: cfg.tasks]
    return tasks


def study_catalog(cfg: StudyConfig) -> Catalog:
    """The catalog ``cfg`` studies: ``cfg.catalog``'s spec, with ``cfg.task_file``'s tasks in place
    of its own when it names one (every command that takes ``--task-file`` comes through here)."""
    return with_task_file(load_catalog(cfg.catalog), cfg.task_file)


def build_study(cfg: StudyConfig, model: ModelAPI | None = None,
                tasks: Sequence[Task] | None = None, catalog: Catalog | None = None) -> Study:
    """Resolve names into objects; raises ToolbiasError listing valid names on bad input.
    ``tasks`` replaces the catalog's task selection (compliance probes use this);
    ``catalog`` an in-memory catalog instead of :func:`study_catalog`'s."""
    source = catalog or study_catalog(cfg)
    # tasks are chosen by id, domain, gold and split, never by wording: chosen before the
    # phrasing, then taken in the study's phrasing
    chosen = list(tasks) if tasks is not None else select_tasks(source, cfg)
    provider = model or make_provider(cfg.model, **cfg.provider_options)
    if cfg.protocol is Protocol.PAPER:
        provider.request_form = "paper"  # the artifact's wire form where it has its own (the Responses API)
    cache = ResponseCache(cfg.cache) if cfg.cache else None
    at_once = episodes_at_once(cfg.concurrency, provider.max_concurrency)
    wrapped = wrap(provider, concurrency=at_once, cache=cache)
    settings = {"provider": provider.behaviour(), "generate": cfg.generate.to_dict(), "turn_limit": cfg.turn_limit}
    if cfg.protocol is not Protocol.TOOLBIAS:
        settings["protocol"] = cfg.protocol.value
    user = None
    if cfg.user_model:
        settings["user_model"] = cfg.user_model
        user = wrap(make_provider(cfg.user_model, **cfg.provider_options), concurrency=at_once, cache=cache)
    catalog = with_phrasing(source, cfg.phrasing)
    if tasks is None and catalog is not source:
        phrased = {(t.domain, t.id): t for t in catalog.tasks}
        chosen = [phrased[(t.domain, t.id)] for t in chosen]
    if cfg.protocol is Protocol.PAPER:
        cfg = replace(cfg, match=MatchRule.PAPER)  # the artifact's success rule, always
    elif cfg.match is None:  # the catalog's own rule, resolved once: the study stores it
        cfg = replace(cfg, match=MatchRule(catalog.meta.get("match") or MatchRule.EXACT))
    specs: list[VariantSpec] = paper_variants(cfg.variants) if cfg.protocol is Protocol.PAPER \
        else resolve_variants(cfg.variants)
    adapters: dict[str, AdapterPlan] = {}
    if cfg.protocol is Protocol.PAPER and environment_kind(catalog).paper_harness() is not None:
        # the artifact's tau2 adapter plays these variants itself (refused before any work where it cannot)
        adapters = {s.name: adapter_plan(s) for s in specs}
        harness_env = environment_kind(catalog)
        domain = catalog.domains[0].name  # a harness catalog is one domain (tau2:airline)
        specs = [adapters[s.name].codec_spec(s, harness_env.paper_adapter(adapters[s.name], domain)) for s in specs]
    codecs = [build_codec(catalog, s) for s in specs]
    paper_maps: dict[str, PaperCallMap] = {}
    # tau2 plays under its adapter's harness (run_study_async); other catalogs with their own environment are refused
    if cfg.protocol is Protocol.PAPER and environment_kind(catalog).paper_harness() is None:
        check_paper_catalog(catalog)
        domains = sorted({t.domain for t in chosen})
        for codec in codecs:  # a variant the artifact's reading is not reproduced for: refused before any work
            paper_maps[codec.name] = PaperCallMap(codec)
            paper_maps[codec.name].check(domains)
    return Study(cfg, catalog, codecs, chosen, wrapped, stable_hash(settings), provider.max_concurrency, user,
                 paper_maps, adapters)


def row_for(study: Study, key: str, rec: EpisodeRecord) -> EpisodeRow:
    """The stored row of an episode: scored on the typed record, serialised once."""
    infra = rec.termination is Termination.INFRA_ERROR
    ok, mode = (None, None) if infra else score_record(rec, study.classes)
    cfg = study.config
    return EpisodeRow(
        key=key, study=cfg.study_name, kind=cfg.kind, model=cfg.model, settings_hash=study.settings_hash,
        catalog=study.catalog.name, variant=rec.variant, task_id=rec.task_id, domain=rec.domain,
        control=rec.control, condition=rec.condition, seed=cfg.seed,
        status="infra_error" if infra else "done", success=ok, failure_mode=mode.value if mode else None,
        termination=rec.termination.value, n_gold=len(rec.gold), n_executed=len(rec.executed),
        n_rejections=rec.rejections, turns=rec.turns, prompt_tokens=rec.prompt_tokens,
        completion_tokens=rec.completion_tokens, wall_s=rec.wall_s, record=rec.to_dict(),
    )


@dataclass
class Progress:
    total: int = 0
    done: int = 0
    skipped: int = 0
    successes: int = 0
    infra_errors: int = 0
    started: float = field(default_factory=time.perf_counter)
    #: when this run's first episode ended (perf_counter; None before): the ETA is timed from it
    first_done: float | None = None


ProgressFn = Callable[[Progress], None]

#: below this many episodes to play, forking workers costs more than it saves
MIN_FORKED_EPISODES = MIN_FORKED_JOBS
#: the same for a catalog with its own environment (tau2-bench: a database built, replayed and
#: hashed per task, tenths of a second): forking pays from a few tasks
MIN_FORKED_HOOKED_EPISODES = 32
_SUCCESS, _STATUS = COLUMNS.index("success"), COLUMNS.index("status")


def _forkable(study: Study) -> bool:
    """Episodes may play in forked workers: the provider (and the user simulator, if any) is
    CPU-bound and has no response cache (a file the workers would share)."""
    return all(bool(m.cpu_bound) and not m.caches_responses for m in (study.model, study.user) if m is not None)


def worker_count(study: Study, n_episodes: int) -> int:
    """How many processes play ``n_episodes`` (:func:`toolbias.base.engine.worker_count` with
    ``config.workers``): 1 unless the provider is CPU-bound and has no response cache."""
    return engine_worker_count(study.config.workers, n_episodes, forkable=_forkable(study),
                               min_jobs=_min_forked(study))


def _min_forked(study: Study) -> int:
    return MIN_FORKED_HOOKED_EPISODES if environment_kind(study.catalog).memoises_per_task else MIN_FORKED_EPISODES


class EpisodeJobs(JobKind[PlanItem, EpisodeRecord]):
    """The engine's job kind for a study: one episode of the plan, scored and stored as an
    :class:`~toolbias.store.EpisodeRow` (the JSON record encoded once, where it was played)."""

    def __init__(self, study: Study, episode_cfg: EpisodeConfig) -> None:
        self.study, self.episode_cfg = study, episode_cfg
        self.cpu_bound = _forkable(study)
        self.hooked = environment_kind(study.catalog).memoises_per_task
        self.min_forked_jobs = _min_forked(study)
        self.stats = study.model.stats if isinstance(study.model, ProviderWrapper) else None
        self._before: WrapperStats | None = None

    def key(self, item: PlanItem) -> str:
        return item[0]

    async def run_one(self, item: PlanItem, key: str) -> EpisodeRecord:
        if self.episode_cfg.protocol is Protocol.PAPER and self.episode_cfg.harness is None:
            from .paper_episode import run_paper_episode

            return await run_paper_episode(item[2], item[1], self.study.model, self.episode_cfg,
                                           self.study.paper_maps[item[1].name])
        env = make_environment(self.study.catalog, item[2], self.study.user)
        plan = self.study.adapters.get(item[1].name)
        adapter = None if plan is None else AdapterEpisode(type(env).paper_adapter(plan, item[2].domain),
                                                           hard=self.episode_cfg.control is Control.STRICT)
        return await run_episode(item[2], item[1], self.study.model, self.episode_cfg, env=env, adapter=adapter)

    def row(self, item: PlanItem, key: str, result: EpisodeRecord) -> tuple[Any, ...]:
        return row_for(self.study, key, result).values()

    def affinity(self, item: PlanItem) -> tuple[str, str] | None:
        """A task's episodes under every variant play in one worker: the catalog's environment
        memoises per task (tau2: the same native calls cost no tau2 work the second time)."""
        return (item[2].domain, item[2].id) if self.hooked else None

    def worker_start(self) -> None:
        self._before = replace(self.stats) if self.stats is not None else None

    def worker_summary(self) -> WrapperStats | None:
        return self.stats.since(self._before) if self.stats is not None and self._before is not None else None

    def absorb(self, summary: Any) -> None:
        if self.stats is not None and summary is not None:
            self.stats.add(summary)  # the workers' calls and retries, as if made here


def _stored_successes(store: Store, study: str, jobs: EpisodeJobs, plan: Sequence[PlanItem],
                      todo: Sequence[tuple[str, PlanItem]]) -> int:
    """Successes among the plan's episodes already stored (skipped on resume): the progress
    counts them as it counts them done."""
    if len(todo) == len(plan):
        return 0
    won = {k for (k,) in store.query("SELECT key FROM episodes WHERE status='done' AND success AND study=?",
                                      (study,))}
    playing = {k for k, _ in todo}
    return sum(1 for item in plan if (k := jobs.key(item)) in won and k not in playing)


async def run_study_async(study: Study, store: Store, on_progress: ProgressFn | None = None,
                          check: bool = True) -> Progress:
    cfg = study.config
    if check:
        await study.model.check()
    store.begin_study(cfg.study_name, study.identity())
    store.put_study_meta(study.meta())
    plan = study.plan()
    # under the paper's protocol, an environment with its own harness (tau2) plays as the artifact's adapter runs it
    harness = environment_kind(study.catalog).paper_harness() if cfg.protocol is Protocol.PAPER else None
    jobs = EpisodeJobs(study, EpisodeConfig(control=cfg.control, condition=cfg.condition,
                                            turn_limit=cfg.turn_limit, generate=cfg.generate,
                                            match=cfg.match or MatchRule.EXACT, protocol=cfg.protocol,
                                            harness=harness))
    todo = pending(jobs, plan, store.done_keys(cfg.study_name))
    prog = Progress(total=len(plan), skipped=len(plan) - len(todo), done=len(plan) - len(todo),
                    successes=_stored_successes(store, cfg.study_name, jobs, plan, todo))

    def count(values: tuple[Any, ...]) -> None:
        if prog.first_done is None:
            prog.first_done = time.perf_counter()
        prog.done += 1
        prog.successes += int(bool(values[_SUCCESS]))
        prog.infra_errors += int(values[_STATUS] == "infra_error")

    writer = Writer(store.put_values, on_row=count,
                    on_progress=(lambda: on_progress(prog)) if on_progress else None)
    concurrency = episodes_at_once(cfg.concurrency, study.max_concurrency)
    try:
        await play(jobs, todo, writer, concurrency=concurrency, workers=worker_count(study, len(todo)))
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


__all__ = ["MIN_FORKED_EPISODES", "EpisodeJobs", "Progress", "Study", "StudyConfig", "build_study", "run_study",
           "run_study_async", "sample_tasks", "study_catalog", "worker_count", "ProviderWrapper"]
