"""The default job (`toolbias run` with no options) timed as a user runs it: wall time, CPU time
(user + system of the command and its children), peak memory, the machine's load, and the finding.

    python -m bench.bench_default_job [--dir DIR] [-- extra toolbias run options]

Goal (issue 12): at most 10 minutes wall on an idle 2-core machine. On a shared machine the wall
time grows with the load; the CPU time does not much, and CPU / cores is the wall time to
expect on the same cores when idle (llama.cpp keeps every core busy). A fresh store every run
(the job resumes otherwise); the weights are assembled before the clock starts.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", help="where the store and the report go (default: a temporary directory)")
    ap.add_argument("extra", nargs="*", help="more toolbias run options (after --)")
    args = ap.parse_args()
    from toolbias.providers.weights import default_model_path

    default_model_path()  # assemble + verify outside the timing (a one-off on a fresh install)
    workdir = Path(args.dir or tempfile.mkdtemp(prefix="toolbias-job-"))
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "toolbias.db").unlink(missing_ok=True)
    cmd = [sys.executable, "-c", "from toolbias.cli import main; main()", "run", *args.extra]
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, env={**os.environ, "COLUMNS": "160"})
    wall = time.perf_counter() - t0
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    load_after = os.getloadavg()
    print(proc.stdout)
    print("\n".join(line for line in proc.stderr.splitlines() if not line.startswith("llama_context"))[-3000:],
          file=sys.stderr)
    cpu = usage.ru_utime + usage.ru_stime
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    print(f"exit {proc.returncode}  wall {wall:.0f} s ({wall / 60:.1f} min)  CPU {cpu:.0f} s "
          f"(user {usage.ru_utime:.0f} + system {usage.ru_stime:.0f})  CPU/{cores} cores {cpu / cores:.0f} s  "
          f"peak RSS {usage.ru_maxrss / 1024:.0f} MB")
    print(f"load average before {load_before[0]:.1f}, after {load_after[0]:.1f} (1 min; {cores} cores)")
    print(f"store and report in {workdir}")
    sys.exit(proc.returncode)


if __name__ == "__main__":
    main()
