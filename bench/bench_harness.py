"""Harness throughput: the oracle over the whole grid in process, and turns/s against a
zero-latency loopback OpenAI-compatible server compared with bare client loops.

    python -m bench.bench_harness grid                    # all variants x all built-in tasks
    python -m bench.bench_harness grid --workers 1        # ... in this process only
    python -m bench.bench_harness grid --profile 25       # ... in one process, and the 25 hottest functions
    python -m bench.bench_harness grid --per-variant 300  # episodes/s of each variant on 300 tasks
    python -m bench.bench_harness loopback                # turns/s at concurrency 1, 8, 64, 256

``grid`` runs ``run_study`` with the oracle on every registered variant x every task of
the catalog into a fresh store (episodes, storage and scoring included) and prints the
time to build the study, the time to run it, episodes per second, the CPU time of this
process and of its worker processes, and the success rate (100% is the equivalence
check). The study plays in ``--workers`` forked processes (``StudyConfig.workers``; the
default, one per core), this process writing the store.

``loopback`` starts the fake server (``tests/support/servers.py``) in its own process, answering
every request with one tool call, and measures at each concurrency: a bare ``httpx``
loop posting the same request, a bare ``openai`` SDK loop, and a toolbias study through
the ``openai:`` provider (2 turns per episode). For each it prints requests (turns) per
second and CPU milliseconds per request in the client and in the server process: when
the server process is at ~100% of a core and toolbias matches the bare SDK loop, the
throughput is bound by the server, not by the harness.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

from tests.support.servers import Reply  # noqa: E402
from toolbias.catalog import load_catalog  # noqa: E402
from toolbias.providers import make_provider  # noqa: E402
from toolbias.providers.wrapper import ProviderWrapper  # noqa: E402
from toolbias.store import Store  # noqa: E402
from toolbias.study.episode import DEFAULT_SYSTEM  # noqa: E402
from toolbias.study.runner import StudyConfig, build_study, run_study, worker_count  # noqa: E402
from toolbias.variants import build_codec, registry, resolve_variants  # noqa: E402


def machine() -> str:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return f"{os.cpu_count()} CPUs ({cpu}), Python {sys.version.split()[0]}, load average {load:.1f}"


# --------------------------------------------------------------------------- the oracle grid


def grid(args: argparse.Namespace) -> None:
    print(f"machine: {machine()}")
    catalog = load_catalog(args.catalog)
    variants = resolve_variants(args.variants)
    print(f"catalog {args.catalog}: {len(catalog.tasks)} tasks, {len(catalog.tools)} tools; "
          f"{len(variants)} variants")
    if args.per_variant:
        per_variant(args, catalog)
        return
    workers = 1 if args.profile and args.workers is None else args.workers  # cProfile sees one process
    with tempfile.TemporaryDirectory() as tmp:
        t0, cpu0, kids0 = time.perf_counter(), time.process_time(), _children_cpu()
        cfg = StudyConfig(model="oracle", catalog=args.catalog, variants=args.variants, concurrency=args.concurrency,
                          workers=workers)
        study = build_study(cfg)
        built = time.perf_counter() - t0
        store = Store(Path(tmp) / "grid.db")
        n_workers = worker_count(study, len(study.tasks) * len(study.codecs))
        profiler = cProfile.Profile() if args.profile else None
        t1 = time.perf_counter()
        if profiler:
            profiler.enable()
        prog = run_study(study, store, check=False)
        if profiler:
            profiler.disable()
        ran = time.perf_counter() - t1
        cpu, kids = time.process_time() - cpu0, _children_cpu() - kids0
        n = prog.done - prog.skipped
        store.close()
        size = sum(p.stat().st_size for p in Path(tmp).glob("grid.db*"))
    where = f"{n_workers} worker processes + this one writing" if n_workers > 1 else "this process"
    print(f"build (catalog, {len(variants)} codecs): {built:.2f} s")
    print(f"run ({where}): {n} episodes in {ran:.1f} s = {n / ran:.0f} episodes/s; "
          f"success {prog.successes}/{n} = {100 * prog.successes / max(n, 1):.2f}%; store {size / 1e6:.0f} MB "
          f"({size / max(n, 1) / 1e3:.1f} KB per episode)")
    print(f"CPU: {cpu:.1f} s here + {kids:.1f} s in workers = {1000 * (cpu + kids) / max(n, 1):.2f} ms per episode")
    print(f"whole grid (build + run): {built + ran:.1f} s")
    if profiler:
        stats = pstats.Stats(profiler)
        print(f"\nhot spots by own time (top {args.profile}):")
        stats.sort_stats("tottime").print_stats(args.profile)
        print(f"\nby cumulative time (top {args.profile}):")
        stats.sort_stats("cumulative").print_stats(args.profile)


def _children_cpu() -> float:
    """User + system CPU seconds of this process's finished child processes (the workers)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def per_variant(args: argparse.Namespace, catalog: Any) -> None:
    tasks = sorted(catalog.tasks, key=lambda t: t.id)[: args.per_variant]
    rows = []
    for spec in resolve_variants(args.variants):
        cfg = StudyConfig(model="oracle", catalog=args.catalog, variants=spec.name, concurrency=args.concurrency)
        t0 = time.perf_counter()
        study = build_study(cfg, tasks=tasks)
        built = time.perf_counter() - t0
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            prog = run_study(study, str(Path(tmp) / "v.db"), check=False)
            ran = time.perf_counter() - t0
        rows.append((spec.name, built, len(tasks) / ran, prog.successes))
    rows.sort(key=lambda r: r[2])
    print(f"\n{'variant':40s} {'build s':>8s} {'ep/s':>8s} {'success':>8s}")
    for name, built, rate, ok in rows:
        print(f"{name:40s} {built:8.2f} {rate:8.0f} {ok:5d}/{len(tasks)}")


