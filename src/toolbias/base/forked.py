"""Work in forked worker processes, with one writer: the parent.

For providers whose work is this process's CPU (the oracle, scripted and replayed
models), a study on N cores runs about N times faster in N processes. Each worker is a
fork of the parent, so it inherits the built study and nothing is pickled going in. It
pulls chunks of item indices from a shared counter (a busy or slow worker simply takes
fewer), runs the caller's coroutine over them, and sends what that emits (rows ready to
insert) in batches through its own pipe. The parent receives the batches as they come
and is the only process that writes. A worker that raises or dies is an error in the
parent, raised once it has received what the other workers had finished; Ctrl-C or an
error in the parent stops the workers the same way. Unix only (fork).
"""

from __future__ import annotations

import asyncio
import gc
import multiprocessing as mp
import os
import queue
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager, suppress
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Any

from ..errors import ToolbiasError

Batch = list[Any]
Emit = Callable[[Any], None]
#: a worker's job: run the items whose indices it is given, emitting each result; what it
#: returns (picklable) reaches the parent when the worker is done
Work = Callable[[Iterator[int], Emit], Coroutine[Any, Any, Any]]

#: a worker sends its results when this many wait, or the oldest waited this long
BATCH_ROWS = 256
BATCH_S = 0.5
#: after a stop, how long finishing workers get to send what they have
DRAIN_S = 10.0


class WorkerError(ToolbiasError):
    """A worker process raised or died. What it and the others had finished was received."""


def fork_available() -> bool:
    """Fork exists and is safe to use: not on macOS, whose system frameworks are not fork-safe
    (CPython starts processes by spawning there), nor on Windows, which has no fork."""
    return sys.platform != "darwin" and "fork" in mp.get_all_start_methods()


def available_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))  # the cores this process may use (containers, taskset)
    except AttributeError:
        return os.cpu_count() or 1


