"""A deterministic model behind the loopback server, and the kill/resume helpers of the reliability checks.

Used by tests/study/test_reliability.py and, at full size, by bench/faults.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.support.servers import Reply
from toolbias.catalog import Catalog
from toolbias.catalog.model import Task
from toolbias.store import Store
from toolbias.variants.codec import Codec

TOOLBIAS = shutil.which("toolbias") or str(Path(sys.executable).with_name("toolbias"))
#: ``python GATED_RUN KEEP run ...``: the CLI with an oracle whose workers wait after KEEP episodes
#: until the run is stopped or orphaned (a run known to be in progress when a test interrupts it)
GATED_RUN = Path(__file__).with_name("gated_run.py")
#: two of the paper's representative variants: a plain one and a cross-call protocol
VARIANTS = "native,transaction"
#: the catalog the studies run on (the built-in one; another spec for a quick local check)
CATALOG = os.environ.get("TOOLBIAS_RELIABILITY_CATALOG", "builtin")
#: record fields that are timings, not results
TIMINGS = ("wall_s", "model_latency_s")


# --------------------------------------------------------------------------- a deterministic model over HTTP


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class HttpOracle:
    """A deterministic model for the loopback server (``FakeOpenAIServer(responder=...)``).

    It recognises the task by the user query and the variant by the tool list, and plays
    the gold through the codec as the oracle does, except that a fixed share of tasks
    (picked by a hash of the task id) is damaged: the last call dropped, or an argument
    value changed. So results hold successes and several failure modes, and depend on
    nothing but the request.
    """

    def __init__(self, catalog: Catalog, codecs: Sequence[Codec], flawed: float = 0.3) -> None:
        self.by_query: dict[str, Task] = {}
        for t in catalog.tasks:
            self.by_query.setdefault(t.query, t)
        self.by_tools: dict[str, Codec] = {}
        for codec in codecs:
            for d in catalog.domains:
                self.by_tools.setdefault(_canon(codec.schema(d.name)), codec)
        self.flawed = flawed

    def __call__(self, body: dict[str, Any]) -> Reply:
        messages = body.get("messages") or []
        if not messages or messages[-1].get("role") != "user":
            return Reply.text("Done.")
        task = self.by_query.get(messages[-1].get("content"))
        codec = self.by_tools.get(_canon(body.get("tools") or []))
        if task is None or codec is None:
            return Reply.text("I cannot do that with these tools.")
        calls = [(c.name, dict(c.arguments)) for c in codec.encode(task.gold)]
        h = int(hashlib.sha256(task.id.encode()).hexdigest()[:8], 16) % 1000 / 1000
        if h < self.flawed / 2 and len(calls) > 1:
            calls = calls[:-1]                                   # under-execution
        elif h < self.flawed:
            name, args = calls[-1]
            for k, v in args.items():
                if isinstance(v, (str, int)) and not isinstance(v, bool):
                    args[k] = v + 1 if isinstance(v, int) else v + "_x"  # a wrong value
                    break
            calls[-1] = (name, args)
        return Reply.calls(*calls)


# --------------------------------------------------------------------------- helpers


def comparable(path: Path | str) -> dict[str, tuple[Any, ...]]:
    """key -> everything stored about the episode except timings; checks one row per episode."""
    with Store(path) as s:
        rows = list(s.rows(status=None))
        dup_keys = s.db.execute("SELECT key FROM episodes GROUP BY key HAVING COUNT(*) > 1").fetchall()
        dup_cells = s.db.execute("SELECT study, variant, task_id, COUNT(*) FROM episodes "
                                 "GROUP BY study, variant, task_id HAVING COUNT(*) > 1").fetchall()
        integrity = s.db.execute("PRAGMA integrity_check").fetchone()[0]
    assert integrity == "ok", integrity
    assert not dup_keys and not dup_cells, (dup_keys[:5], dup_cells[:5])
    out = {}
    for r in rows:
        record = {k: v for k, v in r.record.items() if k not in TIMINGS}
        out[r.key] = (r.status, r.variant, r.task_id, r.success, r.failure_mode, r.termination, r.n_executed,
                      r.n_rejections, r.turns, r.prompt_tokens, r.completion_tokens, _canon(record))
    return out


def done_count(path: Path) -> int:
    if not path.exists():
        return 0
    try:
        with sqlite3.connect(path, timeout=30) as db:
            return int(db.execute("SELECT COUNT(*) FROM episodes WHERE status='done'").fetchone()[0])
    except sqlite3.OperationalError:  # killed before the schema was written
        return 0


def startup_time(cmd: list[str], scratch: Path, env: dict[str, str] | None = None) -> float:
    """Seconds ``cmd`` (a ``toolbias run`` without ``--store``) needs for one episode: start-up."""
    t0 = time.perf_counter()
    subprocess.run(cmd + ["--tasks", "1", "--store", str(scratch)], check=True, capture_output=True, env=env)
    return time.perf_counter() - t0


def kill_and_resume(cmd: list[str], store: Path, *, kills: int, startup: float, full: float, total: int,
                    seed: int, env: dict[str, str] | None = None, timeout: float = 600) -> list[tuple[float, int]]:
    """Start ``cmd``, SIGKILL it after a random delay, ``kills`` times, then let it finish.

    One kill in five falls during start-up (opening the store, checking the study); the
    others while episodes run, at a uniform moment of the time the remaining episodes
    need (``full`` is an uninterrupted run's time, ``total`` its episodes). Returns
    (delay, finished episodes after the kill) per kill; asserts nothing is ever lost."""
    rnd = random.Random(seed)
    history: list[tuple[float, int]] = []
    before = done_count(store)
    for _ in range(kills):
        remaining = max(total - before, 0) / total
        if rnd.random() < 0.2:
            delay = rnd.uniform(0.05, startup)
        else:
            delay = rnd.uniform(startup, startup + max(0.2, (full - startup) * remaining))
        with tempfile.TemporaryFile() as err:  # a file, not a pipe: a full pipe would stall the child
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env)
            try:
                proc.wait(timeout=delay)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
            else:  # it finished before the kill: nothing left to interrupt
                err.seek(0)
                assert proc.returncode == 0, err.read().decode(errors="replace")[-3000:]
                break
        now = done_count(store)
        assert now >= before, f"finished episodes went from {before} to {now} after a SIGKILL"
        history.append((delay, now))
        before = now
    final = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    assert final.returncode == 0, final.stderr[-3000:]
    return history
