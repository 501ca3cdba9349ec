"""Studies of CPU-bound providers played in forked worker processes, with the parent as the one writer.

Each test proves the episodes ran in worker processes (the oracle below signs its last
answer with the id of the process that played it), then checks what must not change:
the same rows as in one process, resume after an interrupted run, the progress, and a
worker that raises or dies surfacing as a clear error that keeps the rows received.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.reliability import GATED_RUN
from toolbias.base import forked
from toolbias.base.forked import WorkerError, available_cpus
from toolbias.catalog import load_catalog
from toolbias.providers.base import ModelAPI, ModelOutput
from toolbias.providers.oracle import OracleProvider
from toolbias.providers.scripted import ScriptedProvider
from toolbias.store import Store
from toolbias.study.runner import (
    MIN_FORKED_EPISODES,
    Progress,
    StudyConfig,
    build_study,
    run_study,
    worker_count,
)

pytestmark = pytest.mark.skipif(not forked.fork_available(), reason="worker processes need fork")

CATALOG = load_catalog("builtin")
TASKS = sorted(CATALOG.tasks, key=lambda t: (t.domain, t.id))[:150]
VARIANTS = "native,transaction,fully_merged"  # a plain schema, a cross-call protocol, a dispatcher
N = 3 * len(TASKS)


def signing(model: ModelAPI) -> ModelAPI:
    """``model``, whose last answer names the process that played the episode."""
    bind = model.for_episode

    def for_episode(task: Any, codec: Any) -> ModelAPI:
        episode = bind(task, codec)
        calls = episode.generate

        async def generate(*args: Any) -> ModelOutput:
            out = await calls(*args)
            return out if out.tool_calls else ModelOutput(content=f"Done (pid {os.getpid()}).")

        episode.generate = generate  # type: ignore[method-assign]
        return episode

    model.for_episode = for_episode  # type: ignore[method-assign]
    return model


def oracle() -> ModelAPI:
    return signing(OracleProvider())


class FailingOracle(OracleProvider):
    """Raises (or kills its process) on one task, in worker processes only."""

    def __init__(self, task_id: str, how: str) -> None:
        super().__init__()
        self.task_id, self.how, self.parent = task_id, how, os.getpid()

    def for_episode(self, task: Any, codec: Any) -> ModelAPI:
        if task.id == self.task_id and os.getpid() != self.parent:
            if self.how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            raise RuntimeError(f"boom on {task.id}")
        return super().for_episode(task, codec)


def study(model: ModelAPI, workers: int | None, variants: str = VARIANTS) -> Any:
    cfg = StudyConfig(model="oracle", catalog="builtin", variants=variants, workers=workers, concurrency=4)
    return build_study(cfg, model=model, tasks=TASKS, catalog=CATALOG)


def stored(path: Path) -> dict[str, tuple[Any, ...]]:
    """key -> everything stored about the episode except timings and the signing process."""
    with Store(path) as s:
        rows = list(s.rows(status=None))
    out = {}
    for r in rows:
        record = {k: v for k, v in r.record.items() if k not in ("wall_s", "model_latency_s")}
        text = re.sub(r"pid \d+", "pid *", json.dumps(record, sort_keys=True))
        out[r.key] = (r.status, r.variant, r.task_id, r.success, r.failure_mode, r.termination, r.n_executed,
                      r.n_rejections, r.turns, text)
    return out


def signers(path: Path) -> set[int]:
    """The processes that played the stored episodes (every one is signed)."""
    with Store(path) as s:
        found = [re.fullmatch(r"Done \(pid (\d+)\)\.", r.record["messages"][-1]["content"] or "")
                 for r in s.rows(status=None)]
    assert found and all(found)
    return {int(m.group(1)) for m in found if m}


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers send every 8 rows (forked workers inherit the patched value): rows arrive early."""
    monkeypatch.setattr(forked, "BATCH_ROWS", 8)


def test_workers_store_the_same_rows_as_one_process(tmp_path: Path) -> None:
    one, many = tmp_path / "one.db", tmp_path / "many.db"
    p1 = run_study(study(oracle(), workers=1), one)
    p2 = run_study(study(oracle(), workers=2), many)
    assert signers(one) == {os.getpid()}
    assert signers(many) and os.getpid() not in signers(many)  # played in worker processes
    assert (p2.total, p2.done, p2.successes, p2.infra_errors) == (p1.total, p1.done, p1.successes, 0) == (N, N, N, 0)
    assert stored(many) == stored(one)


def test_workers_store_the_same_failures_as_one_process(tmp_path: Path) -> None:
    """A scripted model making mistakes (rejections, wrong and missing actions): same scores and records."""
    turns = {t.id: [{"tool_calls": [{"name": t.gold[0].tool, "arguments": dict(t.gold[0].arguments)}]}]
             for t in TASKS}
    script = {"default": [], "tasks": turns}
    one, many = tmp_path / "one.db", tmp_path / "many.db"
    run_study(study(signing(ScriptedProvider(script=script)), workers=1), one)
    run_study(study(signing(ScriptedProvider(script=script)), workers=2), many)
    assert signers(many) and os.getpid() not in signers(many)
    got = stored(many)
    assert got == stored(one)
    modes = {v[4] for v in got.values()}
    assert any(v[3] for v in got.values()) and len(modes - {None}) >= 2, modes


