"""Candidate tasks for any tool list (``toolbias tasks generate``), so schema bias can be measured on
a catalog that ships no tasks, a live MCP server's among them.

A model is shown one domain's tools (their native schemas) and asked, as JSON, for user requests
with the calls that serve them (the schema-bias artifact's query format, what ``--task-file``
reads). A candidate is kept only when

* it has a query and 1 to ``max_calls`` gold calls, each naming a tool of the domain with
  arguments its schema accepts (:func:`toolbias.catalog.validation.validate_action`);
* its gold calls, run in order on a fresh environment (a live MCP server from its fresh state; the
  state engine for other catalogs), each succeed;
* its check calls, if it proposes any, go to tools marked read-only (MCP ``readOnlyHint``), succeed
  after the gold calls, and answer the same on a second fresh environment (a check that differs
  between two replays of the same calls cannot judge an episode: the task is kept without them);
* its query and its gold calls are new (no repeat of a kept task).

Each rejection is counted by reason. The model's answer is data: read with :mod:`json`, never run.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..catalog.model import Catalog, NativeAction, Task, Tool
from ..catalog.validation import validate_action
from ..providers.base import GenerateConfig, Message, ModelAPI
from ..providers.textcalls import first_json
from .env import make_environment

SYSTEM = ("You write test tasks for assistants that use tools. Each task is a request a real user could "
          "make, and the exact tool calls that fulfil it. Answer with JSON only.")


@dataclass(frozen=True)
class GenerateSettings:
    """How many tasks to ask for and keep, and how the model samples."""

    per_domain: int = 10        # tasks kept per domain (at most)
    per_request: int = 5        # tasks asked for in one request
    max_requests: int = 6       # requests per domain at most
    max_calls: int = 3          # gold calls per task at most
    temperature: float = 0.7
    max_tokens: int = 2048


@dataclass
class DomainResult:
    """What one domain's requests gave."""

    domain: str
    requests: int = 0
    proposed: int = 0
    kept: list[dict[str, Any]] = field(default_factory=list)
    rejected: Counter[str] = field(default_factory=Counter)
    checks_dropped: int = 0


def read_only(tool: Tool) -> bool:
    """The tool says it changes nothing (MCP ``annotations.readOnlyHint``)."""
    return bool((tool.annotations or {}).get("readOnlyHint"))


def prompt(catalog: Catalog, domain: str, k: int, settings: GenerateSettings,
           avoid: Sequence[str] = ()) -> list[Message]:
    """The request for ``k`` tasks on ``domain``'s tools."""
    tools = catalog.domain(domain).tools
    listing = json.dumps([{"name": t.name, "description": t.description, "parameters": t.parameters}
                          for t in tools], ensure_ascii=False, indent=1)
    readers = [t.name for t in tools if read_only(t)]
    checks = (f' A task that changes state also gets "check_calls": calls of the read-only tools '
              f'({", ".join(readers)}) whose results show the change.' if readers else "")
    shape = ('{"tasks": [{"query": "<the user\'s request>", "gold_calls": [{"name": "<tool name>", '
             '"arguments": {...}}]' + (', "check_calls": [...]' if readers else "") + '}]}')
    seen = ("\n\nAlready written (write different ones):\n" + "\n".join(f"- {q}" for q in avoid[-30:])
            if avoid else "")
    user = (f"The tools:\n{listing}\n\nWrite {k} different tasks for these tools. Each task has a request "
            f"in the words of a user and 1 to {settings.max_calls} calls, in order, that fulfil it; every "
            f"argument value must be stated in the request or follow from it, and the calls must succeed "
            f"when run one after the other from the tools' initial state.{checks}{seen}\n\n"
            f"Answer with JSON only: {shape}")
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def candidates(text: str | None) -> list[Any]:
    """The proposed tasks in a model's answer (``{"tasks": [...]}`` or a bare list); [] if none."""
    value = first_json(text)
    if isinstance(value, dict):
        value = value.get("tasks")
    return list(value) if isinstance(value, list) else []


def _calls(catalog: Catalog, domain: str, value: Any, field_name: str) -> tuple[NativeAction, ...] | str:
    """The calls of a candidate's ``field_name``, or the reason they are refused."""
    if not isinstance(value, list):
        return f"{field_name} is not a list"
    out = []
    for c in value:
        if not isinstance(c, dict) or not isinstance(c.get("name"), str) or not isinstance(c.get("arguments", {}), dict):
            return f"{field_name}: a call is not a {{name, arguments}} object"
        action = NativeAction(domain, c["name"], dict(c.get("arguments") or {}))
        if catalog.tool(domain, action.tool) is None:
            return f"{field_name}: unknown tool"
        err = validate_action(catalog, action)
        if err is not None:
            return f"{field_name}: arguments refused by the schema ({err.kind.value})"
        out.append(action)
    return tuple(out)


def _text(result: Mapping[str, Any]) -> str:
    return str(result.get("content") if result.get("ok") else "Error: " + str(result.get("error")))


