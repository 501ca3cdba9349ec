"""The one tool reader (toolbias.catalog.formats): tools read and written per second in each format,
on the built-in catalog's tools repeated to ``--tools`` (names made unique), best of ``--runs``.

    python -m bench.bench_formats [--tools 10000] [--runs 3]

Prints one line per format: write and read rates and whether the round trip kept every tool
(it must: a "False" is a bug). No goal is asserted; a loaded machine stretches the times.
"""

from __future__ import annotations

import argparse
import json
import time

from toolbias.catalog.formats import FORMATS, read_tools, write_tools
from toolbias.catalog.loaders import load_catalog
from toolbias.catalog.model import Tool


def _tools(n: int) -> list[Tool]:
    base = load_catalog("builtin").tools
    return [Tool(f"{base[i % len(base)].name}_{i // len(base)}", base[i % len(base)].description,
                 base[i % len(base)].parameters, "bench", base[i % len(base)].cls) for i in range(n)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tools", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    tools = _tools(args.tools)
    print(f"{len(tools)} tools, best of {args.runs}")
    for fmt in FORMATS:
        best_w = best_r = float("inf")
        for _ in range(args.runs):
            t0 = time.perf_counter()
            written = json.loads(json.dumps(write_tools(tools, fmt)))
            t1 = time.perf_counter()
            back = read_tools(written, "bench", "bench")
            t2 = time.perf_counter()
            best_w, best_r = min(best_w, t1 - t0), min(best_r, t2 - t1)
        same = [(t.name, t.description, t.parameters) for t in back] == \
            [(t.name, t.description, t.parameters) for t in tools]
        print(f"{fmt:<10} write {len(tools) / best_w:>9,.0f} tools/s   read {len(tools) / best_r:>9,.0f} tools/s   "
              f"round trip kept every tool: {same}")


if __name__ == "__main__":
    main()
