"""The store at scale: bytes per episode, and report / export over N episodes.

    python -m bench.bench_store [--episodes 100000] [--sample 500] [--keep PATH] [--plain]

Builds a store of N real episodes through the real Store API: the oracle over every registered
variant on a stratified sample of the built-in tasks (``--sample``: 64 x 500 = 32,000 real
episodes, the issue's grid), then repeats of that grid under other seeds (a paper-size grid with
repeats: new keys and seeds, the same records) written with :meth:`Store.put_values` until N.
``--plain`` stores records as JSON text (the layout before packing) for comparison.

Prints: bytes per episode (file size / episodes), write episodes/s, then ``toolbias report
--json``, ``report --html`` and ``export jsonl`` as subprocesses: wall seconds, episodes/s and
peak RSS (``/usr/bin/time -v`` where present). Figures only: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from toolbias.store import COLUMNS, Store
from toolbias.study.runner import StudyConfig, run_study

_KEY, _SEED, _RECORD = (COLUMNS.index(c) for c in ("key", "seed", "record"))


def build(path: Path, episodes: int, sample: int, plain: bool) -> tuple[int, float]:
    """The store at ``path`` with ``episodes`` episodes; returns (episodes, seconds to write)."""
    started = time.perf_counter()
    st = Store(path)
    st.pack_records = not plain
    try:
        run_study(StudyConfig(model="oracle", variants="all", sample=sample), st)
        template = [(*r[:_RECORD], st.unpack_record(r[_RECORD]), *r[_RECORD + 1:])
                    for r in st.db.execute(f"SELECT {','.join(COLUMNS)} FROM episodes ORDER BY rowid")]
        n, repeat = len(template), 1
        while n < episodes:
            batch = []
            for r in template[:episodes - n]:
                key = hashlib.sha256(f"{r[_KEY]}|{repeat}".encode()).hexdigest()[:32]
                batch.append((key, *r[1:_SEED], repeat, *r[_SEED + 1:]))
            for i in range(0, len(batch), 5000):
                st.put_values(batch[i:i + 5000])
            n += len(batch)
            repeat += 1
        st.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        count = st.count(None)
    finally:
        st.close()
    return count, time.perf_counter() - started


def timed(args: list[str]) -> tuple[float, float | None]:
    """(wall seconds, peak RSS in MB or None) of ``toolbias ARGS`` in a subprocess."""
    cmd = [sys.executable, "-m", "toolbias", *args]
    timer = shutil.which("time") or ("/usr/bin/time" if os.path.exists("/usr/bin/time") else None)
    if timer:
        cmd = [timer, "-v", *cmd]
    started = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if res.returncode != 0:
        raise SystemExit(f"toolbias {' '.join(args)} failed:\n{res.stderr[-2000:]}")
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", res.stderr)
    return wall, (int(m.group(1)) / 1024 if m else None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=100_000)
    ap.add_argument("--sample", type=int, default=500, help="tasks per variant in the real grid (64 variants)")
    ap.add_argument("--keep", type=Path, help="write the store here (kept) instead of a temporary folder")
    ap.add_argument("--plain", action="store_true", help="records as JSON text (the layout before packing)")
    ap.add_argument("--no-html", action="store_true")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench_store_"))
    path = a.keep or tmp / "store.db"
    if path.exists():
        raise SystemExit(f"{path} exists: choose a new --keep path")
    try:
        n, write_s = build(path, a.episodes, a.sample, a.plain)
        size = os.path.getsize(path)
        print(f"store: {n:,} episodes, {size / 1e6:.1f} MB, {size / n:,.0f} bytes/episode "
              f"({'JSON text' if a.plain else 'packed'} records); built in {write_s:.1f} s ({n / write_s:,.0f} episodes/s)")
        runs = [("report --json", ["report", "--store", str(path), "--json"])]
        if not a.no_html:
            runs.append(("report --html", ["report", "--store", str(path), "--html", str(tmp / "r.html")]))
        runs.append(("export jsonl", ["export", "--store", str(path), "--format", "jsonl", "-o", str(tmp / "e.jsonl")]))
        for label, args in runs:
            wall, rss = timed(args)
            mem = f", peak RSS {rss:,.0f} MB" if rss is not None else ""
            print(f"{label:14s} {wall:7.1f} s wall, {n / wall:,.0f} episodes/s{mem}; "
                  f"1M episodes at this rate: {1e6 / n * wall:,.0f} s")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