async def run_forked(n_items: int, n_workers: int, work: Work, receive: Callable[[Batch], None],
                     keep: Callable[[Batch], None], *, chunk: int | None = None) -> list[Any]:
    """Run ``work`` over items ``0..n_items-1`` in ``n_workers`` forked processes; return what
    each worker's ``work`` returned. ``receive`` gets every batch of emitted results in the
    parent; after a failure or interrupt, ``keep`` gets the batches still arriving (the
    finishing workers'), then the exception is raised."""
    pool = _Pool(n_items, n_workers, work, chunk or max(1, min(64, n_items // (32 * n_workers))))
    try:
        pool.start()
        await pool.receive_all(receive)
    except BaseException:
        pool.stop_and_drain(keep)
        raise
    finally:
        pool.reap()
    return [pool.results[i] for i in sorted(pool.results)]


class _Pool:
    def __init__(self, n_items: int, n_workers: int, work: Work, chunk: int) -> None:
        self.n_items, self.n_workers, self.work, self.chunk = n_items, n_workers, work, chunk
        self.ctx = mp.get_context("fork")
        self.counter = self.ctx.Value("q", 0)   # the next unclaimed index
        self.stop = self.ctx.RawValue("b", 0)   # a flag workers read between items: no lock needed
        self.procs: list[BaseProcess] = []
        self.conns: list[Connection] = []
        self.open: set[int] = set()            # workers whose pipe is not at EOF yet
        self.results: dict[int, Any] = {}
        self.errors: list[str] = []
        self.failed: set[int] = set()          # workers that reported an error

    def start(self) -> None:
        gc.freeze()  # the study is shared copy-on-write: children's collections must not touch it
        try:
            for i in range(self.n_workers):
                reader, writer = self.ctx.Pipe(duplex=False)
                proc = self.ctx.Process(target=_worker, name=f"toolbias-worker-{i + 1}", daemon=True,
                                        args=(writer, [*self.conns, reader], self.counter, self.stop, self.n_items,
                                              self.chunk, self.work, os.getpid()))
                with _sigint_deferred():
                    proc.start()
                writer.close()  # only the worker holds its end: EOF here once it is gone
                self.procs.append(proc)
                self.conns.append(reader)
                self.open.add(i)
        finally:
            gc.unfreeze()

    async def receive_all(self, receive: Callable[[Batch], None]) -> None:
        """Receive until every worker is done, on this event loop (so Ctrl-C, a cancellation,
        reaches the parent while it waits)."""
        loop = asyncio.get_running_loop()
        ready: asyncio.Queue[int] = asyncio.Queue()

        def on_ready(i: int) -> None:
            loop.remove_reader(self.conns[i].fileno())  # until read: one wake-up per arrival
            ready.put_nowait(i)

        for i in self.open:
            loop.add_reader(self.conns[i].fileno(), on_ready, i)
        try:
            while self.open:
                i = await ready.get()
                self._read(i, receive)
                if self.errors:
                    raise self._error()
                if i in self.open:
                    loop.add_reader(self.conns[i].fileno(), on_ready, i)
        finally:
            for i in self.open:
                loop.remove_reader(self.conns[i].fileno())

    def stop_and_drain(self, keep: Callable[[Batch], None]) -> None:
        """Stop the workers and take what they send while they finish (blocking: this runs
        while an exception, maybe a cancellation, is on its way out)."""
        self.stop.value = 1
        deadline = time.monotonic() + DRAIN_S
        while self.open and (left := deadline - time.monotonic()) > 0:
            by_conn = {self.conns[i]: i for i in self.open}
            for conn in wait(list(by_conn), timeout=left):
                assert isinstance(conn, Connection)
                self._read(by_conn[conn], keep)

    def reap(self) -> None:
        for proc in self.procs:
            if proc.is_alive():
                proc.terminate()
            proc.join(2)
            if proc.is_alive():
                proc.kill()
                proc.join()
        for i in self.open:
            self.conns[i].close()
        self.open.clear()

    def _read(self, i: int, take: Callable[[Batch], None]) -> None:
        """Everything worker ``i`` has sent so far."""
        conn = self.conns[i]
        while conn.poll():
            try:
                kind, payload = conn.recv()
            except (EOFError, OSError):  # gone; OSError: killed part-way through a message (lost)
                self._gone(i)
                return
            if kind == "rows":
                take(payload)
            elif kind == "done":
                self.results[i] = payload
            else:
                self.failed.add(i)
                self.errors.append(f"worker {i + 1} of {self.n_workers} failed: {payload}")

    def _gone(self, i: int) -> None:
        self.conns[i].close()
        self.open.discard(i)
        if i in self.results or i in self.failed:
            return
        proc = self.procs[i]
        proc.join(5)
        code = proc.exitcode
        how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        self.errors.append(f"worker {i + 1} of {self.n_workers} died ({how}) before finishing")

    def _error(self) -> WorkerError:
        more = f"\n({len(self.errors) - 1} more worker errors)" if len(self.errors) > 1 else ""
        return WorkerError(self.errors[0] + more,
                           fix="the episodes finished before it are stored: re-run to resume, or run with "
                               "--workers 1 to play in this process")


@contextmanager
def _sigint_deferred() -> Iterator[None]:
    """Hold Ctrl-C while forking, so a new worker sets it to be ignored before it can arrive."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


class _Outbox:
    """A worker's messages to the parent, in order, sent by a thread of their own: a pipe holds
    64 KiB and a batch of rows about a megabyte, so sending waits while the parent writes the
    store, and the worker's playing should not."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.queue: queue.Queue[tuple[str, Any] | None] = queue.Queue(maxsize=16)  # bounded: memory
        self.failed: BaseException | None = None
        self.rows: Batch = []
        self.since = time.monotonic()
        self.thread = threading.Thread(target=self._send_all, name="toolbias-outbox", daemon=True)
        self.thread.start()

    def emit(self, item: Any) -> None:
        self.rows.append(item)
        if len(self.rows) >= BATCH_ROWS or time.monotonic() - self.since >= BATCH_S:
            self.flush()

    def flush(self) -> None:
        rows, self.rows, self.since = self.rows, [], time.monotonic()
        if rows:
            self.post(("rows", rows))

    def post(self, message: tuple[str, Any]) -> None:
        if self.failed is not None:  # the parent is gone (or a message could not be sent): stop
            raise self.failed
        self.queue.put(message)

    def close(self) -> None:
        self.queue.put(None)
        self.thread.join()

    def _send_all(self) -> None:
        while (message := self.queue.get()) is not None:
            if self.failed is not None:
                continue  # drop the rest; the main thread stops at its next post
            try:
                self.conn.send(message)
            except BaseException as exc:
                self.failed = exc
                with suppress(Exception):  # say why, if the parent is still there
                    self.conn.send(("error", _describe(exc)))


def _worker(conn: Connection, parents_ends: list[Connection], counter: Any, stop: Any, n_items: int, chunk: int,
            work: Work, parent: int) -> None:
    """A worker process's life: claim chunks, run them, send results; errors go to the parent as data."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's: it stops the workers, keeping rows
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    for end in parents_ends:  # only the parent reads: if it dies, sending fails instead of blocking forever
        end.close()
    box = _Outbox(conn)

    def indices() -> Iterator[int]:
        while not stop.value and os.getppid() == parent:  # an orphan stops: nobody would store its rows
            with counter.get_lock():
                start = counter.value
                counter.value = start + chunk
            if start >= n_items:
                return
            for j in range(start, min(start + chunk, n_items)):
                if stop.value:
                    break
                yield j
        box.flush()  # stopping: what is finished goes now, not after the items still in flight

    try:
        result: Any = asyncio.run(work(indices(), box.emit))
        box.flush()
        box.post(("done", result))
    except BaseException as exc:  # everything reaches the parent, as data
        with suppress(BaseException):  # the finished rows first
            box.flush()
        with suppress(BaseException):  # the parent may be gone
            box.post(("error", _describe(exc)))
    finally:
        box.close()
        conn.close()


def _describe(exc: BaseException) -> str:
    """The exception and where it happened (the worker's traceback), as text."""
    trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip()
    return f"{type(exc).__name__}: {exc}\n{trace}"
