"""Build every registered variant for a catalog and verify all of them.

    python -m bench.bench_variants [--catalog builtin] [--variant all] [--probes 2] [--jobs N] [--profile]

Goal: under 2 s in all for the built-in catalog on the 2-core reference machine (met with one
worker process per core, the default here and in ``toolbias verify``; ``--jobs 1``: one process,
with build and verify CPU apart per variant).
Prints per-variant build and verify cost (wall and CPU), the checks each ran, the
totals, and the codec's cost per decoded call for a few variants. ``--profile``
adds where verification spends its CPU time, grouped by module (the codec's share,
and within it validation's).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import time
from collections import defaultdict

from toolbias import load_catalog
from toolbias.variants import build_codec, resolve_variants
from toolbias.variants.verify import coverage_actions, verify_all, verify_codec

GOAL_S = 2.0


def _decode_cost(catalog_spec: str, names: list[str]) -> list[tuple[str, float, int]]:
    """Microseconds per decoded call (fresh session per action, encode excluded)."""
    catalog = load_catalog(catalog_spec)
    actions = [a for t in catalog.tools for a in coverage_actions(t)]
    out = []
    for name in names:
        codec = build_codec(catalog, resolve_variants(name)[0])
        encoded = [(a.domain, codec.encode([a])) for a in actions]
        n = sum(len(c) for _, c in encoded)
        start = time.process_time()
        for domain, calls in encoded:
            s = codec.session(domain)
            for c in calls:
                s.decode(c)
        out.append((name, (time.process_time() - start) / n * 1e6, n))
    return out


def _profile(catalog_spec: str, selector: str, probes: int) -> None:
    catalog = load_catalog(catalog_spec)
    codecs = [build_codec(catalog, s) for s in resolve_variants(selector)]
    prof = cProfile.Profile()
    prof.enable()
    for c in codecs:
        verify_codec(c, catalog, probes=probes)
    prof.disable()
    stats = pstats.Stats(prof)
    by_module: dict[str, float] = defaultdict(float)
    by_func: dict[str, float] = defaultdict(float)
    total = 0.0
    for (path, _line, func), (_cc, _nc, tottime, _ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        key = path.split("/src/")[-1] if "/src/" in path else path.rsplit("/", 1)[-1]
        by_module[key] += tottime
        by_func[f"{key}:{func}"] += tottime
        total += tottime
    print(f"\nwhere verification spends CPU (profiled, {total:.2f}s with profiler overhead):")
    for key, t in sorted(by_module.items(), key=lambda kv: -kv[1])[:10]:
        print(f"  {100 * t / total:5.1f}%  {key}")
    print("  top functions:")
    for key, t in sorted(by_func.items(), key=lambda kv: -kv[1])[:10]:
        print(f"  {100 * t / total:5.1f}%  {key}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--catalog", default="builtin")
    ap.add_argument("--variant", default="all")
    ap.add_argument("--probes", type=int, default=2, help="closure probes per tool (verify's default)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                    help="verify variants in this many processes (default: one per CPU)")
    ap.add_argument("--profile", action="store_true", help="also profile verification by module")
    args = ap.parse_args()

    wall0, cpu0 = time.perf_counter(), time.process_time()
    catalog = load_catalog(args.catalog)
    load_s = time.perf_counter() - wall0
    specs = resolve_variants(args.variant)

    rows = []
    build_wall = build_cpu = 0.0
    w, c = time.perf_counter(), time.process_time()
    if args.jobs > 1:  # each worker builds the codecs it verifies (counted in its verify time)
        results = verify_all(catalog, specs, probes=args.probes, jobs=args.jobs)
        rows = [[r.name, r.functions, float("nan"), float("nan")] for r in results]
    else:
        codecs = []
        for spec in specs:
            bw, bc = time.perf_counter(), time.process_time()
            codec = build_codec(catalog, spec)
            bw, bc = time.perf_counter() - bw, time.process_time() - bc
            build_wall += bw
            build_cpu += bc
            codecs.append(codec)
            rows.append([spec.name, codec.function_count(), bw, bc])
        w, c = time.perf_counter(), time.process_time()
        cache: dict = {}
        results = [verify_codec(codec, catalog, probes=args.probes, cache=cache) for codec in codecs]
    verify_wall, verify_cpu = time.perf_counter() - w, time.process_time() - c
    total_wall, total_cpu = time.perf_counter() - wall0, time.process_time() - cpu0

    width = max(len(s.name) for s in specs)
    print(f"catalog {catalog.name}: {len(catalog.tools)} native tools, {len(specs)} variants, "
          f"probes={args.probes}, jobs={args.jobs}")
    print(f"{'variant':<{width}}  {'fns':>5}  {'build ms':>8}  {'verify ms':>9}  {'checks':>6}  ok")
    for (name, fns, bw, _bc), r in zip(rows, results, strict=True):
        verify_ms = 1000 * r.seconds
        print(f"{name:<{width}}  {fns:>5}  {1000 * bw:8.1f}  {verify_ms:9.1f}  {r.checked:>6}  "
              f"{'ok' if r.ok else 'FAIL'}")
    checks = sum(r.checked for r in results)
    print(f"\nload catalog      {load_s:7.3f} s")
    if args.jobs > 1:
        print("build all         in the workers: included in 'verify all' (and per variant above)")
    else:
        print(f"build all         {build_wall:7.3f} s wall  {build_cpu:7.3f} s CPU  "
              f"({1000 * build_wall / len(specs):.1f} ms/variant)")
    print(f"verify all        {verify_wall:7.3f} s wall  {verify_cpu:7.3f} s CPU{'*' if args.jobs > 1 else ' '} "
          f"({1000 * verify_wall / len(specs):.1f} ms/variant, {checks} checks, "
          f"{1e6 * verify_wall / max(checks, 1):.0f} us/check)")
    print(f"total             {total_wall:7.3f} s wall  {total_cpu:7.3f} s CPU  "
          f"(goal < {GOAL_S:.1f} s: {'met' if total_wall < GOAL_S else 'missed'})")
    if args.jobs > 1:
        print("  * CPU of this process only; the workers' time is in the wall clock")
    failed = [r.name for r in results if not r.ok]
    print(f"verified: {len(results) - len(failed)}/{len(results)} ok" + (f"; FAILED: {failed}" if failed else ""))

    names = [n for n in ("native", "fully_merged", "merge_domain_union", "fully_split", "transaction",
                         "reference_resolution", "schema_discovery", "composed") if n in {s.name for s in specs}]
    if names:
        print("\ncodec decode cost (CPU per decoded call, fresh session per action):")
        for name, us, n in _decode_cost(args.catalog, names):
            print(f"  {name:<22} {us:6.1f} us  ({n} calls)")
    if args.profile:
        _profile(args.catalog, args.variant, args.probes)


if __name__ == "__main__":
    main()
