"""Run a model on a selection benchmark: every query in every cyclic rotation, N runs.

Two presentations:

- ``tools``: each tool of the cluster is one function in the request's ``tools``
  list, in the rotation's order; the selection is the function the model calls
  (``tool_choice`` defaults to ``"required"``).
- ``text``: the tools are a numbered list in the user message; the model answers
  with a number or a name (see :mod:`.parse`).

Tool order is part of every request, hence of the provider cache key. Run ``r``
samples with ``seed = config.seed + r`` (``r`` when no seed is set), so runs are
distinct samples and distinct cache entries. Infrastructure failures (after the
provider wrapper's retries) become ``error`` records that a re-run retries; every
other answer is final, parsed or not.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..engine import JobKind, Row, Writer, play
from ..providers.base import GenerateConfig, InfraError, Message, ModelAPI, ModelOutput
from .benchmark import Benchmark, Cluster, SelectionTool, rotations
from .metrics import BiasReport, bias_report
from .parse import parse_output
from .records import SelectionRecord, Status, trial_key
from .store import STATUS, SelectionStore, record_of_row, record_row

PRESENTATIONS = ("tools", "text")
PROMPT_VERSION = "selection-v1"

SYSTEM_TOOLS = ("You are an assistant that fulfils user requests with tools. Several of the provided tools may "
                "be able to serve the request. Call exactly one tool, the one you would use, with suitable "
                "arguments.")
SYSTEM_TEXT = ("You choose which tool to use for a user request. Several of the listed tools may be able to serve "
               "it. Answer with the number or the exact name of the one tool you would use, and nothing else.")


def describe_parameters(tool: SelectionTool) -> str:
    props = tool.parameters.get("properties") or {}
    required = set(tool.parameters.get("required") or [])
    parts = []
    for name, schema in props.items():
        schema = schema if isinstance(schema, dict) else {}
        bits = [str(schema.get("type", "any"))]
        if name in required:
            bits.append("required")
        desc = str(schema.get("description", "") or "").strip()
        parts.append(f"{name} ({', '.join(bits)})" + (f": {desc}" if desc else ""))
    return "; ".join(parts) if parts else "none"


def render_text_list(tools: Sequence[SelectionTool]) -> str:
    lines = []
    for i, t in enumerate(tools, 1):
        lines.append(f"{i}. {t.name}: {t.description or '(no description)'}")
        lines.append(f"   parameters: {describe_parameters(t)}")
    return "\n".join(lines)


def build_request(query: str, tools: Sequence[SelectionTool], presentation: str,
                  tool_choice: str | None = "required") -> tuple[list[Message], list[dict[str, Any]], str | None]:
    """(messages, tools, tool_choice) for one trial."""
    if presentation == "tools":
        return ([{"role": "system", "content": SYSTEM_TOOLS}, {"role": "user", "content": query}],
                [t.to_openai() for t in tools], tool_choice)
    if presentation == "text":
        user = (f"Request: {query}\n\nTools:\n{render_text_list(tools)}\n\n"
                "Which tool do you use? Reply with its number or exact name only.")
        return ([{"role": "system", "content": SYSTEM_TEXT}, {"role": "user", "content": user}], [], None)
    raise ValueError(f"unknown presentation '{presentation}' (use tools or text)")


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


def plan_trials(bench: Benchmark, runs: int = 1) -> list[Trial]:
    """Every query in every cyclic rotation of its cluster, for runs 0..runs-1."""
    trials = []
    for run in range(runs):
        for c in bench.clusters:
            rots = rotations(c.k)
            for qi in range(len(c.queries)):
                for r, order in enumerate(rots):
                    trials.append(Trial(run, c, qi, r, order))
    return trials


def run_config(config: GenerateConfig, run: int) -> GenerateConfig:
    return replace(config, seed=(config.seed or 0) + run)


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
    """Runs trials through one model as a job kind of the batch engine (:mod:`toolbias.engine`):
    a trial is one request, its record is parsed and stored as it finishes (resumable)."""

    presentations: tuple[str, ...] = PRESENTATIONS

    def __init__(self, model: ModelAPI, *, benchmark_name: str, presentation: str = "tools",
                 condition: str = "base", config: GenerateConfig | None = None,
                 tool_choice: str | None = "required", concurrency: int = 8, store: SelectionStore | None = None,
                 on_record: Callable[[SelectionRecord], None] | None = None) -> None:
        if presentation not in self.presentations:
            raise ValueError(f"unknown presentation '{presentation}' (use {' or '.join(self.presentations)})")
        self.model = model
        self.benchmark_name = benchmark_name
        self.presentation = presentation
        self.condition = condition
        self.config = config or GenerateConfig(temperature=0.5, top_p=1.0)
        self.tool_choice = tool_choice if presentation == "tools" else None
        self.concurrency = max(1, concurrency)
        self.store = store
        self.on_record = on_record
        self.summary = RunSummary()

    def key(self, trial: Trial) -> str:
        return trial_key(settings=self.model.settings(), cluster_fingerprint=trial.cluster.fingerprint(),
                         query=trial.query, order=trial.order, presentation=self.presentation,
                         condition=self.condition, run=trial.run, config=run_config(self.config, trial.run).to_dict(),
                         tool_choice=self.tool_choice, prompt_version=PROMPT_VERSION)

    def record(self, trial: Trial, key: str, output: ModelOutput | None, error: str | None = None,
               latency: float = 0.0) -> SelectionRecord:
        base: dict[str, Any] = dict(key=key, model=self.model.spec, benchmark=self.benchmark_name, condition=self.condition,
                    presentation=self.presentation, run=trial.run, cluster=trial.cluster.id,
                    query_index=trial.query_index, query=trial.query, rotation=trial.rotation, order=trial.order,
                    latency_s=latency)
        if output is None:
            return SelectionRecord(**base, api=None, position=None, status=Status.ERROR, reason=error or "")
        names = [t.name for t in trial.cluster.presented(trial.order)]
        parsed = parse_output(output, names, self.presentation)
        if parsed.index is None:
            return SelectionRecord(**base, api=None, position=None, status=Status.UNPARSED, reason=parsed.reason,
                                   output=output.to_dict())
        return SelectionRecord(**base, api=trial.order[parsed.index], position=parsed.index, status=Status.OK,
                               via=parsed.via, output=output.to_dict())

    async def run_trial(self, trial: Trial, key: str) -> SelectionRecord:
        tools = trial.cluster.presented(trial.order)
        messages, specs, choice = build_request(trial.query, tools, self.presentation, self.tool_choice)
        start = time.perf_counter()
        try:
            out = await self.model.generate(messages, specs, choice, run_config(self.config, trial.run))
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
        """Run the trials not already final in the store (through :mod:`toolbias.engine`);
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
                         ) -> tuple[list[SelectionRecord], RunSummary]:
    runner = SelectionRunner(model, benchmark_name=bench.name, presentation=presentation, condition=condition,
                             config=config, tool_choice=tool_choice, concurrency=concurrency, store=store,
                             on_record=on_record)
    records = await runner.run(plan_trials(bench, runs))
    return records, runner.summary


def run_selection(model: ModelAPI, bench: Benchmark, **options: Any) -> tuple[list[SelectionRecord], RunSummary]:
    """Synchronous :func:`arun_selection` (for scripts and the CLI)."""
    return asyncio.run(arun_selection(model, bench, **options))


def report_of(records: Sequence[SelectionRecord], label: str = "") -> BiasReport:
    """The :class:`~toolbias.selection.metrics.BiasReport` of some records (errors are not counted)."""
    sels = [s for s in (r.to_selection() for r in records) if s is not None]
    unparsed = sum(1 for r in records if r.status is Status.UNPARSED)
    return bias_report(sels, n_unparsed=unparsed, label=label)
