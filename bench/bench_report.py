"""Reports over a million episodes: a synthetic store of one model's paper-size grid with repeats,
then ``toolbias report --json``, ``report --html`` and ``export`` timed over it.

    python -m bench.bench_report                          # 64 variants x 2,688 tasks x 6 seeds = 1,032,192
    python -m bench.bench_report --store big.db           # keep the store (an existing one is reused)
    python -m bench.bench_report --seeds 1 --no-export    # 172,032 episodes, reports only

The store is built fast but with representative values: the oracle runs once over every
registered variant on ``--sample`` tasks (real records, packed by the store), then the grid of
every variant x ``--tasks`` task ids x ``--seeds`` seeds is written with the store's own writer
(:meth:`Store.put_values`), each row reusing the packed record of its variant and of a sampled
task (task ids past the sample are the sample's with a suffix, in the sampled task's domain),
with drawn outcomes: a success rate per variant (30-95%) and per task, failures spread over the
paper's failure modes, turns and tokens near the oracle's. So the report's work (cells, tasks,
failure modes, repeats that disagree) is a real grid's; the bytes a record costs are the oracle's.

Prints the store (episodes, MB, bytes per episode, seconds to build), then for each command, run
as a subprocess: wall seconds, episodes/s, CPU seconds and peak RSS (``os.wait4``'s resource
usage of that process), with the load average before and after. Figures only: nothing here
asserts a time.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from toolbias.store import COLUMNS, Store
from toolbias.study.runner import StudyConfig, run_study
from toolbias.study.scoring import FAILURE_ORDER

_C = {c: i for i, c in enumerate(COLUMNS)}


def build(path: Path, *, sample: int, tasks: int, seeds: int, model: str = "openai:qwen2.5-7b-instruct") -> int:
    """Write the synthetic grid into ``path``; returns its episodes."""
    st = Store(path)
    try:
        run_study(StudyConfig(model="oracle", variants="all", sample=sample, study="bench"), st)
        templates: dict[str, list[tuple[object, ...]]] = {}
        for row in st.db.execute(f"SELECT {','.join(COLUMNS)} FROM episodes ORDER BY rowid"):
            templates.setdefault(row[_C["variant"]], []).append(row)
        st.db.execute("DELETE FROM episodes")  # the records stay, packed, in the rows written below
        st.db.commit()
        rng = random.Random(0)
        modes = [m.value for m in FAILURE_ORDER]
        mode_weights = [rng.random() + 0.2 for _ in modes]
        sampled = next(iter(templates.values()))
        easiness: dict[object, float] = {}
        n = 0
        for seed in range(seeds):
            for variant, rows in templates.items():
                rate = random.Random(variant).uniform(0.3, 0.95)
                batch = []
                for i in range(tasks):
                    r = rows[i % len(rows)]
                    task_id = r[_C["task_id"]] if i < len(sampled) else f"{r[_C['task_id']]}~{i // len(sampled)}"
                    ease = easiness.get(task_id)
                    if ease is None:
                        ease = easiness[task_id] = rng.uniform(-0.25, 0.25)
                    ok = rng.random() < rate + ease
                    v = list(r)
                    v[_C["key"]] = hashlib.sha256(f"{variant}|{task_id}|{seed}".encode()).hexdigest()[:32]
                    v[_C["study"]], v[_C["model"]], v[_C["task_id"]], v[_C["seed"]] = "bench", model, task_id, seed
                    v[_C["success"]] = int(ok)
                    v[_C["failure_mode"]] = None if ok else rng.choices(modes, mode_weights)[0]
                    v[_C["turns"]] = r[_C["turns"]] + (0 if ok else rng.randrange(3))
                    v[_C["prompt_tokens"]] = int(r[_C["prompt_tokens"]] * rng.uniform(0.9, 1.3))
                    batch.append(tuple(v))
                st.put_values(batch)  # the records are packed already: written as they are
                n += len(batch)
            print(f"  seed {seed}: {n:,} episodes", flush=True)
        st.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        st.close()
    return n


def timed(args: list[str], out: Path) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MB) of ``toolbias ARGS`` in its own process (stdout to ``out``)."""
    with out.open("wb") as fh:
        started = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "toolbias", *args], stdout=fh, stderr=subprocess.PIPE)
        assert proc.stderr is not None
        err = proc.stderr.read()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"toolbias {' '.join(args)} failed:\n{err.decode(errors='replace')[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3]) if Path("/proc/loadavg").exists() else "?"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=2688, help="task ids per variant (the built-in catalog's 2,688)")
    ap.add_argument("--seeds", type=int, default=6, help="repeats of the grid under other seeds")
    ap.add_argument("--sample", type=int, default=100, help="tasks the oracle really runs per variant (templates)")
    ap.add_argument("--store", type=Path, help="write the store here and keep it (reused if it exists)")
    ap.add_argument("--no-html", action="store_true")
    ap.add_argument("--no-export", action="store_true")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench_report_"))
    path = a.store or tmp / "store.db"
    try:
        started = time.perf_counter()
        if path.exists():
            with Store(path, readonly=True) as st:
                n = st.count("done")
            print(f"store: {path} reused")
        else:
            print(f"building {path} (load average {load()})", flush=True)
            n = build(path, sample=a.sample, tasks=a.tasks, seeds=a.seeds)
        built = time.perf_counter() - started
        size = os.path.getsize(path)
        print(f"store: {n:,} episodes, {size / 1e6:,.0f} MB, {size / n:,.0f} bytes/episode, {built:.0f} s to build "
              f"or open")
        runs = [("report --json", ["report", "--store", str(path), "--json"])]
        if not a.no_html:
            runs.append(("report --html", ["report", "--store", str(path), "--html", str(tmp / "r.html")]))
        if not a.no_export:
            runs += [("export csv", ["export", "--store", str(path), "--format", "csv", "-o", str(tmp / "e.csv")]),
                     ("export jsonl", ["export", "--store", str(path), "--format", "jsonl", "-o", str(tmp / "e.jsonl")])]
        print("\n| command | wall s | episodes/s | CPU s | peak RSS MB | load average before -> after |")
        print("|---|---:|---:|---:|---:|---|")
        for label, args in runs:
            before = load()
            wall, cpu, rss = timed(args, tmp / "stdout")
            print(f"| `{label}` | {wall:.1f} | {n / wall:,.0f} | {cpu:.1f} | {rss:,.0f} | {before} -> {load()} |",
                  flush=True)
            for f in tmp.glob("e.*"):
                f.unlink()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
