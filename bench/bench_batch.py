"""Embedded model, batched path: throughput by the number of requests decoding at once.

The prompts of ``bench_local`` (one system message and ten home tools, a different user turn
each), sent N at a time (N = 1, 2, 4, 8, 16) to one provider whose batch is the largest N, after
one request has put the shared prefix in the KV cache. For each N: generated tokens per second
(wall), CPU-milliseconds per generated token (this process, every thread), the mean number of
sequences per decoding step, and the load average (wall figures are only comparable at equal
load; CPU per token much more so, with ``OMP_WAIT_POLICY=PASSIVE``, the provider's default).

    python -m bench.bench_batch [--sizes 1,2,4,8,16] [--rounds 2] [--max-tokens 48] [--threads N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

from bench.bench_local import QUERIES, SYSTEM, TOOLS
from toolbias.providers.base import GenerateConfig
from toolbias.providers.local import LocalProvider


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1,2,4,8,16")
    ap.add_argument("--rounds", type=int, default=2, help="batches of N requests per size")
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--model", default="", help="a GGUF path (default: the embedded model)")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    p = LocalProvider(args.model, n_ctx=4096, n_threads=args.threads, batch=max(sizes))
    cfg = GenerateConfig(max_tokens=args.max_tokens)

    async def burst(queries: list[str]) -> int:
        outs = await asyncio.gather(*(p.generate([SYSTEM, {"role": "user", "content": q}], TOOLS, None, cfg)
                                      for q in queries))
        return sum(o.usage.completion_tokens for o in outs)

    asyncio.run(burst(QUERIES[:1]))  # load, and the shared prefix into the cache
    print(f"{'N':>3} {'gen tok':>8} {'tok/s':>7} {'CPU-ms/tok':>10} {'seqs/step':>9} {'load 1m':>7}")
    for n in sizes:
        stats = p.decoder_stats()
        assert stats is not None
        steps0, gen0 = stats.steps, stats.generating
        c0, w0 = time.process_time(), time.perf_counter()
        tokens = 0
        for r in range(args.rounds):
            queries = [QUERIES[(r * n + i) % len(QUERIES)] + f" (request {i})" for i in range(n)]
            tokens += asyncio.run(burst(queries))
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
        per_step = (stats.generating - gen0) / max(1, stats.steps - steps0)
        print(f"{n:>3} {tokens:>8} {tokens / wall:>7.1f} {1000 * cpu / tokens:>10.1f} {per_step:>9.1f} "
              f"{os.getloadavg()[0]:>7.1f}", flush=True)
    p.close()


if __name__ == "__main__":
    main()
