"""The artifact's per-domain runner (``eval/run_agentic.py``) as a test oracle for the commands that
play paper-protocol episodes besides ``toolbias run`` (probe, train-data, the RL environment), and a
deterministic scripted agent both sides can be played with.

:func:`agentic_runner` imports the runner afresh for one variant and control with its OpenAI client on
a loopback server (skipped with the reason when ``../shared/reference`` is absent). :func:`scripted_reply`
answers a chat request from the request alone, so both harnesses get the same answers exactly when
they send the same requests: it reads the task from the user message, and errs as models do.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.support.paths import SHARED_DATA
from tests.support.reference_artifact import ARTIFACT, runner_afresh
from tests.support.servers import Reply

DATA = SHARED_DATA / "toolschemaspace"
CATALOG = f"toolschemaspace:{DATA}"
MODEL = "fake-model"
#: how the artifact's per-domain runner builds each rendering (SCHEMA_VARIANT with SCHEMA_K=10, or SCHEMA_SPEC)
BUILD = {"paper.native": ("SCHEMA_VARIANT", "5"), "paper.fully_merged": ("SCHEMA_VARIANT", "0"),
         "paper.fully_split": ("SCHEMA_VARIANT", "9"), "paper.transaction": ("SCHEMA_SPEC", "curry.json"),
         "paper.reference_resolution": ("SCHEMA_SPEC", "indirect.json")}
CONTROLS = {"strict": "hard", "lenient": "loose"}
_ENV = ("SCHEMA_VARIANT", "SCHEMA_SPEC", "SCHEMA_CONTROL", "SCHEMA_K", "SYN_QUERIES", "MAX_TURNS", "SYN_MODEL",
        "SYN_MAX_TOKENS", "SYN_NOTE", "SYN_TOOLCHOICE", "SYN_SEED", "SYN_EXTRA_BODY", "SYN_API")


def skip_reason() -> str | None:
    if not (ARTIFACT / "eval" / "run_agentic.py").exists():
        return f"needs the artifact's repository at {ARTIFACT} (../shared/reference/ToolSchemaSpace); not present"
    if not (DATA / "tools.json").exists():
        return f"needs the artifact's catalog at {DATA}; not present"
    try:
        import openai  # noqa: F401
    except ImportError:
        return "the artifact's eval/common.py imports openai (pip install 'toolbias[dev]')"
    return None


needs_runner = pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or "")


def agentic_runner(variant: str, control: str, base_url: str, queries: Path) -> ModuleType:
    """``eval.run_agentic`` imported afresh for one rendering (:data:`BUILD`) and control."""
    key, value = BUILD[variant]
    if key == "SCHEMA_SPEC":
        value = str(DATA / "specs" / value)
    return runner_afresh("eval.run_agentic", {key: value, "SCHEMA_CONTROL": CONTROLS[control],
                                              "SYN_QUERIES": str(queries), "SYN_MODEL": MODEL}, base_url, MODEL,
                         unset=_ENV)


def artifact_query(task: Any, catalog: Any) -> dict[str, Any]:
    """A toolbias task as a line of the artifact's queries.jsonl."""
    return {"id": task.id, "domain": task.domain, "system": catalog.domain(task.domain).system, "query": task.query,
            "gold_calls": [{"name": a.tool, "arguments": dict(a.arguments)} for a in task.gold]}


def write_queries(path: Path, queries: Sequence[Mapping[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(q) + "\n" for q in queries), encoding="utf-8")
    return path


#: how the scripted agent errs on a query (by its position in the sample)
PERSONAS = ("clean", "wrong_case", "numbers_as_text", "null_extras", "off_schema_then_fix", "malformed_then_fix",
            "missing_argument", "answer_only", "livelock")


def _form(tools: Sequence[Mapping[str, Any]], name: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A native call in a merged variant's flat form (``execute``), else as it is."""
    names = {t.get("function", t)["name"] for t in tools}
    if "execute" in names:
        return "execute", {"operation": name, **{f"{name}::{k}": v for k, v in args.items()}}
    return name, args


def _perturbed(kind: str, args: dict[str, Any]) -> dict[str, Any]:
    if kind == "wrong_case":
        return {k: v.upper() if isinstance(v, str) else v for k, v in args.items()}
    if kind == "numbers_as_text":
        return {k: str(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v for k, v in args.items()}
    if kind == "null_extras":
        return {**args, "note": None, "label": ""}
    if kind == "missing_argument" and args:
        return {k: v for k, v in args.items() if k != sorted(args)[-1]}
    return dict(args)


def scripted_reply(body: Mapping[str, Any], gold_of: Mapping[str, Sequence[Mapping[str, Any]]],
                   persona_of: Mapping[str, str]) -> Reply:
    """The next turn for a chat request: a function of the request alone. ``gold_of`` and ``persona_of``
    map a user message (the query) to its gold calls and its way to err."""
    messages = body["messages"]
    query = messages[1]["content"]
    gold = [(str(g["name"]), dict(g.get("arguments") or {})) for g in gold_of[query]]
    kind = persona_of[query]
    tools = body.get("tools") or []
    turn = sum(1 for m in messages if m["role"] == "assistant")
    last = messages[-1]["content"] if messages[-1]["role"] == "tool" else ""

    def wire(calls: list[tuple[str, Any]]) -> Reply:
        return Reply.calls(*((n, a if isinstance(a, str) else json.dumps(a)) for n, a in calls))

    right = [_form(tools, n, a) for n, a in gold]
    if kind == "answer_only":
        return Reply.text("I cannot help with that.")
    if kind == "livelock":
        return wire(right[:1])
    if turn == 1 and "error" in last:
        return wire(right)
    if turn >= 1:
        return Reply.text("Done.")
    if kind == "off_schema_then_fix":
        return wire([(f"do_{gold[0][0]}", gold[0][1])])
    if kind == "malformed_then_fix":
        return wire([(right[0][0], '{"operation": "x", ')])
    return wire([_form(tools, n, _perturbed(kind, a)) for n, a in gold])


def reply_message(reply: Reply) -> dict[str, Any]:
    """A scripted reply as the assistant message a policy would have produced (the RL environment's turn)."""
    return {"role": "assistant", "content": reply.content or "",
            "tool_calls": [{"id": c["id"], "type": "function", "function": dict(c["function"])}
                           for c in reply.tool_calls]}
