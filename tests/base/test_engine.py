"""The batch engine with a toy job kind over a real SQLite file: resume, bounded concurrency,
the one flush policy, interrupts keeping finished rows, forked workers. No test waits on time:
jobs yield to the event loop (``asyncio.sleep(0)``) and stops are triggered by counted rows."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from toolbias.base import engine, forked
from toolbias.base.database import Database, insert_sql
from toolbias.base.engine import JobKind, Row, Writer, play, run_jobs

INSERT = insert_sql("echo", ("key", "value", "pid"))


class Echo(JobKind[int, int]):
    """Job ``i``: its square; records how many jobs were in flight at once, and which ran."""

    def __init__(self, fail_at: int | None = None, cpu_bound: bool = False) -> None:
        self.fail_at, self.cpu_bound = fail_at, cpu_bound
        self.ran: list[int] = []
        self.in_flight = self.most_in_flight = 0
        self.summaries: list[Any] = []

    def key(self, item: int) -> str:
        return f"job-{item}"

    async def run_one(self, item: int, key: str) -> int:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        for _ in range(3):
            await asyncio.sleep(0)  # a yield to the other jobs, not a wait
        self.in_flight -= 1
        if item == self.fail_at:
            raise RuntimeError(f"job {item} failed")
        self.ran.append(item)
        return item * item

    def row(self, item: int, key: str, result: int) -> Row:
        return (key, result, os.getpid())

    def worker_summary(self) -> Any:
        return (os.getpid(), len(self.ran))

    def absorb(self, summary: Any) -> None:
        self.summaries.append(summary)


def open_db(path: Path) -> Database:
    db = Database(path)
    db.db.execute("CREATE TABLE IF NOT EXISTS echo (key TEXT PRIMARY KEY, value INTEGER, pid INTEGER)")
    return db


def stored(db: Database) -> dict[str, int]:
    return dict(db.query("SELECT key, value FROM echo"))


def writer(db: Database, **kw: Any) -> Writer:
    return Writer(lambda rows: db.write(INSERT, rows), **kw)


def run(kind: Echo, plan: Sequence[int], db: Database, **kw: Any) -> engine.Tally:
    done = set(stored(db))
    return asyncio.run(run_jobs(kind, plan, writer(db), done=done, **kw))


def test_runs_every_job_once_and_resumes_skipping_finished_keys(tmp_path: Path) -> None:
    with open_db(tmp_path / "e.db") as db:
        first = run(Echo(), range(10), db, concurrency=4)
        assert (first.planned, first.skipped, first.played) == (10, 0, 10)
        again = Echo()
        second = run(again, range(15), db, concurrency=4)
        assert (second.planned, second.skipped, second.played) == (15, 10, 5)
        assert sorted(again.ran) == list(range(10, 15))
        assert stored(db) == {f"job-{i}": i * i for i in range(15)}


@pytest.mark.parametrize("concurrency", [1, 3, 8])
def test_concurrency_is_bounded_and_reached(tmp_path: Path, concurrency: int) -> None:
    kind = Echo()
    with open_db(tmp_path / "e.db") as db:
        run(kind, range(40), db, concurrency=concurrency)
    assert kind.most_in_flight == concurrency


def test_rows_reach_the_store_during_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The one flush policy: every FLUSH_ROWS rows (or FLUSH_S seconds), not only at the end."""
    monkeypatch.setattr(engine, "FLUSH_ROWS", 4)
    monkeypatch.setattr(engine, "FLUSH_S", float("inf"))  # a slow machine must not flush early
    seen: list[int] = []
    with open_db(tmp_path / "e.db") as db:
        w = writer(db, on_progress=lambda: seen.append(len(stored(db))))
        asyncio.run(play(Echo(), [(f"job-{i}", i) for i in range(10)], w, concurrency=1))
        assert seen == [0, 0, 0, 4, 4, 4, 4, 8, 8, 8] and len(stored(db)) == 10