# --------------------------------------------------------------------------- loopback throughput


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Server:
    """The fake server in its own process (so it does not share the client's GIL)."""

    def __init__(self, reply: Reply) -> None:
        cmd = [sys.executable, str(ROOT / "tests" / "support" / "servers.py"), "fake", "--port", "0",
               "--reply-json", json.dumps(reply.to_json())]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if not line.startswith("READY "):
            raise RuntimeError(f"fake server did not start: {line!r}")
        self.url = line.split(" ", 1)[1]

    def cpu(self) -> float:
        return _cpu_s(self.proc.pid)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def _measure(server: Server, n: int, fn: Callable[[], Coroutine[Any, Any, Any]]) -> tuple[float, float, float]:
    """(requests/s, client CPU ms/request, server CPU ms/request) for ``n`` requests made by ``fn``."""
    s0, c0, t0 = server.cpu(), time.process_time(), time.perf_counter()
    asyncio.run(fn())
    wall = time.perf_counter() - t0
    return n / wall, 1000 * (time.process_time() - c0) / n, 1000 * (server.cpu() - s0) / n


def _request(catalog: Any, domain: str) -> dict[str, Any]:
    codec = build_codec(catalog, registry()["native"])
    task = next(t for t in catalog.tasks if t.domain == domain)
    return {"model": "fake-model", "temperature": 0.0, "max_tokens": 512, "tools": codec.schema(domain),
            "messages": [{"role": "system", "content": DEFAULT_SYSTEM}, {"role": "user", "content": task.query}]}


async def _pool(conc: int, n: int, one: Callable[[], Coroutine[Any, Any, Any]]) -> None:
    left = iter(range(n))

    async def worker() -> None:
        for _ in left:
            await one()

    await asyncio.gather(*(worker() for _ in range(conc)))


