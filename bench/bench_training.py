"""Training data and the RL environment: how fast traces are made and episodes stepped.

    python -m bench.bench_training [--catalog builtin] [--variants mixture] [--tasks N]

Prints, per variant, traces per CPU second (turn-by-turn oracle episodes through the episode
loop, plus the knowledge check that each only uses what it was told) and environment steps
per CPU second (the same traces replayed turn by turn through ``ToolEnv``). Goal: the whole
built-in catalog on the paper's seven-variant mixture in under 10 s of CPU.
"""

from __future__ import annotations

import argparse
import time

from toolbias import load_catalog
from toolbias.training import ToolEnv, sft_examples, unseen_uses
from toolbias.training.traces import training_variants
from toolbias.variants import build_codec, resolve_variants

GOAL_CPU_S = 10.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--catalog", default="builtin")
    ap.add_argument("--variants", default="mixture")
    ap.add_argument("--tasks", type=int, help="first N tasks (default: all)")
    args = ap.parse_args()
    catalog = load_catalog(args.catalog)
    tasks = list(catalog.tasks[: args.tasks] if args.tasks else catalog.tasks)
    gold = {t.id: t.gold for t in tasks}
    total = 0.0
    print(f"{'variant':28} {'traces':>7} {'traces/s':>9} {'turns':>6} {'env steps/s':>12}")
    for spec in resolve_variants(training_variants(args.variants)):
        codec = build_codec(catalog, spec)
        start = time.process_time()
        rows = list(sft_examples([codec], tasks))
        assert not any(unseen_uses(r["messages"], r["tools"], gold[r["task_id"]]) for r in rows)
        made = time.process_time() - start
        turns = [[m for m in r["messages"] if m["role"] == "assistant"] for r in rows]
        start = time.process_time()
        steps = 0
        for task, assistant in zip(tasks, turns, strict=True):
            env = ToolEnv(codec, task)
            for m in assistant:
                env.step({"role": "assistant", "content": m["content"], "tool_calls": m["tool_calls"]})
                steps += 1
            assert env.reward() == 1.0
        stepped = time.process_time() - start
        total += made + stepped
        print(f"{codec.name:28} {len(rows):7d} {len(rows) / made:9.0f} {steps / len(rows):6.2f} "
              f"{steps / stepped:12.0f}")
    verdict = "met" if total < GOAL_CPU_S else "not met"
    print(f"total CPU {total:.1f} s; goal (whole built-in catalog, the mixture) < {GOAL_CPU_S:.0f} s: {verdict}")


if __name__ == "__main__":
    main()