def test_progress_and_wrapper_stats_count_every_worker_episode(tmp_path: Path) -> None:
    seen: list[Progress] = []
    built = study(oracle(), workers=2)
    prog = run_study(built, tmp_path / "s.db", on_progress=lambda p: seen.append(Progress(**vars(p))))
    assert os.getpid() not in signers(tmp_path / "s.db")
    assert [p.done for p in seen] == list(range(1, N + 1))  # once per episode, as in one process
    assert seen[-1].successes == prog.successes == N
    assert built.model.stats.calls == 2 * N  # each oracle episode: the calls, then the answer


def test_interrupted_run_keeps_finished_rows_and_resumes(tmp_path: Path, small_batches: None) -> None:
    db, ref = tmp_path / "s.db", tmp_path / "ref.db"

    def interrupt(p: Progress) -> None:
        if p.done >= 20:
            raise KeyboardInterrupt  # what Ctrl-C raises in the parent

    with pytest.raises(KeyboardInterrupt):
        run_study(study(oracle(), workers=2), db, on_progress=interrupt)
    kept = stored(db)
    assert 20 <= len(kept) < N  # the rows counted, and what the stopping workers had finished
    assert os.getpid() not in signers(db)
    again = run_study(study(oracle(), workers=2), db)
    assert again.skipped == len(kept) and again.done == N and again.successes == N  # stored successes count on resume (issue 24 item 5)
    run_study(study(oracle(), workers=1), ref)
    assert stored(db) == stored(ref)


@pytest.mark.parametrize("how", ["raise", "kill"])
def test_a_failing_worker_is_a_clear_error_and_received_rows_are_kept(tmp_path: Path, small_batches: None,
                                                                       how: str) -> None:
    db = tmp_path / "s.db"
    bad = TASKS[-1].id  # the last task of each variant: rows of earlier ones have arrived by then
    with pytest.raises(WorkerError) as err:
        run_study(study(signing(FailingOracle(bad, how)), workers=2), db)
    message = str(err.value)
    if how == "raise":
        assert "RuntimeError: boom on " + bad in message and "Traceback" in message
    else:
        assert "died (killed by signal 9)" in message
    assert "re-run to resume" in message
    kept = stored(db)
    assert kept and all(v[2] != bad and v[3] for v in kept.values())
    if how == "raise":  # a worker that raises first sends what it finished: only the other's last chunk is lost
        assert len(kept) >= len(TASKS) - 1 - 8
    # (a killed worker takes with it the rows it had not sent yet)
    again = run_study(study(oracle(), workers=2), db)  # the fix: resume plays the rest
    assert again.skipped == len(kept) and again.done == N


#: each worker plays this many episodes (one batch), sends them, then waits to be stopped
GATE = forked.BATCH_ROWS
#: a hang guard only (what is waited for takes well under a second on an idle machine)
HANG_S = 300
RUN_ARGS = ["run", "--model", "oracle", "--variants", "native,transaction,fully_merged,fully_split", "--tasks",
            "1500", "--workers", "2"]


def _default_sigint() -> None:
    """In the child before it runs: SIGINT's default disposition, which the Ctrl-C tests rely on. A
    suite started with SIGINT ignored (``nohup pytest &``, some CI runners) would pass SIG_IGN on,
    and Python keeps an inherited SIG_IGN: the child would never see the Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start_run_with_workers(db: Path, stderr: int) -> subprocess.Popen[bytes]:
    """`toolbias run` of 6,000 oracle episodes in 2 workers, in its own process group, returned
    once rows are stored. Its workers wait after their first batch until the run is stopped or
    its parent is gone (tests/support/gated_run.py), so it is still running however fast the machine."""
    cmd = [sys.executable, str(GATED_RUN), str(GATE), *RUN_ARGS, "--store", str(db)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True,
                            preexec_fn=_default_sigint)
    give_up = time.monotonic() + HANG_S
    while _done(db) == 0 and proc.poll() is None and time.monotonic() < give_up:
        time.sleep(0.05)  # waiting for a condition (rows stored, or the run ended), not racing it
    assert proc.poll() is None, proc.stderr.read().decode()[-2000:] if proc.stderr else "the run ended"
    assert _done(db) > 0, f"no rows stored within {HANG_S} s"
    return proc


def test_ctrl_c_on_the_command_line_stops_the_workers_and_keeps_their_rows(tmp_path: Path) -> None:
    """SIGINT to the process group, as a terminal sends it: the parent stops the workers, stores
    what they finished, exits 130; no process is left; re-running completes the study."""
    db = tmp_path / "s.db"
    proc = _start_run_with_workers(db, stderr=subprocess.PIPE)
    stored_before = _done(db)
    try:
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err.decode()[-2000:]  # the command's interrupted status
    assert b"Traceback" not in err and b"interrupted: finished results are kept" in err
    with pytest.raises(ProcessLookupError):
        os.killpg(proc.pid, 0)  # the workers went with it
    kept = _done(db)
    # what was stored before the interrupt, plus the episodes in flight when it came (at most
    # --concurrency per worker): never the whole study
    assert 0 < stored_before <= kept <= 2 * (GATE + 8) < 6000
    cmd = [sys.executable, "-c", "from toolbias.cli import main; main()", *RUN_ARGS, "--store", str(db)]
    subprocess.run(cmd, check=True, capture_output=True, timeout=600)
    assert _done(db) == 6000


def test_ctrl_c_reaches_the_run_when_the_suite_ignores_sigint(tmp_path: Path) -> None:
    """The suite started as a background job (SIGINT ignored, inherited by every child): the run
    the Ctrl-C tests start still gets SIGINT's default disposition, so it stops and exits 130."""
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        proc = _start_run_with_workers(tmp_path / "s.db", stderr=subprocess.PIPE)
    finally:
        signal.signal(signal.SIGINT, before)
    try:
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)  # a hang guard: an ignored SIGINT never ends the run
    except subprocess.TimeoutExpired:
        err = b"the run ignored SIGINT"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err.decode()[-2000:]