def replay(catalog: Catalog, task: Task, checks: Sequence[NativeAction]) -> tuple[str | None, list[str]]:
    """Run the task's gold calls then ``checks`` on a fresh environment: the first failure (None if
    none) and the checks' results."""
    env = make_environment(catalog, task)
    try:
        for a in task.gold:
            r = env.execute(a)
            if not r.get("ok"):
                return f"gold call {a.tool} failed: {str(r.get('error'))[:200]}", []
        results = []
        for a in checks:
            r = env.execute(a)
            if not r.get("ok"):
                return f"check call {a.tool} failed: {str(r.get('error'))[:200]}", []
            results.append(_text(r))
        return None, results
    finally:
        env.check()  # ends the episode: a live server is given back


def vet(catalog: Catalog, domain: str, raw: Any, max_calls: int) -> tuple[Task | None, str | None, bool]:
    """A candidate checked as the module doc says: (the task, None, whether its checks were dropped)
    or (None, the reason it is refused, False). The task's id is a placeholder."""
    if not isinstance(raw, dict) or not isinstance(raw.get("query"), str) or not raw["query"].strip():
        return None, "no query", False
    gold = _calls(catalog, domain, raw.get("gold_calls"), "gold_calls")
    if isinstance(gold, str):
        return None, gold, False
    if not 1 <= len(gold) <= max_calls:
        return None, f"not 1 to {max_calls} gold calls", False
    checks: tuple[NativeAction, ...] = ()
    if raw.get("check_calls"):
        parsed = _calls(catalog, domain, raw["check_calls"], "check_calls")
        if isinstance(parsed, str):
            return None, parsed, False
        tools = {t.name: t for t in catalog.domain(domain).tools}
        if not all(read_only(tools[a.tool]) for a in parsed):
            return None, "check_calls: a tool not marked read-only", False
        checks = parsed
    task = Task(id="candidate", domain=domain, query=raw["query"].strip(), gold=gold)
    failure, first = replay(catalog, task, checks)
    if failure is not None:
        return None, failure.split(":")[0], False
    dropped = False
    if checks:
        again_failure, again = replay(catalog, task, checks)
        if again_failure is not None or again != first:
            checks, dropped = (), True
    meta = {"check_calls": [{"name": a.tool, "arguments": dict(a.arguments)} for a in checks]} if checks else {}
    return Task(id="candidate", domain=domain, query=task.query, gold=gold, meta=meta), None, dropped


def task_row(task: Task, task_id: str) -> dict[str, Any]:
    """A kept task in the artifact's query format (what ``--task-file`` reads)."""
    row: dict[str, Any] = {"id": task_id, "domain": task.domain, "query": task.query,
                           "gold_calls": [{"name": a.tool, "arguments": dict(a.arguments)} for a in task.gold]}
    if task.meta.get("check_calls"):
        row["check_calls"] = task.meta["check_calls"]
    return row


async def generate_domain(model: ModelAPI, catalog: Catalog, domain: str, settings: GenerateSettings,
                          on_request: Callable[[DomainResult], None] | None = None) -> DomainResult:
    """Ask, vet and keep tasks for one domain until ``per_domain`` are kept or ``max_requests`` made."""
    out = DomainResult(domain)
    queries: set[str] = set()
    golds: set[str] = set()
    config = GenerateConfig(temperature=settings.temperature, max_tokens=settings.max_tokens)
    while len(out.kept) < settings.per_domain and out.requests < settings.max_requests:
        k = min(settings.per_request, settings.per_domain - len(out.kept))
        answer = await model.generate(prompt(catalog, domain, k, settings, [r["query"] for r in out.kept]),
                                      [], None, config)
        out.requests += 1
        found = candidates(answer.content)
        if not found:
            out.rejected["no JSON list of tasks in the answer"] += 1
        for raw in found:
            out.proposed += 1
            if len(out.kept) >= settings.per_domain:
                out.rejected["more than asked for"] += 1
                continue
            task, reason, dropped = vet(catalog, domain, raw, settings.max_calls)
            if task is None:
                out.rejected[reason or "refused"] += 1
                continue
            gold_key = json.dumps([[a.tool, a.arguments] for a in task.gold], sort_keys=True)
            if task.query.casefold() in queries or gold_key in golds:
                out.rejected["a repeat of a kept task"] += 1
                continue
            queries.add(task.query.casefold())
            golds.add(gold_key)
            out.checks_dropped += dropped
            out.kept.append(task_row(task, f"{domain}-{len(out.kept) + 1}"))
        if on_request is not None:
            on_request(out)
    return out


async def generate_tasks(model: ModelAPI, catalog: Catalog, settings: GenerateSettings | None = None, *,
                         domains: Sequence[str] = (),
                         on_request: Callable[[DomainResult], None] | None = None) -> list[DomainResult]:
    """Tasks for every domain of ``catalog`` (or ``domains``), one domain after another."""
    settings = settings or GenerateSettings()
    names = list(domains) or [d.name for d in catalog.domains]
    for name in names:
        catalog.domain(name)  # an unknown domain: CatalogError naming the valid ones
    return [await generate_domain(model, catalog, name, settings, on_request) for name in names]


__all__ = ["DomainResult", "GenerateSettings", "candidates", "generate_domain", "generate_tasks", "prompt",
           "read_only", "replay", "task_row", "vet"]
