"""Embedded model, one-sequence path (batch=1): prompt-prefix (KV cache) reuse vs none.

Ten prompts share one system message and one tool catalog (a home domain of ten
tools), as the episodes of one variant and domain do. Each prompt is answered
twice: with the KV cache dropped before every request (no reuse), and with the
cache kept (reuse: only the user turn after the shared prefix is evaluated).
Prompt and generation times come from llama.cpp's own counters.

    python -m bench.bench_local [--prompts 10] [--max-tokens 48] [--threads N] [--model PATH.gguf]

Goal: at least 3x less prompt time with reuse. Also prints load time, prompt and
generation throughput, resident memory, and the harness's share of the time
(toolbias's own work per request: rendering the chat template, tokenising,
finding the shared prefix, parsing calls).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import sys
import time
from dataclasses import dataclass
from typing import Any

from toolbias.providers.base import GenerateConfig
from toolbias.providers.local import LocalProvider

ZONES = ["living_room", "bedroom", "kitchen", "bathroom", "office", "hallway"]


def _tool(name: str, description: str, props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": props, "required": required}}}


ZONE = {"type": "string", "enum": ZONES, "description": "The room the setting applies to."}
TOOLS = [
    _tool("set_temperature", "Set the target temperature of a zone's thermostat, in degrees Celsius.",
          {"zone": ZONE, "celsius": {"type": "number", "minimum": 10, "maximum": 30}}, ["zone", "celsius"]),
    _tool("get_temperature", "Read the current measured temperature of a zone.", {"zone": ZONE}, ["zone"]),
    _tool("set_hvac_mode", "Switch a zone's climate unit between heating, cooling, automatic and off.",
          {"zone": ZONE, "mode": {"type": "string", "enum": ["heat", "cool", "auto", "off"]}}, ["zone", "mode"]),
    _tool("set_fan_speed", "Set the fan speed of a zone's climate unit.",
          {"zone": ZONE, "speed": {"type": "string", "enum": ["low", "medium", "high", "auto"]}}, ["zone", "speed"]),
    _tool("set_humidity", "Set the target relative humidity of a zone, in percent.",
          {"zone": ZONE, "percent": {"type": "integer", "minimum": 20, "maximum": 70}}, ["zone", "percent"]),
    _tool("turn_on_lights", "Switch on the lights of a zone, optionally at a brightness.",
          {"zone": ZONE, "brightness": {"type": "integer", "minimum": 1, "maximum": 100,
                                        "description": "Brightness in percent."}}, ["zone"]),
    _tool("turn_off_lights", "Switch off the lights of a zone.", {"zone": ZONE}, ["zone"]),
    _tool("set_light_color", "Set the colour of a zone's lights.",
          {"zone": ZONE, "color": {"type": "string", "enum": ["warm_white", "cool_white", "red", "green", "blue"]}},
          ["zone", "color"]),
    _tool("open_blinds", "Open a zone's blinds, fully or to a percentage.",
          {"zone": ZONE, "percent": {"type": "integer", "minimum": 0, "maximum": 100}}, ["zone"]),
    _tool("schedule_climate", "Schedule a target temperature for a zone at a time of day (24h HH:MM).",
          {"zone": ZONE, "celsius": {"type": "number"}, "time": {"type": "string", "pattern": "^\\d{2}:\\d{2}$"}},
          ["zone", "celsius", "time"]),
]
SYSTEM = {"role": "system", "content": (
    "You are the assistant of a smart home. Use only the provided tools to carry out the user's request. "
    "Call every tool the request needs, with complete and valid arguments, then answer briefly.")}
QUERIES = [
    "Set the bedroom to 21 degrees please.",
    "How warm is it in the kitchen right now?",
    "Turn off the lights in the hallway.",
    "Switch the office AC to cooling mode.",
    "Make the living room lights blue.",
    "Open the bathroom blinds halfway.",
    "Put the bedroom fan on high.",
    "I'd like the office at 40% humidity.",
    "Lights on in the kitchen at 70 percent brightness.",
    "At 06:30 warm the bathroom up to 23 degrees.",
    "Turn the heating off in the living room.",
    "Dim the bedroom lights to 10%.",
]


@dataclass
class Run:
    wall_s: float = 0.0
    prompt_ms: float = 0.0
    eval_ms: float = 0.0
    prompt_tokens: int = 0
    evaluated_prompt_tokens: int = 0
    reused_tokens: int = 0
    generated: int = 0
    calls: int = 0
    harness_s: float = 0.0


def perf(llm: Any) -> tuple[float, float, int, int]:
    import llama_cpp

    d = llama_cpp.llama_perf_context(llm._ctx.ctx)
    return d.t_p_eval_ms, d.t_eval_ms, d.n_p_eval, d.n_eval


def run(p: LocalProvider, queries: list[str], cfg: GenerateConfig, reuse: bool) -> tuple[Run, list[str]]:
    import llama_cpp

    llm = p._llm
    llm.reset()
    r = Run()
    answers = []
    harness0 = p.stats.harness_s
    for i, q in enumerate(queries):
        llama_cpp.llama_perf_context_reset(llm._ctx.ctx)
        t0 = time.perf_counter()
        out = p.generate_sync([SYSTEM, {"role": "user", "content": q}], TOOLS, None, cfg, reuse_prefix=reuse)
        r.wall_s += time.perf_counter() - t0
        t_p, t_e, n_p, n_e = perf(llm)
        r.prompt_ms += t_p
        r.eval_ms += t_e
        r.prompt_tokens += out.usage.prompt_tokens
        r.evaluated_prompt_tokens += n_p
        r.reused_tokens += out.usage.cached_prompt_tokens
        r.generated += out.usage.completion_tokens
        r.calls += len(out.tool_calls)
        answers.append(repr([(c.name, c.arguments) for c in out.tool_calls]) + repr(out.content))
        print(f"  {'reuse' if reuse else 'no reuse'} {i + 1}/{len(queries)}: prompt {t_p / 1000:.2f} s "
              f"({n_p} evaluated, {out.usage.cached_prompt_tokens} reused), {n_e} generated in {t_e / 1000:.2f} s",
              file=sys.stderr, flush=True)
    r.harness_s = p.stats.harness_s - harness0
    return r, answers


def rss_mb() -> float:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=10)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--model", default="", help="a GGUF path (default: the embedded model)")
    args = ap.parse_args()
    queries = (QUERIES * 3)[: args.prompts]
    cfg = GenerateConfig(max_tokens=args.max_tokens)

    p = LocalProvider(args.model, n_ctx=4096, n_threads=args.threads, prefix_states=0, batch=1)  # one sequence
    t0 = time.perf_counter()
    asyncio.run(p.check())
    setup = time.perf_counter() - t0
    prefix = p.render([SYSTEM], TOOLS)
    prefix_tokens = len(p._llm.tokenize(prefix.encode(), add_bos=False, special=True))
    print(f"model {p.model_path}  threads {args.threads or os.cpu_count()}  cores {os.cpu_count()}")
    print(f"load {p.load_s:.2f} s (check incl. weights verification {setup:.2f} s)")
    print(f"{len(queries)} prompts sharing a system+tools prefix of ~{prefix_tokens} tokens; max_tokens {args.max_tokens}\n")

    none, a_none = run(p, queries, cfg, reuse=False)
    reuse, a_reuse = run(p, queries, cfg, reuse=True)

    def row(name: str, r: Run) -> str:
        gen_rate = r.generated / (r.eval_ms / 1000) if r.eval_ms else 0.0
        p_rate = r.evaluated_prompt_tokens / (r.prompt_ms / 1000) if r.prompt_ms else 0.0
        harness = r.harness_s
        return (f"{name:<9} {r.evaluated_prompt_tokens:>7} {r.reused_tokens:>7} {r.prompt_ms / 1000:>9.2f} "
                f"{p_rate:>8.1f} {r.generated:>6} {r.eval_ms / 1000:>8.2f} {gen_rate:>7.1f} {r.wall_s:>8.2f} "
                f"{100 * harness / r.wall_s:>8.2f}% {r.calls:>5}")

    print(f"{'mode':<9} {'p_eval':>7} {'reused':>7} {'prompt_s':>9} {'p_tok/s':>8} {'gen':>6} {'gen_s':>8} "
          f"{'g_tok/s':>7} {'total_s':>8} {'harness':>9} {'calls':>5}")
    print(row("no reuse", none))
    print(row("reuse", reuse))
    ratio_p = none.prompt_ms / reuse.prompt_ms if reuse.prompt_ms else float("inf")
    ratio_t = none.wall_s / reuse.wall_s if reuse.wall_s else float("inf")
    print(f"\nprompt time {ratio_p:.1f}x less with reuse (goal >= 3x); total time {ratio_t:.1f}x less")
    print(f"same answers both ways: {sum(a == b for a, b in zip(a_none, a_reuse, strict=True))}/{len(queries)}")
    print(f"peak RSS {rss_mb():.0f} MB")
    asyncio.run(p.aclose())
    sys.exit(0 if ratio_p >= 3 else 1)


if __name__ == "__main__":
    main()
