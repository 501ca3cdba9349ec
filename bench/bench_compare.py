"""toolbias against inspect_ai doing the same work, reported as a ratio.

    python -m venv /tmp/inspect-venv && /tmp/inspect-venv/bin/pip install inspect-ai==0.3.285
    python -m bench.bench_compare --tasks 1000 --inspect-python /tmp/inspect-venv/bin/python

The same N built-in tasks on the native schema, each played by a model that returns
the gold tool calls in its first turn and a short answer in its second (toolbias: the
``oracle`` provider; inspect_ai: its ``mockllm`` provider with a callable that looks the
task up by its query). Each harness validates every call against the tool's JSON schema,
executes it (toolbias: the domain's state engine; inspect_ai: a tool function that
records the call and returns a JSON result), scores exact success (the multiset of
executed actions equals the gold) and keeps every transcript (toolbias: its SQLite
store; inspect_ai: its ``.eval`` log). inspect_ai runs in its own virtual environment
(``--inspect-python``), so nothing of it enters the project's.

Printed: each harness's time for the N samples (imports and start-up excluded, both
measured inside the process), samples per second, and the ratio.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

# ------------------------------------------------------------------------- the inspect_ai side
# (runs under --inspect-python; imports only inspect_ai and the standard library)


def inspect_worker(data_path: str, log_dir: str, max_samples: int) -> None:
    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ChatMessageAssistant, ChatMessageTool, ModelOutput, ModelUsage, get_model
    from inspect_ai.model._model_output import ChatCompletionChoice
    from inspect_ai.scorer import CORRECT, INCORRECT, Score, Target, accuracy, scorer
    from inspect_ai.solver import TaskState, generate, use_tools
    from inspect_ai.tool import ToolCall, ToolDef, ToolParams
    from inspect_ai.util import store

    data = json.loads(Path(data_path).read_text())
    tools_by_domain: dict[str, list[Any]] = {}

    def make_tool(spec: dict[str, Any]) -> Any:
        fn = spec["function"]

        async def execute(**kwargs: Any) -> str:
            done = store().get("executed", [])
            done.append([fn["name"], kwargs])
            store().set("executed", done)
            return json.dumps({"ok": True, "tool": fn["name"], "state": kwargs})

        return ToolDef(execute, name=fn["name"], description=fn["description"] or fn["name"],
                       parameters=ToolParams.model_validate(fn["parameters"])).as_tool()

    for domain, specs in data["tools"].items():
        tools_by_domain[domain] = [make_tool(s) for s in specs]
    gold_by_query = {t["query"]: t["gold"] for t in data["tasks"]}

    # usage is set (as toolbias's oracle reports none, a count is free): mockllm would
    # otherwise count tokens with tiktoken, which downloads its encoding at first use
    usage = ModelUsage(input_tokens=0, output_tokens=0, total_tokens=0)

    def oracle(messages: list[Any], tools: list[Any], tool_choice: Any, config: Any) -> ModelOutput:
        if isinstance(messages[-1], ChatMessageTool):
            out = ModelOutput.from_content(model="mockllm/model", content="Done.")
            out.usage = usage
            return out
        gold = gold_by_query[messages[-1].text]
        calls = [ToolCall(id=f"call_{i}", function=g["tool"], arguments=g["arguments"]) for i, g in enumerate(gold)]
        message = ChatMessageAssistant(content="", tool_calls=calls, model="mockllm/model")
        return ModelOutput(model="mockllm/model", usage=usage,
                           choices=[ChatCompletionChoice(message=message, stop_reason="tool_calls")])

    def canon(calls: list[Any]) -> list[str]:
        return sorted(json.dumps([n, a], sort_keys=True) for n, a in calls)

    @scorer(metrics=[accuracy()])
    def exact() -> Any:
        async def score(state: TaskState, target: Target) -> Score:
            gold = [[g["tool"], g["arguments"]] for g in state.metadata["gold"]]
            ok = canon(store().get("executed", [])) == canon(gold)
            return Score(value=CORRECT if ok else INCORRECT)

        return score

    from inspect_ai.solver import solver

    @solver
    def domain_tools() -> Any:
        async def solve(state: TaskState, generate_: Any) -> TaskState:
            state.tools = list(tools_by_domain[state.metadata["domain"]])
            return state

        return solve

    samples = [Sample(input=t["query"], target="", id=t["id"],
                      metadata={"domain": t["domain"], "gold": t["gold"]}) for t in data["tasks"]]
    task = Task(dataset=samples, solver=[domain_tools(), use_tools(), generate()], scorer=exact(),
                system_message=data["system"])
    model = get_model("mockllm/model", custom_outputs=oracle)
    t0 = time.perf_counter()
    # the fastest settings that keep a full log: no live-viewing buffer (log_realtime), no display
    logs = eval(task, model=model, log_dir=log_dir, display="none", max_samples=max_samples, log_level="error",
                log_realtime=False)
    wall = time.perf_counter() - t0
    log = logs[0]
    acc = log.results.scores[0].metrics["accuracy"].value if log.results else float("nan")
    print(json.dumps({"wall": wall, "samples": len(samples), "accuracy": acc, "status": log.status}))


# ------------------------------------------------------------------------- the toolbias side


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=1000)
    ap.add_argument("--concurrency", type=int, default=8, help="toolbias concurrency / inspect max_samples")
    ap.add_argument("--inspect-python", default="/tmp/inspect-venv/bin/python")
    ap.add_argument("--repeats", type=int, default=3, help="runs of each harness; medians are printed")
    ap.add_argument("--write-data", metavar="FILE", help="only write the tasks file and print both commands")
    ap.add_argument("--inspect-worker", nargs=3, metavar=("DATA", "LOGDIR", "MAX_SAMPLES"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.inspect_worker:
        inspect_worker(args.inspect_worker[0], args.inspect_worker[1], int(args.inspect_worker[2]))
        return

    from statistics import median

    from toolbias.catalog import load_catalog
    from toolbias.study.episode import DEFAULT_SYSTEM
    from toolbias.study.runner import StudyConfig, build_study, run_study
    from toolbias.variants import build_codec, registry

    catalog = load_catalog("builtin")
    tasks = list(catalog.tasks)[: args.tasks]  # the tasks `toolbias run --tasks N` runs
    codec = build_codec(catalog, registry()["native"])
    data: dict[str, Any] = {"system": DEFAULT_SYSTEM,
            "tools": {d.name: codec.schema(d.name) for d in catalog.domains},
            "tasks": [{"id": t.id, "domain": t.domain, "query": t.query,
                       "gold": [{"tool": a.tool, "arguments": dict(a.arguments)} for a in t.gold]} for t in tasks]}
    if len({t["query"] for t in data["tasks"]}) < len(tasks):
        raise SystemExit("two chosen tasks share a query; the mock model could not tell them apart")
    if args.write_data:  # for whole-process timings of both commands (printed)
        Path(args.write_data).write_text(json.dumps(data))
        print(f"toolbias:   toolbias run --model oracle --variants native --tasks {len(tasks)} "
              f"--concurrency {args.concurrency} --store FRESH.db")
        print(f"inspect_ai: {args.inspect_python} {__file__} --inspect-worker {args.write_data} LOGDIR "
              f"{args.concurrency}")
        return
    ours, theirs = [], []
    with tempfile.TemporaryDirectory() as tmp:
        data_path = Path(tmp) / "tasks.json"
        data_path.write_text(json.dumps(data))
        for r in range(args.repeats):
            study = build_study(StudyConfig(model="oracle", catalog="builtin", variants="native",
                                            concurrency=args.concurrency), tasks=tasks)
            t0 = time.perf_counter()
            prog = run_study(study, str(Path(tmp) / f"toolbias-{r}.db"), check=False)
            ours.append(time.perf_counter() - t0)
            assert prog.successes == len(tasks), prog
            proc = subprocess.run([args.inspect_python, __file__, "--inspect-worker", str(data_path),
                                   str(Path(tmp) / f"logs-{r}"), str(args.concurrency)],
                                  capture_output=True, text=True, timeout=3600)
            if proc.returncode != 0:
                raise SystemExit(f"inspect_ai run failed:\n{proc.stderr[-3000:]}")
            result = json.loads(proc.stdout.strip().splitlines()[-1])
            assert result["accuracy"] == 1.0, result
            theirs.append(result["wall"])
            print(f"run {r + 1}: toolbias {ours[-1]:.2f} s, inspect_ai {theirs[-1]:.2f} s", flush=True)
    a, b = median(ours), median(theirs)
    n = len(tasks)
    print(f"\n{n} samples (native schema, oracle / mockllm playing the gold), concurrency {args.concurrency}, "
          f"medians of {args.repeats}:")
    print(f"toolbias   {a:7.2f} s  {n / a:8.0f} samples/s  (100% success)")
    print(f"inspect_ai {b:7.2f} s  {n / b:8.0f} samples/s  (accuracy 1.0)")
    print(f"ratio: inspect_ai time / toolbias time = {b / a:.1f}x")


if __name__ == "__main__":
    main()