def test_workers_of_a_killed_run_exit(tmp_path: Path) -> None:
    """SIGKILL of the parent (nothing is cleaned up): its workers notice and exit, none is left behind."""
    if not Path("/proc/self/stat").exists():
        pytest.skip("needs /proc")
    db = tmp_path / "s.db"
    proc = _start_run_with_workers(db, stderr=subprocess.DEVNULL)
    try:
        assert len(_group(proc.pid)) == 3  # the parent and its two workers
        proc.kill()
        proc.wait()
        give_up = time.monotonic() + HANG_S
        while _group(proc.pid) and time.monotonic() < give_up:  # the workers see their parent gone
            time.sleep(0.1)
        assert _group(proc.pid) == []
    finally:
        for pid in _group(proc.pid):
            os.kill(pid, signal.SIGKILL)


def _group(pgid: int) -> list[int]:
    """Live (not zombie) processes of a process group."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            out.append(int(stat.parent.name))
    return out


def _done(path: Path) -> int:
    if not path.exists():
        return 0
    try:
        with sqlite3.connect(path, timeout=30) as db:
            return int(db.execute("SELECT COUNT(*) FROM episodes WHERE status='done'").fetchone()[0])
    except sqlite3.OperationalError:
        return 0


def test_worker_count_policy() -> None:
    oracle = study(OracleProvider(), workers=None)
    assert worker_count(oracle, MIN_FORKED_EPISODES - 1) == 1  # small plans: forking is not worth it
    assert worker_count(oracle, MIN_FORKED_EPISODES) == min(available_cpus(), MIN_FORKED_EPISODES)
    assert worker_count(study(OracleProvider(), workers=3), 10) == 3
    assert worker_count(study(OracleProvider(), workers=3), 2) == 2
    assert worker_count(study(OracleProvider(), workers=1), 10**6) == 1
    calls = study(ScriptedProvider(script=lambda *a: None), workers=4)  # the caller's code: stays here
    assert worker_count(calls, 10**6) == 1

    class Remote(ModelAPI):
        spec = "remote"

        async def generate(self, *args: Any) -> ModelOutput:
            return ModelOutput(content="")

    assert worker_count(study(Remote(), workers=4), 10**6) == 1


def test_worker_processes_are_reaped(tmp_path: Path) -> None:
    import multiprocessing

    run_study(study(oracle(), workers=2, variants="native"), tmp_path / "s.db")
    assert os.getpid() not in signers(tmp_path / "s.db")
    assert multiprocessing.active_children() == []


def test_a_message_cut_short_by_a_dying_worker_is_its_death() -> None:
    """A worker killed while its outbox thread was writing leaves half a message in the pipe:
    the parent reads it as that worker's death, not as a crash of its own."""
    import multiprocessing
    import struct

    ctx = multiprocessing.get_context("fork")
    reader, writer = ctx.Pipe(duplex=False)

    def die_while_sending() -> None:
        os.write(writer.fileno(), struct.pack("!i", 1000) + b"part of a batch")  # the size, then less
        os.kill(os.getpid(), signal.SIGKILL)

    proc = ctx.Process(target=die_while_sending)
    proc.start()
    writer.close()
    proc.join()
    pool = forked._Pool(1, 1, work=None, chunk=1)  # type: ignore[arg-type]
    pool.procs, pool.conns, pool.open = [proc], [reader], {0}
    taken: list[Any] = []
    pool._read(0, taken.append)
    assert pool.open == set() and taken == []
    assert pool.errors == ["worker 1 of 1 died (killed by signal 9) before finishing"]
