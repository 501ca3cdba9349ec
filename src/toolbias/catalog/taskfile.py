"""``--task-file FILE.jsonl``: a catalog's tasks from a file in the schema-bias artifact's query
format, one object a line: ``{"id", "query", "gold_calls": [{"name", "arguments"}]}``, optionally
``"domain"`` (required when the catalog has more than one) and ``"check_calls"`` (read-only calls,
kept in the task's ``meta["check_calls"]``, whose results an environment may compare after the
agent's calls and after the gold's). Every gold call must name a tool of the task's domain."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import CatalogError
from .model import Catalog, NativeAction, Task
from .openai_format import read_jsonl

_FIX = 'write one object a line: {"id": ..., "query": ..., "gold_calls": [{"name": ..., "arguments": {...}}]}'


def _calls(value: Any, domain: str, catalog: Catalog, where: str, field: str) -> tuple[NativeAction, ...]:
    if not isinstance(value, list):
        raise CatalogError(f"'{field}' must be a list of {{name, arguments}} objects", where=where, fix=_FIX)
    out = []
    for i, c in enumerate(value):
        if not isinstance(c, dict) or not isinstance(c.get("name"), str) or not isinstance(c.get("arguments", {}), dict):
            raise CatalogError(f"{field}[{i}] must be an object with a 'name' and an 'arguments' object",
                               where=where, fix=_FIX)
        if catalog.tool(domain, c["name"]) is None:
            names = ", ".join(t.name for t in catalog.domain(domain).tools)
            raise CatalogError(f"{field}[{i}] calls '{c['name']}', which domain '{domain}' has no tool of",
                               where=where, fix=f"use one of: {names}")
        out.append(NativeAction(domain, c["name"], dict(c.get("arguments") or {})))
    return tuple(out)


def read_task_file(path: str | Path, catalog: Catalog) -> tuple[Task, ...]:
    """The tasks of ``path`` on ``catalog`` (refused with what/where/fix)."""
    p = Path(path)
    domains = [d.name for d in catalog.domains]
    tasks: list[Task] = []
    seen: set[str] = set()
    for n, row in enumerate(read_jsonl(p)):
        where = f"{p}:{n + 1}"
        if not isinstance(row, dict) or "id" not in row or not isinstance(row.get("query"), str):
            raise CatalogError("a task needs an 'id' and a 'query' string", where=where, fix=_FIX)
        domain = row.get("domain") or (domains[0] if len(domains) == 1 else None)
        if domain not in domains:
            raise CatalogError(f"unknown or missing domain {row.get('domain')!r}", where=where,
                               fix=f"give each task a 'domain': one of {', '.join(domains)}")
        tid = str(row["id"])
        if tid in seen:
            raise CatalogError(f"task id '{tid}' is used twice", where=where, fix="give every task its own id")
        seen.add(tid)
        gold = _calls(row.get("gold_calls"), domain, catalog, where, "gold_calls")
        meta: dict[str, Any] = {"source": p.name}
        if "check_calls" in row:
            checks = _calls(row["check_calls"], domain, catalog, where, "check_calls")
            meta["check_calls"] = [{"name": c.tool, "arguments": dict(c.arguments)} for c in checks]
        tasks.append(Task(id=tid, domain=domain, query=row["query"], gold=gold, meta=meta))
    if not tasks:
        raise CatalogError("the task file has no tasks", where=str(p), fix=_FIX)
    return tuple(tasks)


def with_task_file(catalog: Catalog, path: str | Path | None) -> Catalog:
    """``catalog`` with the tasks of ``path`` in place of its own (unchanged when ``path`` is None)."""
    return catalog if path is None else replace(catalog, tasks=read_task_file(path, catalog))


__all__ = ["read_task_file", "with_task_file"]