def test_a_failing_job_keeps_the_rows_finished_before_it(tmp_path: Path) -> None:
    with open_db(tmp_path / "e.db") as db:
        with pytest.raises(RuntimeError, match="job 6 failed"):
            run(Echo(fail_at=6), range(10), db, concurrency=1)
        assert stored(db) == {f"job-{i}": i * i for i in range(6)}
        rest = Echo()
        tally = run(rest, range(10), db, concurrency=1)
        assert tally.skipped == 6 and rest.ran == [6, 7, 8, 9] and len(stored(db)) == 10


def test_ctrl_c_keeps_every_finished_row_and_a_rerun_completes(tmp_path: Path) -> None:
    """KeyboardInterrupt (what Ctrl-C raises) after the 5th row: those 5 are stored, not more."""
    def interrupt() -> None:
        if len(rows) == 5:
            raise KeyboardInterrupt

    rows: list[Row] = []
    with open_db(tmp_path / "e.db") as db:
        w = writer(db, on_row=rows.append, on_progress=interrupt)
        with pytest.raises(KeyboardInterrupt):
            asyncio.run(play(Echo(), [(f"job-{i}", i) for i in range(50)], w, concurrency=1))
        assert stored(db) == {f"job-{i}": i * i for i in range(5)}
        rest = Echo()
        assert run(rest, range(50), db, concurrency=4).skipped == 5
        assert sorted(rest.ran) == list(range(5, 50)) and len(stored(db)) == 50


@pytest.mark.skipif(not forked.fork_available(), reason="worker processes need fork")
def test_cpu_bound_kinds_play_in_forked_workers_with_the_parent_writing(tmp_path: Path) -> None:
    kind = Echo(cpu_bound=True)
    with open_db(tmp_path / "e.db") as db:
        tally = run(kind, range(300), db, concurrency=4, workers=2)
        assert tally.played == 300 and stored(db) == {f"job-{i}": i * i for i in range(300)}
        pids = {p for (p,) in db.query("SELECT DISTINCT pid FROM echo")}
    assert os.getpid() not in pids and kind.ran == []  # played elsewhere
    assert len(kind.summaries) == 2 and sum(n for _, n in kind.summaries) == 300
    assert pids <= {pid for pid, _ in kind.summaries}  # (a worker that started late may have played none)


def test_kinds_that_are_not_cpu_bound_stay_in_this_process(tmp_path: Path) -> None:
    kind = Echo()
    with open_db(tmp_path / "e.db") as db:
        run(kind, range(50), db, workers=2)
        assert {p for (p,) in db.query("SELECT DISTINCT pid FROM echo")} == {os.getpid()}
    assert engine.worker_count(None, 10_000, forkable=False) == 1
    assert engine.worker_count(1, 10_000, forkable=True) == 1
    if forked.fork_available():
        assert engine.worker_count(4, 3, forkable=True) == 3


class Grouped(Echo):
    """Jobs whose number has the same remainder by 7 share an affinity (as a task's episodes do)."""

    def affinity(self, item: int) -> int:
        return item % 7


def test_jobs_of_one_affinity_form_one_unit_in_plan_order() -> None:
    todo = [(f"job-{i}", i) for i in range(16)]
    assert engine.affinity_groups(Echo(), todo) is None  # no affinities: every job is a unit
    assert engine.affinity_groups(Grouped(), todo) == [[r + 7 * k for k in range(3) if r + 7 * k < 16]
                                                       for r in range(7)]


@pytest.mark.skipif(not forked.fork_available(), reason="worker processes need fork")
def test_jobs_of_one_affinity_play_in_one_worker(tmp_path: Path) -> None:
    with open_db(tmp_path / "e.db") as db:
        tally = run(Grouped(cpu_bound=True), range(140), db, concurrency=4, workers=2)
        assert tally.played == 140 and stored(db) == {f"job-{i}": i * i for i in range(140)}
        pids: dict[int, set[int]] = {}
        for key, pid in db.query("SELECT key, pid FROM echo"):
            pids.setdefault(int(key.removeprefix("job-")) % 7, set()).add(pid)
    assert len(pids) == 7 and all(len(p) == 1 for p in pids.values())
    assert os.getpid() not in set().union(*pids.values())
    assert engine.worker_count(None, 40, forkable=True, min_jobs=32) == min(forked.available_cpus(), 40)
    assert engine.worker_count(None, 31, forkable=True, min_jobs=32) == 1
