"""The default job (`toolbias run` with no options) timed as a user runs it, on the embedded model's
batched path against its one-sequence path in the same run: wall time, CPU time (user + system
of the command and its children), CPU-seconds per episode, tokens per second, peak memory, the
machine's load, and the finding each path printed.

    python -m bench.bench_default_job [--dir DIR] [--paths batched,one] [-- extra toolbias run options]

Per path it also prints where the work went: prompt tokens evaluated and taken from the KV cache
per episode (from the store), generated tokens, and on the batched path the decoding thread's
counters (:class:`toolbias.providers.llama_batch.DecoderStats`: steps, mean sequences per step,
seconds inside ``llama_decode`` for prompt-evaluating and generating steps, sampling, the
thread's own CPU), written by the child process when the provider closes.

The ``warm`` path is the batched path run a second time: it loads the system+tools prefixes the
``batched`` run saved on disk (:mod:`toolbias.providers.kv_prefixes`) instead of evaluating them;
the others start with an empty prefix folder, as a first run does.

Goal (issue 23): at most 3 min 30 s wall on an idle 2-core machine, with a finding as clear as the
one-sequence path's. The paths differ only in ``TOOLBIAS_LOCAL_BATCH`` (unset: the provider's
default batch; ``1``: one request at a time through ``create_completion``). On a shared machine
the wall time grows with the load; CPU time much less, and CPU / cores is the wall time to expect
on the same cores when idle (llama.cpp keeps every core busy). A fresh store per path (the job
resumes otherwise); the weights are assembled before the clock starts.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

#: path name -> TOOLBIAS_LOCAL_BATCH (None: the provider's default); ``warm`` is ``batched`` run
#: again with the prompt prefixes the ``batched`` run saved (a repeated study), every other path
#: starts with no saved prefixes (a first run)
PATHS: dict[str, str | None] = {"batched": None, "one": "1", "batch8": "8", "warm": None}
#: toolbias run options a path adds (16 sequences need 16 episodes in flight: --concurrency)
PATH_OPTIONS: dict[str, list[str]] = {"batch8": ["--concurrency", "8"]}


@dataclass
class Timing:
    path: str
    rc: int
    wall_s: float
    cpu_s: float
    rss_mb: float
    load_before: float
    load_after: float
    episodes: int
    prompt_tokens: int
    completion_tokens: int
    #: prompt tokens taken from the KV cache (the rest were evaluated)
    cached_tokens: int
    lines: list[str]
    #: the batched path's DecoderStats (as a dict), else None
    decoder: dict[str, float] | None = None


def _store_totals(db: Path) -> tuple[int, int, int, int]:
    """(episodes, prompt tokens, completion tokens, cached prompt tokens) stored by the run."""
    if not db.is_file():
        return 0, 0, 0, 0
    from toolbias.store import Store

    with sqlite3.connect(db) as con:
        row = con.execute("SELECT COUNT(*), COALESCE(SUM(prompt_tokens), 0), COALESCE(SUM(completion_tokens), 0) "
                          "FROM episodes").fetchone()
    store = Store(db)
    try:
        cached = sum(int(r.record.get("cached_prompt_tokens", 0)) for r in store.rows(status=None))
    finally:
        store.close()
    return int(row[0]), int(row[1]), int(row[2]), cached


#: where the child writes the decoder's counters (read back by :func:`time_path`)
STATS_ENV = "TOOLBIAS_BENCH_DECODER_STATS"


def child() -> None:
    """``toolbias run`` as the CLI runs it, writing the batched decoder's counters to
    ``$TOOLBIAS_BENCH_DECODER_STATS`` when it closes (the bench's child process)."""
    from dataclasses import asdict

    from toolbias.cli import main as cli_main
    from toolbias.providers.llama_batch import BatchDecoder

    close = BatchDecoder.close

    def close_and_write(self: BatchDecoder) -> None:
        close(self)
        Path(os.environ[STATS_ENV]).write_text(json.dumps(asdict(self.stats)))

    BatchDecoder.close = close_and_write  # type: ignore[method-assign]
    cli_main()


def time_path(path: str, workdir: Path, extra: list[str]) -> Timing:
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "toolbias.db").unlink(missing_ok=True)
    env = {**os.environ, "COLUMNS": "160"}
    env.pop("TOOLBIAS_LOCAL_BATCH", None)
    if PATHS[path] is not None:
        env["TOOLBIAS_LOCAL_BATCH"] = str(PATHS[path])
    # saved prompt prefixes: warm reuses the batched run's, every other path starts empty
    kv = workdir.parent / ("batched" if path == "warm" else path) / "kv"
    if path != "warm":
        shutil.rmtree(kv, ignore_errors=True)
    env["TOOLBIAS_KV_CACHE"] = str(kv)
    stats_file = workdir / "decoder-stats.json"
    stats_file.unlink(missing_ok=True)
    env[STATS_ENV] = str(stats_file)
    # the child imports this module from the store's folder: the repository root on its path
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    cmd = [sys.executable, "-c", "from bench.bench_default_job import child; child()", "run",
           *PATH_OPTIONS.get(path, []), *extra]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    err = [line for line in proc.stderr.splitlines() if not line.startswith("llama_context")]
    if proc.returncode:
        print("\n".join(err)[-3000:], file=sys.stderr)
    n, prompt, completion, cached = _store_totals(workdir / "toolbias.db")
    lines = [line for line in proc.stdout.splitlines() if line.strip()][-6:]
    decoder = json.loads(stats_file.read_text()) if stats_file.is_file() else None
    return Timing(path, proc.returncode, wall, cpu, after.ru_maxrss / 1024, load_before, os.getloadavg()[0], n,
                  prompt, completion, cached, lines, decoder)


