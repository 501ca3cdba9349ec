"""Crash and fault figures at full size: SIGKILL/resume, and a server failing 20% of requests.

    python -m bench.faults                      # everything (a few minutes on 2 cores)
    python -m bench.faults --part kill --target loopback --tasks 1000 --kills 6
    python -m bench.faults --part faults --fault-rate 0.2

``kill``: ``toolbias run`` (2 variants x --tasks tasks = 2,000 episodes by default) is
SIGKILLed at random moments ``--kills`` times and re-run with the same command until it
finishes, against the loopback OpenAI-compatible server with a deterministic model
(``--target loopback``) and/or the in-process oracle (``--target oracle``). Printed: every
kill (when, finished episodes after it), and the check that the store holds exactly one
record per episode key, all finished, identical (timings aside) to an uninterrupted run.

``faults``: the same study in process against a server injecting every fault kind
(HTTP 500/502/503, 429 with and without Retry-After, timeouts, dropped connections,
short reads, truncated JSON, empty choices) at ``--fault-rate``, first with the default
retry policy, then with 2 attempts (so retries run out and episodes are stored as
``infra_error``) followed by a resume against a healthy server. Printed: faults served by
kind, retries, exhausted calls, infra_error episodes, what the resume re-ran, and the
comparison with a fault-free run.
"""

from __future__ import annotations

import argparse
import logging
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

from tests.support.reliability import TOOLBIAS, HttpOracle, comparable, kill_and_resume, startup_time  # noqa: E402
from tests.support.servers import FAULTS, FakeOpenAIServer  # noqa: E402
from toolbias.catalog import load_catalog  # noqa: E402
from toolbias.providers import make_provider  # noqa: E402
from toolbias.providers.wrapper import ProviderWrapper, RetryPolicy  # noqa: E402
from toolbias.store import Store  # noqa: E402
from toolbias.study.runner import StudyConfig, build_study, run_study  # noqa: E402
from toolbias.variants import build_codec, resolve_variants  # noqa: E402


def kill_part(args: argparse.Namespace, target: str, work: Path) -> bool:
    catalog = load_catalog(args.catalog)
    codecs = [build_codec(catalog, s) for s in resolve_variants(args.variants)]
    server = FakeOpenAIServer(responder=HttpOracle(catalog, codecs)).start() if target == "loopback" else None
    if server is not None and server._httpd is not None:  # a killed client resets its connections: not news
        server._httpd.handle_error = lambda request, client_address: None  # type: ignore[method-assign]
    try:
        model = ["--model", "openai:fake-model", "--base-url", server.base_url] if server else ["--model", "oracle"]
        cmd = [TOOLBIAS, "run", *model, "--catalog", args.catalog, "--variants", args.variants,
               "--tasks", str(args.tasks), "--concurrency", str(args.concurrency)]
        ref, killed = work / f"{target}-ref.db", work / f"{target}-killed.db"
        startup = startup_time(cmd, work / f"{target}-scratch.db")
        t0 = time.perf_counter()
        subprocess.run(cmd + ["--store", str(ref)], check=True, capture_output=True)
        full = time.perf_counter() - t0
        total = len(comparable(ref))
        t0 = time.perf_counter()
        history = kill_and_resume(cmd + ["--store", str(killed)], killed, kills=args.kills, startup=startup,
                                  full=full, total=total, seed=args.seed)
        interrupted = time.perf_counter() - t0
    finally:
        if server:
            server.stop()
    expected, got = comparable(ref), comparable(killed)
    statuses = Counter(v[0] for v in got.values())
    same = got == expected
    print(f"\n== SIGKILL and resume: {target} ({len(expected)} episodes, {args.variants}, "
          f"concurrency {args.concurrency})")
    print(f"uninterrupted run: {full:.1f} s (start-up and one episode: {startup:.1f} s)")
    for i, (delay, n) in enumerate(history, 1):
        print(f"  kill {i}: after {delay:5.2f} s -> {n:5d} finished episodes in the store")
    print(f"killed {len(history)} times, then finished: {interrupted:.1f} s in all")
    print(f"records: {len(got)} (expected {len(expected)}), statuses {dict(statuses)}, "
          f"one per key: yes, lost: {len(set(expected) - set(got))}, extra: {len(set(got) - set(expected))}")
    print(f"identical to the uninterrupted run (timings aside): {'yes' if same else 'NO'}")
    successes = sum(1 for v in got.values() if v[3])
    print(f"results: {successes} successes, failure modes {dict(Counter(v[4] for v in got.values() if v[4]))}")
    return same and statuses == Counter({"done": len(expected)})


