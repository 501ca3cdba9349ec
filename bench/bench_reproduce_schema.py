"""``toolbias reproduce schema --model local``: where the embedded model's time goes under the paper's protocol.

Plays the command's study (Figure 2's 13 artifact renderings on a stratified sample, the paper's
protocol, the artifact's catalog) or a slice of it (``--variants``), in process, on the embedded
model's batched path, then prints per variant the episodes played, the episodes an infrastructure
error left out (prompts longer than the 8,192-token window), the prompt tokens evaluated and taken
from the KV cache, the tokens generated, and for the whole run the CPU seconds (this process,
every thread), the decoder's steps, its mean batch, its preemptions and evictions, and the load
average. Printing only: speed figures are never asserted. A fresh store each run (nothing resumes).

    python -m bench.bench_reproduce_schema [--sample 24] [--variants paper.native,paper.fully_merged]
        [--catalog toolschemaspace:DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from collections import Counter
from pathlib import Path

from toolbias.cli.reproduce_schema import catalog_spec
from toolbias.report.schema_paper import paper_variants
from toolbias.store import Store
from toolbias.study.defaults import study_config
from toolbias.study.paper_protocol import Protocol
from toolbias.study.runner import build_study, run_study_async


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sample", type=int, default=24)
    ap.add_argument("--variants", help="comma list (default: the command's 13)")
    ap.add_argument("--catalog", help="toolschemaspace:DIR (default: the command's)")
    args = ap.parse_args()
    catalog = catalog_spec(args.catalog, Protocol.PAPER)
    variants = args.variants or ",".join(paper_variants())
    cfg = study_config(model="local", catalog=catalog, variants=variants, sample=args.sample, protocol="paper",
                       study="bench-reproduce-schema")
    study = build_study(cfg)
    print(f"{len(study.codecs)} variants x {len(study.tasks)} tasks, load average {os.getloadavg()[0]:.1f}",
          flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        c0, w0 = time.process_time(), time.perf_counter()
        with Store(Path(tmp) / "b.db") as st:
            asyncio.run(run_study_async(study, st))
            cpu, wall = time.process_time() - c0, time.perf_counter() - w0
            played: Counter[str] = Counter()
            left: Counter[str] = Counter()
            tokens: dict[str, list[int]] = {}
            for status in ("done", "infra_error"):
                for row in st.rows(study=cfg.study_name, status=status):
                    (played if status == "done" else left)[row.variant] += 1
                    r = row.record
                    t = tokens.setdefault(row.variant, [0, 0, 0])
                    t[0] += int(r.get("prompt_tokens") or 0) - int(r.get("cached_prompt_tokens") or 0)
                    t[1] += int(r.get("cached_prompt_tokens") or 0)
                    t[2] += int(r.get("completion_tokens") or 0)
    print(f"{'variant':<28} {'played':>6} {'left out':>8} {'prompt eval':>11} {'cached':>8} {'generated':>9}")
    for codec in study.codecs:
        v = codec.name
        e, c, g = tokens.get(v, [0, 0, 0])
        print(f"{v:<28} {played[v]:>6} {left[v]:>8} {e:>11} {c:>8} {g:>9}")
    stats = getattr(getattr(study.model, "inner", study.model), "decoder_stats", lambda: None)()
    print(f"wall {wall:.0f} s, CPU {cpu:.0f} s ({cpu / max(1, sum(played.values())):.1f} per played episode), "
          f"load average {os.getloadavg()[0]:.1f}")
    if stats is not None:
        print(f"decoder: {stats.steps} steps, {stats.decode_s:.0f} s in llama_decode, {stats.prompt_tokens} prompt "
              f"tokens, {stats.generated_tokens} generated, mean batch {stats.generating / max(1, stats.steps):.1f}, "
              f"{stats.preempted} preempted, {stats.evicted} evicted, {stats.kv_waits} steps waiting for KV room")


if __name__ == "__main__":
    main()