def print_work(t: Timing) -> None:
    """Where a path's work went: tokens per episode, and the decoding thread's counters."""
    if not t.episodes:
        return
    n = t.episodes
    print(f"{t.path}: per episode {(t.prompt_tokens - t.cached_tokens) / n:.0f} prompt tokens evaluated, "
          f"{t.cached_tokens / n:.0f} taken from the KV cache, {t.completion_tokens / n:.0f} generated")
    d = t.decoder
    if d and d.get("steps"):
        steps = d["steps"]
        gen_s = d["decode_s"] - d["prompt_decode_s"]
        print(f"  decoder: {d['requests']} requests, {steps} steps ({d['prompt_steps']} with prompt tokens), "
              f"{d['generating'] / steps:.1f} sequences generating per step; prompt tokens evaluated "
              f"{d['prompt_tokens']}, reused {d['reused_tokens']}; generated {d['generated_tokens']}")
        print(f"  llama_decode {d['decode_s']:.0f} s wall ({d['prompt_decode_s']:.0f} in steps with prompt tokens, "
              f"{gen_s:.0f} generating only: {1000 * gen_s / max(1, steps - d['prompt_steps']):.0f} ms/step); "
              f"steps {d['step_s']:.0f} s, of which sampling {d['sample_s']:.1f} s and other Python "
              f"{d['step_s'] - d['decode_s'] - d['sample_s']:.1f} s; decoding thread CPU {d['thread_cpu_s']:.0f} s; "
              f"preempted {d['preempted']}, evicted {d['evicted']}, steps waiting for KV room {d.get('kv_waits', 0)}; "
              f"prompt tokens loaded from saved prefixes {d.get('restored_tokens', 0)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", help="where the stores and reports go, one folder per path (default: a temporary one)")
    ap.add_argument("--paths", default="batched,one",
                    help="which paths, in order: batched (the default batch, 16), one (one sequence), batch8 "
                         "(TOOLBIAS_LOCAL_BATCH=8 --concurrency 8, the previous default), warm (batched again, "
                         "with the prefixes the batched path saved: a repeated run)")
    ap.add_argument("extra", nargs="*", help="more toolbias run options (after --)")
    args = ap.parse_args()
    paths = [p.strip() for p in args.paths.split(",") if p.strip()]
    unknown = [p for p in paths if p not in PATHS]
    if unknown:
        ap.error(f"unknown path(s) {', '.join(unknown)}: use {', '.join(PATHS)}")
    from toolbias.providers.weights import default_model_path

    default_model_path()  # assemble + verify outside the timing (a one-off on a fresh install)
    root = Path(args.dir or tempfile.mkdtemp(prefix="toolbias-job-"))
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    timings = []
    for path in paths:
        t = time_path(path, root / path, args.extra)
        timings.append(t)
        print(f"--- {path} (TOOLBIAS_LOCAL_BATCH={PATHS[path] or 'unset'}): exit {t.rc}")
        print("\n".join(t.lines), flush=True)
    print(f"\n{'path':<8} {'wall':>8} {'CPU s':>7} {'CPU/ep':>7} {'CPU/cores':>9} {'episodes':>8} {'gen tok':>8} "
          f"{'gen tok/s':>9} {'gen tok/CPU-s':>13} {'RSS MB':>7} {'load 1m before/after':>21}")
    for t in timings:
        per_ep = t.cpu_s / t.episodes if t.episodes else float("nan")
        print(f"{t.path:<8} {t.wall_s / 60:>5.1f}min {t.cpu_s:>7.0f} {per_ep:>7.2f} {t.cpu_s / cores:>8.0f}s "
              f"{t.episodes:>8} {t.completion_tokens:>8} {t.completion_tokens / t.wall_s:>9.1f} "
              f"{t.completion_tokens / t.cpu_s if t.cpu_s else 0:>13.2f} {t.rss_mb:>7.0f} "
              f"{t.load_before:>10.1f}/{t.load_after:<10.1f}")
    for t in timings:
        print_work(t)
    by = {t.path: t for t in timings}
    if "batched" in by and "warm" in by:
        b, w = by["batched"], by["warm"]
        print(f"\nbatched (first run) / warm (repeated run): wall {b.wall_s / w.wall_s:.2f}x, CPU {b.cpu_s / w.cpu_s:.2f}x")
    if "batched" in by and "one" in by:
        b, o = by["batched"], by["one"]
        print(f"\none-sequence / batched: wall {o.wall_s / b.wall_s:.2f}x, CPU {o.cpu_s / b.cpu_s:.2f}x "
              f"({cores} cores; wall times are only comparable at equal load)")
    print(f"stores and reports in {root}")
    sys.exit(max(t.rc for t in timings))


if __name__ == "__main__":
    main()