def _study(server: FakeOpenAIServer, args: argparse.Namespace, retry: RetryPolicy, store: Path) -> tuple[Any, Any]:
    provider = make_provider("openai:fake-model", base_url=server.base_url, timeout=args.timeout)
    model = ProviderWrapper(provider, concurrency=args.concurrency, retry=retry)
    cfg = StudyConfig(model="openai:fake-model", catalog=args.catalog, variants=args.variants,
                      tasks=args.fault_tasks, concurrency=args.concurrency)
    t0 = time.perf_counter()
    prog = run_study(build_study(cfg, model), str(store))
    return prog, (model.stats, time.perf_counter() - t0)


def faults_part(args: argparse.Namespace, work: Path) -> bool:
    logging.getLogger("toolbias.providers").setLevel(logging.ERROR)  # counted below instead of printed
    catalog = load_catalog(args.catalog)
    codecs = [build_codec(catalog, s) for s in resolve_variants(args.variants)]
    ok = True
    with FakeOpenAIServer(responder=HttpOracle(catalog, codecs), fault_rate=args.fault_rate, faults=FAULTS,
                          seed=args.seed, retry_after=0.2, hang_s=args.timeout * 2) as server:
        print(f"\n== faults at {args.fault_rate:.0%} (every kind, seed {args.seed}; client timeout {args.timeout:g} s)")
        default = RetryPolicy()
        prog, (stats, wall) = _study(server, args, default, work / "faults-default.db")
        served = Counter(server.counts)
        print(f"default retry policy ({default.attempts} attempts, backoff {default.initial_wait:g}-"
              f"{default.max_wait:g} s with jitter, Retry-After honoured): {prog.total} episodes in {wall:.1f} s")
        print(f"  requests {sum(served.values())}: replies {served['reply']}, faults "
              + ", ".join(f"{k} {n}" for k, n in sorted(served.items()) if k != "reply"))
        print(f"  model calls {stats.calls}, retries {stats.retries} (<= {default.attempts - 1} per call), "
              f"exhausted {stats.failures}, infra_error episodes {prog.infra_errors}")
        server.counts.clear()
        two = RetryPolicy(attempts=2, initial_wait=0.05, max_wait=0.2)
        store = work / "faults-two.db"
        prog, (stats, wall) = _study(server, args, two, store)
        print(f"2 attempts: {prog.total} episodes in {wall:.1f} s, retries {stats.retries}, exhausted "
              f"{stats.failures}, stored as infra_error: {prog.infra_errors}")
        with Store(store) as s:
            infra = list(s.rows(status="infra_error", with_record=False))
            scored = [r for r in infra if r.success is not None or r.failure_mode is not None]
        print(f"  infra_error rows with a score or failure mode (must be 0): {len(scored)}")
        server.fault_rate = 0.0
        before = len(server.requests)
        prog2, (_, wall2) = _study(server, args, default, store)
        print(f"  resume against a healthy server: skipped {prog2.skipped} finished, re-ran "
              f"{prog2.total - prog2.skipped} ({len(server.requests) - before} requests) in {wall2:.1f} s; "
              f"infra errors left {prog2.infra_errors}")
        _study(server, args, default, work / "clean.db")
    same = comparable(store) == comparable(work / "clean.db") == comparable(work / "faults-default.db")
    print(f"  results identical to a fault-free run: {'yes' if same else 'NO'}")
    ok &= same and not scored and prog2.infra_errors == 0
    return ok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=["kill", "faults", "all"], default="all")
    ap.add_argument("--target", choices=["loopback", "oracle", "both"], default="both")
    ap.add_argument("--catalog", default="builtin")
    ap.add_argument("--variants", default="native,transaction")
    ap.add_argument("--tasks", type=int, default=1000, help="tasks per variant (2 variants: 2x episodes)")
    ap.add_argument("--kills", type=int, default=6)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--fault-rate", type=float, default=0.2)
    ap.add_argument("--fault-tasks", type=int, default=250, help="tasks per variant in the faults part")
    ap.add_argument("--timeout", type=float, default=2.0, help="client timeout in the faults part (s)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    ok = True
    with tempfile.TemporaryDirectory(prefix="toolbias-faults-") as tmp:
        work = Path(tmp)
        if args.part in ("kill", "all"):
            for target in (["loopback", "oracle"] if args.target == "both" else [args.target]):
                ok &= kill_part(args, target, work)
        if args.part in ("faults", "all"):
            ok &= faults_part(args, work)
    print("\nALL CHECKS PASSED" if ok else "\nA CHECK FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