def loopback(args: argparse.Namespace) -> None:
    import openai

    try:  # the HTTP client the openai SDK uses here (httpx, or its fork httpx2)
        import httpx2 as httpx
    except ImportError:
        import httpx  # type: ignore[no-redef]
    from openai.types.chat import ChatCompletion

    print(f"machine: {machine()}")
    catalog = load_catalog(args.catalog)
    task = sorted(catalog.tasks, key=lambda t: t.id)[0]
    gold = task.gold[0]
    server = Server(Reply.calls((gold.tool, dict(gold.arguments))))
    body = _request(catalog, task.domain)
    print(f"server: tests/support/servers.py fake (own process), every reply one call of {gold.tool}; "
          f"{len(body['tools'])} tools per request")
    rows = []
    try:
        for conc in args.concurrency:
            n = max(args.requests, 4 * conc)

            async def bare_httpx(conc: int = conc, n: int = n) -> None:
                limits = httpx.Limits(max_connections=conc, max_keepalive_connections=conc)
                async with httpx.AsyncClient(base_url=server.url, limits=limits, timeout=60) as client:
                    async def one() -> None:
                        r = await client.post("/chat/completions", json=body)
                        r.json()

                    await _pool(conc, n, one)

            async def bare_sdk(conc: int = conc, n: int = n, typed: bool = True) -> None:
                http = openai.DefaultAsyncHttpxClient(limits=httpx.Limits(max_connections=conc,
                                                                          max_keepalive_connections=conc))
                client = openai.AsyncOpenAI(base_url=server.url, api_key="x", max_retries=0, http_client=http)

                async def one() -> None:
                    if typed:  # the SDK's typed method (transforms the request through its TypedDicts)
                        await client.chat.completions.create(**body)
                    else:      # what the openai: provider does: post the JSON, parse a ChatCompletion
                        await client.post("/chat/completions", body=body, cast_to=ChatCompletion)

                await _pool(conc, n, one)
                await client.close()

            h = _measure(server, n, bare_httpx)
            o = _measure(server, n, bare_sdk)
            p = _measure(server, n, lambda: bare_sdk(typed=False))
            # toolbias: episodes of 2 turns (the call, then the turn limit), n turns in all
            provider = make_provider("openai:fake-model", base_url=server.url, max_connections=max(conc, 8))
            model = ProviderWrapper(provider, concurrency=conc)
            chosen = sorted(catalog.tasks, key=lambda t: (t.domain != task.domain, t.id))[: n // 2]
            cfg = StudyConfig(model="openai:fake-model", catalog=args.catalog, variants="native", turn_limit=2,
                              concurrency=conc)
            study = build_study(cfg, model, tasks=chosen)
            turns = 2 * len(chosen)
            with tempfile.TemporaryDirectory() as tmp:
                s0, c0, t0 = server.cpu(), time.process_time(), time.perf_counter()
                prog = run_study(study, str(Path(tmp) / "l.db"), check=False)
                wall = time.perf_counter() - t0
            t = (turns / wall, 1000 * (time.process_time() - c0) / turns, 1000 * (server.cpu() - s0) / turns)
            assert prog.infra_errors == 0 and prog.done == len(chosen)
            rows.append((conc, h, o, p, t))
            print(f"c={conc:<4d} httpx {h[0]:5.0f} | SDK create {o[0]:5.0f} | SDK post {p[0]:5.0f} req/s | "
                  f"toolbias {t[0]:5.0f} turns/s  (client CPU ms {h[1]:.2f} / {o[1]:.2f} / {p[1]:.2f} / {t[1]:.2f}; "
                  f"server {h[2]:.2f} / {o[2]:.2f} / {p[2]:.2f} / {t[2]:.2f})", flush=True)
    finally:
        server.stop()
    print("\n| concurrency | bare httpx req/s | SDK create() req/s | SDK post() req/s | toolbias turns/s |"
          " toolbias / SDK post | client CPU ms per request (httpx / create / post / toolbias) |"
          " server CPU ms per request |")
    print("|---:|---:|---:|---:|---:|---:|---|---|")
    for conc, h, o, p, t in rows:
        print(f"| {conc} | {h[0]:.0f} | {o[0]:.0f} | {p[0]:.0f} | {t[0]:.0f} | {t[0] / p[0]:.2f} | "
              f"{h[1]:.2f} / {o[1]:.2f} / {p[1]:.2f} / {t[1]:.2f} | {t[2]:.2f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("grid", help="the oracle over all variants x all tasks, in process")
    g.add_argument("--catalog", default="builtin")
    g.add_argument("--variants", default="all")
    g.add_argument("--concurrency", type=int, default=8)
    g.add_argument("--profile", type=int, default=0, metavar="N", help="print the N hottest functions")
    g.add_argument("--workers", type=int, default=None,
                   help="processes playing episodes (default: one per core; 1: this process only)")
    g.add_argument("--per-variant", type=int, default=0, metavar="TASKS",
                   help="instead: episodes/s of each variant on the first TASKS tasks")
    lb = sub.add_parser("loopback", help="turns/s against the loopback server vs bare client loops")
    lb.add_argument("--catalog", default="builtin")
    lb.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 64, 256])
    lb.add_argument("--requests", type=int, default=600, help="requests (turns) per measurement (at least 4x c)")
    args = ap.parse_args()
    grid(args) if args.cmd == "grid" else loopback(args)


if __name__ == "__main__":
    main()
