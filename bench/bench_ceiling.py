"""The client's own ceiling: whole episodes per second that one ``toolbias run`` process can
drive, with the model's latency taken away, to size a cluster of model servers and client machines.

    python -m bench.bench_ceiling                      # 2,000 episodes per arm, concurrency 64
    python -m bench.bench_ceiling --episodes 1000 --concurrency 64 --servers 2

Arms (each a real study through :func:`~toolbias.study.runner.run_study` into a fresh SQLite
store: planning, the episode loop, codec, environment, scoring and the store's writer included):

- ``oracle``: the oracle (no server) in this process only (``--workers 1``), and in one worker
  process per core (the default for CPU-bound models);
- ``openai:`` against a zero-latency loopback OpenAI-compatible server (``bench_proxy``'s asyncio
  upstream, its own process): each episode is two turns, a tool call, then, once the request holds
  the tool's result, a final answer; with ``--servers`` N > 1, N such servers behind one study
  (``--base-url`` repeated, requests spread round-robin).

Prints, per arm: episodes/s, model turns/s, CPU ms per episode in this process and its workers (the client) and
in the servers, and the load average. At concurrency 64 with a zero-latency server, the client's
CPU is the bound: its episodes/s is the most one client process can ask of a cluster, whatever the
servers. Figures only: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.bench_proxy import UPSTREAM, completion, cpu_s, start
from toolbias.store import Store
from toolbias.study.defaults import study_config
from toolbias.study.runner import build_study, run_study


def answer() -> dict[str, Any]:
    return {"id": "y", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Done."}}],
            "usage": {"prompt_tokens": 120, "completion_tokens": 3, "total_tokens": 123}}


def client_cpu() -> float:
    """CPU seconds of this process and of its finished children (the oracle's worker processes)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def measure(label: str, options: dict[str, Any], servers: list[int]) -> dict[str, Any]:
    """Run one study into a fresh store; its rates and CPU."""
    study = build_study(study_config(**options))  # built before the clock starts: only running is timed
    with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "s.db") as st:
        before_load = load()
        s0 = sum(cpu_s(p) for p in servers)
        c0, t0 = client_cpu(), time.perf_counter()
        prog = run_study(study, st)
        wall = time.perf_counter() - t0
        client = client_cpu() - c0
        served = sum(cpu_s(p) for p in servers) - s0
        turns = sum(int(t or 0) for (t,) in st.query("SELECT turns FROM episodes"))
    n = prog.done - prog.skipped
    assert prog.infra_errors == 0, f"{label}: {prog.infra_errors} infrastructure errors"
    return {"arm": label, "episodes": n, "wall": wall, "episodes_s": n / wall, "turns_s": turns / wall,
            "client_ms": 1000 * client / n, "server_ms": 1000 * served / n if servers else None,
            "load": f"{before_load} -> {load()}"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=2000, help="episodes per arm (the first N built-in tasks)")
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--servers", type=int, default=2, help="also run the openai: arm against this many servers")
    a = ap.parse_args()
    rows = []
    common = {"catalog": "builtin", "variants": "native", "tasks": a.episodes, "concurrency": a.concurrency,
              "turn_limit": 4}
    for workers, label in ((1, "oracle, this process only (--workers 1)"), (None, "oracle, a worker per core")):
        rows.append(measure(label, {**common, "model": "oracle", "workers": workers}, []))
        print(rows[-1], flush=True)
    from toolbias.catalog import load_catalog

    first = load_catalog("builtin").tasks[0].gold[0]
    call = completion({"name": first.tool, "arguments": dict(first.arguments)})
    procs = []
    try:
        for _ in range(max(1, a.servers)):
            procs.append(start([sys.executable, "-c", UPSTREAM, "0", json.dumps(call), json.dumps(answer())]))
        urls = [f"http://127.0.0.1:{port}/v1" for _, port in procs]
        pids = [p.pid for p, _ in procs]
        for k in sorted({1, max(1, a.servers)}):
            rows.append(measure(f"openai: provider, {k} loopback server{'s' if k > 1 else ''}",
                                {**common, "model": "openai:m", "base_urls": urls[:k]}, pids[:k]))
            print(rows[-1], flush=True)
    finally:
        for p, _ in procs:
            p.terminate()
            p.wait(timeout=10)
    print(f"\nconcurrency {a.concurrency}, {a.episodes} episodes per arm (native schema, first built-in tasks)\n")
    print("| arm | episodes/s | model turns/s | client CPU ms per episode | server CPU ms per episode |"
          " load average before -> after |")
    print("|---|---:|---:|---:|---:|---|")
    for r in rows:
        server = "-" if r["server_ms"] is None else f"{r['server_ms']:.2f}"
        print(f"| {r['arm']} | {r['episodes_s']:,.0f} | {r['turns_s']:,.0f} | {r['client_ms']:.2f} | {server} | "
              f"{r['load']} |")


if __name__ == "__main__":
    main()
