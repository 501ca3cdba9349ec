"""Run a model on a selection benchmark: every query in every cyclic rotation, N runs.

How a trial is shown and read lives in :mod:`.present` (presentations, system prompts,
the exact rule) and :mod:`.paper_parse` (the paper's rule, stored beside it). Tool order
is part of every request, hence of the provider cache key. Run ``r`` samples with
``seed = config.seed + r`` (no seed at all when ``config.seed`` is None, as the paper's
runs), so runs are distinct samples. Infrastructure failures (after the provider
wrapper's retries) become ``error`` records that a re-run retries; every other answer
is final, parsed or not.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..base.canonical import canonical_json as canonical
from ..base.engine import JobKind, Row, Writer, play
from ..providers.base import GenerateConfig, InfraError, ModelAPI, ModelOutput
from .metrics import BiasReport, bias_report
from .paper_parse import paper_reading
from .present import PRESENTATIONS, Prompt, Request, build, build_request, parse, resolve_prompt
from .records import SelectionRecord, Status, trial_key
from .scramble import scramble_tools
from .store import STATUS, SelectionStore, record_of_row, record_row
from .types import Benchmark, Cluster, rotations

__all__ = ["PRESENTATIONS", "RunSummary", "SelectionRunner", "Trial", "arun_selection", "build_request",
           "plan_trials", "report_of", "run_selection"]

PROMPT_VERSION = "selection-v1"


@dataclass(frozen=True)
class Trial:
    run: int
    cluster: Cluster
    query_index: int
    rotation: int
    order: tuple[int, ...]

    @property
    def query(self) -> str:
        return self.cluster.queries[self.query_index]


ORDERS = ("cyclic", "random")


def plan_trials(bench: Benchmark, runs: int = 1, *, order: str = "cyclic", seed: int = 0) -> list[Trial]:
    """Every query in every cyclic rotation of its cluster, for runs 0..runs-1; ``order="random"``: as many
    entries per query, each an independent seeded shuffle (the paper's random-order benchmark, unseeded there)."""
    if order not in ORDERS:
        raise ValueError(f"unknown order '{order}' (use cyclic or random)")
    trials = []
    for run in range(runs):
        for c in bench.clusters:
            rots = rotations(c.k)
            for qi in range(len(c.queries)):
                for r, rot in enumerate(rots):
                    if order == "random":
                        rng = random.Random(hashlib.sha256(canonical([seed, run, c.id, qi, r]).encode()).hexdigest())
                        rot = tuple(rng.sample(range(c.k), c.k))
                    trials.append(Trial(run, c, qi, r, rot))
    return trials


def run_config(config: GenerateConfig, run: int) -> GenerateConfig:
    return config if config.seed is None else replace(config, seed=config.seed + run)


@dataclass
class RunSummary:
    planned: int = 0
    skipped: int = 0
    ok: int = 0
    unparsed: int = 0
    errors: int = 0
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class SelectionRunner(JobKind[Trial, SelectionRecord]):
    """Runs trials through one model as a job kind of the batch engine (:mod:`toolbias.base.engine`):
    a trial is one request, its record is parsed and stored as it finishes (resumable)."""

    presentations: tuple[str, ...] = PRESENTATIONS

    def __init__(self, model: ModelAPI, *, benchmark_name: str, presentation: str = "tools",
                 condition: str = "base", config: GenerateConfig | None = None,
                 tool_choice: str | None = "required", concurrency: int = 8, store: SelectionStore | None = None,
                 on_record: Callable[[SelectionRecord], None] | None = None, prompt: Prompt | str | None = None,
                 benchmark: Benchmark | None = None, order: str = "cyclic", backbone: str = "") -> None:
        if presentation not in self.presentations:
            raise ValueError(f"unknown presentation '{presentation}' (use {' or '.join(self.presentations)})")
        self.prompt = prompt if isinstance(prompt, Prompt) or presentation not in PRESENTATIONS \
            else resolve_prompt(presentation, prompt)
        #: the clusters the paper's rule searches (all of the benchmark's, in order)
        self.benchmark = benchmark
        #: random-order trials are keyed apart: a shuffle equal to a rotation is another trial
        self.order = order
        #: the paper's backbone label, stored with every record (part of its result group)
        self.backbone = backbone
        self.model = model
        self.benchmark_name = benchmark_name
        self.presentation = presentation
        self.condition = condition
        self.config = config or GenerateConfig(temperature=0.5, top_p=1.0, seed=0)
        self.tool_choice = tool_choice if presentation == "tools" else None
        self.prompt_name = self.prompt.name if isinstance(self.prompt, Prompt) else "toolbias"
        self.concurrency = max(1, concurrency)
        self.store = store
        self.on_record = on_record
        self.summary = RunSummary()

    def key(self, trial: Trial) -> str:
        return trial_key(settings=self.model.settings(), cluster_fingerprint=trial.cluster.fingerprint(),
                         query=trial.query, order=trial.order, presentation=self.presentation,
                         condition=self.condition, run=trial.run, config=run_config(self.config, trial.run).to_dict(),
                         tool_choice=self.tool_choice, prompt_version=self.prompt_key(),
                         salt="" if self.order == "cyclic" else f"order={self.order}")

    def prompt_key(self) -> str:
        """The trial key's prompt part: the legacy version for this project's prompts (so stores written
        before prompts were options resume), else the prompt's name and a hash of its text."""
        if self.prompt_name == "toolbias" or not isinstance(self.prompt, Prompt):
            return PROMPT_VERSION
        import hashlib

        return f"{self.prompt.name}:{hashlib.sha256(self.prompt.text.encode()).hexdigest()[:16]}"

    def settings_fields(self) -> dict[str, Any]:
        fields = {"prompt": self.prompt_name, "temperature": self.config.temperature, "top_p": self.config.top_p,
                  "tool_choice": self.tool_choice}
        return {**fields, "backbone": self.backbone} if self.backbone else fields

    def record(self, trial: Trial, key: str, output: ModelOutput | None, error: str | None = None,
               latency: float = 0.0) -> SelectionRecord:
        base: dict[str, Any] = dict(key=key, model=self.model.spec, benchmark=self.benchmark_name, condition=self.condition,
                    presentation=self.presentation, run=trial.run, cluster=trial.cluster.id,
                    query_index=trial.query_index, query=trial.query, rotation=trial.rotation, order=trial.order,
                    latency_s=latency, **self.settings_fields())
        if output is None:
            return SelectionRecord(**base, api=None, position=None, status=Status.ERROR, reason=error or "")
        tools = trial.cluster.presented(trial.order)
        shown = self.request(trial).shown
        parsed = parse(output, shown, self.presentation)
        paper = paper_reading(output, shown, tools, self.benchmark or [trial.cluster],
                              function_calling=self.presentation not in ("text", "toolbench"))
        if paper.cluster is not None and paper.cluster != trial.cluster.id:
            base.update(extra={"paper_cluster": paper.cluster, "paper_api_elsewhere": paper.api})
        elif paper.api is not None:
            base.update(paper_api=paper.api, paper_position=paper.position)
        if parsed.index is None:
            return SelectionRecord(**base, api=None, position=None, status=Status.UNPARSED, reason=parsed.reason,
                                   output=output.to_dict())
        return SelectionRecord(**base, api=trial.order[parsed.index], position=parsed.index, status=Status.OK,
                               via=parsed.via, output=output.to_dict())

    def request(self, trial: Trial) -> Request:
        """The request of a trial; scrambled fields (:mod:`.scramble`) are drawn from an RNG seeded by the trial."""
        assert isinstance(self.prompt, Prompt)
        tools = trial.cluster.presented(trial.order)
        if any(t.metadata.get("scramble") for t in tools):
            seed = canonical([self.condition, trial.run, trial.cluster.id, trial.query_index, trial.rotation,
                              self.config.seed])
            tools = scramble_tools(tools, random.Random(hashlib.sha256(seed.encode()).hexdigest()))
        return build(trial.query, tools, self.presentation, prompt=self.prompt, tool_choice=self.tool_choice)

    async def run_trial(self, trial: Trial, key: str) -> SelectionRecord:
        req = self.request(trial)
        start = time.perf_counter()
        try:
            out = await self.model.generate(req.messages, req.tools, req.tool_choice, run_config(self.config, trial.run))
        except InfraError as exc:
            return self.record(trial, key, None, error=f"infrastructure: {exc}",
                               latency=time.perf_counter() - start)
        return self.record(trial, key, out, latency=out.latency_s or (time.perf_counter() - start))

    # --- the engine's job kind: one trial ---

    async def run_one(self, item: Trial, key: str) -> SelectionRecord:
        return await self.run_trial(item, key)

    def row(self, item: Trial, key: str, result: SelectionRecord) -> Row:
        return record_row(result)

    async def run(self, trials: Sequence[Trial]) -> list[SelectionRecord]:
        """Run the trials not already final in the store (through :mod:`toolbias.base.engine`);
        return the records of all of them."""
        t0 = time.perf_counter()
        keys = [self.key(t) for t in trials]
        fresh: list[Row] = []
        counts = {Status.OK.value: 0, Status.UNPARSED.value: 0, Status.ERROR.value: 0}

        def on_row(row: Row) -> None:
            counts[row[STATUS]] += 1
            if self.store is None:
                fresh.append(row)
            if self.on_record:
                self.on_record(record_of_row(row))

        writer = Writer(self.store.put_rows if self.store else (lambda rows: None), on_row=on_row)
        done = self.store.done_keys() if self.store else set()
        todo = [(k, t) for k, t in zip(keys, trials, strict=True) if k not in done]
        self.summary.planned += len(trials)
        self.summary.skipped += len(trials) - len(todo)
        try:
            await play(self, todo, writer, concurrency=self.concurrency)
        finally:
            self.summary.ok += counts[Status.OK.value]
            self.summary.unparsed += counts[Status.UNPARSED.value]
            self.summary.errors += counts[Status.ERROR.value]
            self.summary.seconds += time.perf_counter() - t0
        if self.store:
            stored = {r.key: r for r in self.store.records(model=self.model.spec, benchmark=self.benchmark_name,
                                                           condition=self.condition,
                                                           presentation=self.presentation, keys=keys)}
            return [stored[k] for k in keys if k in stored]
        mine = {r.key: r for r in map(record_of_row, fresh)}
        return [mine[k] for k in keys if k in mine]


async def arun_selection(model: ModelAPI, bench: Benchmark, *, runs: int = 1, presentation: str = "tools",
                         condition: str = "base", config: GenerateConfig | None = None,
                         tool_choice: str | None = "required", concurrency: int = 8,
                         store: SelectionStore | None = None,
                         on_record: Callable[[SelectionRecord], None] | None = None,
                         prompt: Prompt | str | None = None, order: str = "cyclic", backbone: str = "",
                         ) -> tuple[list[SelectionRecord], RunSummary]:
    runner = SelectionRunner(model, benchmark_name=bench.name, presentation=presentation, condition=condition,
                             config=config, tool_choice=tool_choice, concurrency=concurrency, store=store,
                             on_record=on_record, prompt=prompt, benchmark=bench, order=order, backbone=backbone)
    records = await runner.run(plan_trials(bench, runs, order=order, seed=(config.seed or 0) if config else 0))
    return records, runner.summary


def run_selection(model: ModelAPI, bench: Benchmark, **options: Any) -> tuple[list[SelectionRecord], RunSummary]:
    """Synchronous :func:`arun_selection` (for scripts and the CLI)."""
    return asyncio.run(arun_selection(model, bench, **options))


def report_of(records: Sequence[SelectionRecord], label: str = "", *, rule: str = "exact") -> BiasReport:
    """The :class:`~toolbias.selection.metrics.BiasReport` of some records (errors are not counted);
    ``rule="paper"``: the paper's reading of the same answers (PROTOCOL.md 1.8)."""
    answered = [r for r in records if r.status is not Status.ERROR]
    sels = [s for s in (r.to_selection(rule) for r in answered) if s is not None]
    return bias_report(sels, n_unparsed=len(answered) - len(sels), label=label)
