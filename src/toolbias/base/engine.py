"""The one batch engine: plan -> skip finished keys -> bounded concurrency -> one buffered
writer -> optional forked worker processes. Schema-bias episodes, compliance probes,
tool-selection trials (base, perturbed, mitigated) and filter evaluations all run through it.

How to define a job kind
------------------------
A job kind says what one job is and how its result is stored; the engine does the rest
(resume, concurrency, buffered writes, worker processes, Ctrl-C keeping finished rows)::

    class Echo(JobKind[str, str]):
        def key(self, item: str) -> str:                      # the resume key: a hash of what defines the job
            return sha256_of(["echo", item])      # (toolbias.base.canonical)
        async def run_one(self, item: str, key: str) -> str:  # one job: ask the model, parse, score
            return item.upper()
        def row(self, item: str, key: str, result: str) -> Row:   # the stored column values, serialised once
            return (key, result)

    writer = Writer(lambda rows: db.write(insert_sql("echo", ("key", "value")), rows))
    tally = await run_jobs(Echo(), ["a", "b"], writer, done=finished_keys, concurrency=8)

Rules for a kind:

- ``run_one`` returns, for every outcome that belongs in the results: an infrastructure failure
  is a result (a row whose status says so, which ``done`` leaves out so a re-run retries it).
  What ``run_one`` raises stops the batch; the rows finished before it are kept.
- ``row`` turns the typed result into column values in the process that ran the job (a
  forked worker, so JSON encoding runs in parallel); the parent only writes.
- ``cpu_bound = True`` lets a kind whose jobs are this process's CPU (the oracle, scripted
  models) play in forked workers (``workers > 1``). Counters a worker changes in its own copy
  reach the parent through :meth:`JobKind.worker_start`, :meth:`JobKind.worker_summary` and
  :meth:`JobKind.absorb`. Jobs that share a per-process memo (the episodes of one tau2 task
  under every variant) say so with :meth:`JobKind.affinity`: each such group plays in one
  worker, so the memo is filled once, not once per worker; a kind whose jobs are costly
  lowers ``min_forked_jobs``.

Where rows go: a table of the results file (:mod:`toolbias.base.database`). A new kind of record
gets its table there (its ``CREATE TABLE IF NOT EXISTS`` in ``SCHEMA``, ``SCHEMA_VERSION``
bumped: opening an older file then adds the table) and a small query class on
:class:`~toolbias.base.database.Database`, as :class:`~toolbias.selection.store.SelectionStore`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from .forked import Emit, available_cpus, fork_available, run_forked

ItemT = TypeVar("ItemT")
ResultT = TypeVar("ResultT")

#: one stored row: the column values of the kind's table
Row = tuple[Any, ...]

#: the one flush policy: rows reach the store every FLUSH_ROWS rows or FLUSH_S seconds
FLUSH_ROWS = 256
FLUSH_S = 1.0
#: below this many jobs to play, forking workers costs more than it saves
MIN_FORKED_JOBS = 2000


class JobKind(Generic[ItemT, ResultT]):
    """What one job is (see the module docstring)."""

    #: jobs use this process's CPU only: forked workers speed them up
    cpu_bound: bool = False
    #: from this many jobs on, worker processes are started when the count is left to the engine
    min_forked_jobs: int = MIN_FORKED_JOBS

    def key(self, item: ItemT) -> str:
        raise NotImplementedError

    async def run_one(self, item: ItemT, key: str) -> ResultT:
        raise NotImplementedError

    def row(self, item: ItemT, key: str, result: ResultT) -> Row:
        raise NotImplementedError

    def affinity(self, item: ItemT) -> Hashable | None:
        """Jobs with the same (not None) affinity play in the same worker process, in plan order."""
        return None

    def worker_start(self) -> None:
        """In a forked worker, before its jobs (e.g. snapshot counters for :meth:`worker_summary`)."""

    def worker_summary(self) -> Any:
        """In a forked worker, after its jobs: what it counted (picklable), for :meth:`absorb`."""
        return None

    def absorb(self, summary: Any) -> None:
        """In the parent: add one worker's :meth:`worker_summary`."""


class Writer:
    """The one writer: buffers rows and writes them (``put``, one transaction) every
    FLUSH_ROWS rows or FLUSH_S seconds, and on :meth:`flush`. ``on_row`` sees every row
    written; ``on_progress`` is called after each row that arrives during the run (not for
    the rows still arriving from workers after an interrupt)."""

    def __init__(self, put: Callable[[Sequence[Row]], Any], *, on_row: Callable[[Row], None] | None = None,
                 on_progress: Callable[[], None] | None = None) -> None:
        self.put, self.on_row, self.on_progress = put, on_row, on_progress
        self.buffer: list[Row] = []
        self.written = 0
        self.last_flush = time.perf_counter()

    def add(self, row: Row) -> None:
        """One row played in this process: buffered."""
        self.buffer.append(row)
        if self.on_row:
            self.on_row(row)
        if len(self.buffer) >= FLUSH_ROWS or time.perf_counter() - self.last_flush > FLUSH_S:
            self.flush()
        if self.on_progress:
            self.on_progress()

    def add_batch(self, rows: list[Row], report: bool = True) -> None:
        """A worker's batch: written at once, then counted."""
        self.put(rows)
        self.written += len(rows)
        for row in rows:
            if self.on_row:
                self.on_row(row)
            if report and self.on_progress:
                self.on_progress()

    def keep(self, rows: list[Row]) -> None:
        """A batch arriving after an interrupt or a failure: written and counted, not reported."""
        self.add_batch(rows, report=False)

    def flush(self) -> None:
        if self.buffer:
            self.put(self.buffer)
            self.written += len(self.buffer)
            self.buffer = []
        self.last_flush = time.perf_counter()


