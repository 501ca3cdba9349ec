"""The oracle over the shipped live-MCP task sets (toolbias.integrations.mcp_tasks): every registered
variant x every task, on the real servers, each episode from a fresh state.

    python -m bench.bench_mcp [--servers time,git,sqlite] [--variants all] [--workers 1]
                              [--baseline-variants native]

For each server: the whole grid under the state its configuration declares (``"state"``:
toolbias.integrations.mcp_pool), then, for comparison, ``--baseline-variants`` x every task with
``"state": "process"`` forced (a server process of its own per episode, as any server may need).
Prints episodes, successes (they must all succeed: anything less is a bug), infrastructure errors,
wall time, episodes/s, servers started, and the CPU seconds of this process and of the servers it
started and closed. No goal is asserted; a loaded machine stretches the times.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import tempfile
import time
from importlib import resources
from pathlib import Path
from typing import Any

from toolbias.integrations.mcp_pool import close_pools, servers_started
from toolbias.store import Store
from toolbias.study.runner import StudyConfig, build_study, run_study

SERVERS = ("time", "git", "sqlite")


def _cpu() -> tuple[float, float]:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


def _config(shipped: Path, server: str, state: str | None, tmp: Path) -> str:
    path = shipped / f"{server}.json"
    if state is None:
        return str(path)
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    for entry in data["mcpServers"].values():
        entry["state"] = state
        if entry.get("cwd"):
            entry["cwd"] = str((path.parent / entry["cwd"]).resolve())
    out = tmp / f"{server}-{state}.json"
    out.write_text(json.dumps(data), encoding="utf-8")
    return str(out)


def _grid(label: str, config: str, tasks: Path, variants: str, workers: int, store: Path) -> None:
    cfg = StudyConfig(model="oracle", catalog=f"mcp-config:{config}", task_file=str(tasks), variants=variants,
                      workers=workers)
    study = build_study(cfg)  # lists the tools (one server start, not counted below)
    started, (own0, kids0) = servers_started(), _cpu()
    t0 = time.perf_counter()
    prog = run_study(study, str(store), check=False)
    wall = time.perf_counter() - t0
    close_pools()  # servers closed and reaped: their CPU time is counted
    own1, kids1 = _cpu()
    with Store(str(store)) as st:
        failed = sorted({(r.variant, r.task_id) for r in st.rows(with_record=False) if not r.success})
    print(f"{label:<34} {len(study.codecs):>3} variants x {len(study.tasks):>2} tasks = {prog.total:>4} episodes  "
          f"success {prog.successes}/{prog.total}  infra errors {prog.infra_errors}  wall {wall:6.1f} s  "
          f"{prog.total / wall:6.1f} episodes/s  servers started {servers_started() - started:>4} (this process)  "
          f"CPU s: this process {own1 - own0:5.1f}, servers {kids1 - kids0:5.1f}", flush=True)
    if failed:
        print(f"  FAILED (a bug): {failed[:10]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--servers", default=",".join(SERVERS))
    ap.add_argument("--variants", default="all")
    ap.add_argument("--baseline-variants", default="native",
                    help="variants played with a server process per episode ('' skips the baseline)")
    ap.add_argument("--workers", type=int, default=1, help="processes playing episodes (1: this one)")
    args = ap.parse_args()
    shipped = Path(str(resources.files("toolbias.integrations") / "mcp_tasks"))
    tmp = Path(tempfile.mkdtemp(prefix="bench-mcp-"))
    try:
        for server in args.servers.split(","):
            if shutil.which(f"mcp-server-{server}") is None:
                print(f"{server}: mcp-server-{server} is not installed; skipped")
                continue
            tasks = shipped / f"{server}.jsonl"
            declared = json.loads((shipped / f"{server}.json").read_text())["mcpServers"]
            state = next(iter(declared.values())).get("state", "process")
            _grid(f"{server} (state {state}, as declared)", _config(shipped, server, None, tmp), tasks,
                  args.variants, args.workers, tmp / f"{server}.db")
            if args.baseline_variants:
                _grid(f"{server} (state process, forced)", _config(shipped, server, "process", tmp), tasks,
                      args.baseline_variants, args.workers, tmp / f"{server}-process.db")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