@dataclass
class Tally:
    """What a batch was: jobs planned, already finished (skipped), and played now."""

    planned: int = 0
    skipped: int = 0
    played: int = 0


def pending(kind: JobKind[ItemT, Any], plan: Iterable[ItemT], done: Collection[str]) -> list[tuple[str, ItemT]]:
    """(key, item) for every job of ``plan`` whose key is not in ``done``, in plan order."""
    keyed = ((kind.key(item), item) for item in plan)
    return [(k, item) for k, item in keyed if k not in done]


def worker_count(requested: int | None, n_jobs: int, *, forkable: bool, min_jobs: int = MIN_FORKED_JOBS) -> int:
    """How many processes play ``n_jobs``: ``requested`` (None: one per core from ``min_jobs``
    jobs on), but 1 unless the jobs may fork (``forkable``: CPU-bound, no shared file such as
    a response cache) and this platform forks."""
    if (requested is not None and requested <= 1) or n_jobs < 2 or not forkable or not fork_available():
        return 1
    if requested is None:
        requested = available_cpus() if n_jobs >= min_jobs else 1
    return max(1, min(requested, n_jobs))


async def play(kind: JobKind[ItemT, Any], todo: Sequence[tuple[str, ItemT]], writer: Writer, *,
               concurrency: int = 8, workers: int = 1) -> int:
    """Play ``todo`` ((key, item) pairs) with at most ``concurrency`` jobs in flight per
    process, in ``workers`` processes (forked; 1: this one); every row goes to ``writer``.
    Returns the rows written. Ctrl-C or an error keeps every finished row."""
    before = writer.written
    try:
        if workers > 1 and kind.cpu_bound:
            await _play_forked(kind, todo, writer, concurrency, workers)
        else:
            await _play_here(kind, iter(todo), writer.add, concurrency)
    finally:
        writer.flush()
    return writer.written - before


async def run_jobs(kind: JobKind[ItemT, Any], plan: Sequence[ItemT], writer: Writer, *,
                   done: Collection[str] = frozenset(), concurrency: int = 8, workers: int | None = 1) -> Tally:
    """Skip the jobs of ``plan`` whose key is in ``done``, play the rest (:func:`play`);
    ``workers``: a count, or None for one per core when the kind is CPU-bound and the plan large."""
    todo = pending(kind, plan, done)
    n = worker_count(workers, len(todo), forkable=kind.cpu_bound, min_jobs=kind.min_forked_jobs)
    played = await play(kind, todo, writer, concurrency=concurrency, workers=n)
    return Tally(planned=len(plan), skipped=len(plan) - len(todo), played=played)


async def _play_here(kind: JobKind[ItemT, Any], jobs: Iterator[tuple[str, ItemT]], emit: Emit,
                     concurrency: int) -> None:
    async def lane() -> None:
        for key, item in jobs:  # one iterator shared by the lanes: each job is played once
            emit(kind.row(item, key, await kind.run_one(item, key)))

    lanes = [asyncio.create_task(lane()) for _ in range(max(1, concurrency))]
    try:
        await asyncio.gather(*lanes)
    finally:
        for lane_task in lanes:
            lane_task.cancel()


async def _play_forked(kind: JobKind[ItemT, Any], todo: Sequence[tuple[str, ItemT]], writer: Writer,
                       concurrency: int, workers: int) -> None:
    groups = affinity_groups(kind, todo)

    async def work(indices: Iterator[int], emit: Emit) -> Any:
        kind.worker_start()
        jobs = (todo[i] for i in indices) if groups is None else (todo[j] for i in indices for j in groups[i])
        await _play_here(kind, jobs, emit, concurrency)
        return kind.worker_summary()

    units = len(todo) if groups is None else len(groups)
    for summary in await run_forked(units, workers, work, writer.add_batch, writer.keep):
        kind.absorb(summary)


def affinity_groups(kind: JobKind[ItemT, Any], todo: Sequence[tuple[str, ItemT]]) -> list[list[int]] | None:
    """The units handed to workers, as indices of ``todo``: jobs of the same
    :meth:`JobKind.affinity` form one (in plan order, where its first job was), any other job
    is one alone. None when the kind has no affinities (every job is a unit)."""
    if type(kind).affinity is JobKind.affinity:
        return None
    groups: list[list[int]] = []
    by_affinity: dict[Hashable, list[int]] = {}
    for i, (_, item) in enumerate(todo):
        tag = kind.affinity(item)
        if tag is None:
            groups.append([i])
        elif tag in by_affinity:
            by_affinity[tag].append(i)
        else:
            groups.append(by_affinity.setdefault(tag, [i]))
    return groups


__all__ = ["FLUSH_ROWS", "FLUSH_S", "MIN_FORKED_JOBS", "JobKind", "Row", "Tally", "Writer", "affinity_groups",
           "pending", "play", "run_jobs", "worker_count"]
