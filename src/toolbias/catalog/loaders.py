"""Catalog specs: one string everywhere (``builtin``, ``toolschemaspace:DIR``, ``tools:FILE``,
``bfcl:DIR``, ``mcp:FILE``), resolved through a registry of loaders."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

from ..errors import CatalogError
from .model import Catalog, Domain, NativeAction, Task, Tool
from .openai_format import infer_class, parse_tool, parse_tools, read_json, read_jsonl
from .validation import validate_catalog

Loader = Callable[[str], Catalog]
CATALOG_KINDS: dict[str, Loader] = {}


def register_catalog_kind(kind: str) -> Callable[[Loader], Loader]:
    def deco(fn: Loader) -> Loader:
        CATALOG_KINDS[kind] = fn
        return fn

    return deco


@lru_cache(maxsize=16)
def load_catalog(spec: str = "builtin") -> Catalog:
    """Load and validate a catalog from its spec string."""
    kind, _, arg = spec.partition(":")
    loader = CATALOG_KINDS.get(kind)
    if loader is None:
        raise CatalogError(f"unknown catalog kind '{kind}'", where=f"catalog spec '{spec}'",
                           fix=f"use one of: {', '.join(k + (':PATH' if k != 'builtin' else '') for k in CATALOG_KINDS)}")
    if kind != "builtin" and not arg:
        raise CatalogError("missing path", where=f"catalog spec '{spec}'", fix=f"write {kind}:PATH")
    catalog = loader(arg)
    validate_catalog(catalog)
    return catalog


@register_catalog_kind("builtin")
def _load_builtin(arg: str) -> Catalog:
    from .builtin import load_builtin

    return load_builtin()


def _group_domains(tools: list[Tool], systems: dict[str, str] | None = None) -> tuple[Domain, ...]:
    by_domain: dict[str, list[Tool]] = defaultdict(list)
    for t in tools:
        by_domain[t.domain].append(t)
    systems = systems or {}
    return tuple(Domain(name=d, tools=tuple(ts), system=systems.get(d, ""), title=d) for d, ts in by_domain.items())


@register_catalog_kind("tools")
def _load_tools(arg: str) -> Catalog:
    """A plain OpenAI tool list; one domain named after the file."""
    path = Path(arg)
    domain = path.stem
    tools = parse_tools(read_json(path), domain=domain, source=str(path))
    return Catalog(name=f"tools:{arg}", domains=_group_domains(tools))


@register_catalog_kind("mcp")
def _load_mcp(arg: str) -> Catalog:
    """An MCP ``tools/list`` result: ``{"tools": [{name, description, inputSchema}]}`` (or the list)."""
    path = Path(arg)
    data = read_json(path)
    if isinstance(data, dict) and "result" in data:
        data = data["result"]
    entries = data.get("tools") if isinstance(data, dict) else data
    if not isinstance(entries, list):
        raise CatalogError("expected an MCP tools/list result with a 'tools' list", where=str(path))
    tools = []
    for i, e in enumerate(entries):
        if not isinstance(e, dict):
            raise CatalogError("a tool must be an object", where=f"{path}[{i}]")
        fn = {"name": e.get("name"), "description": e.get("description", ""),
              "parameters": e.get("inputSchema") or e.get("parameters")}
        tools.append(parse_tool(fn, path.stem, f"{path}[{i}]"))
    return Catalog(name=f"mcp:{arg}", domains=_group_domains(tools))


@register_catalog_kind("toolschemaspace")
def _load_toolschemaspace(arg: str) -> Catalog:
    """The schema-bias paper's artifact: ``tools.json`` (uid/group/name/description/parameters)
    and ``queries*.jsonl`` (gold_calls). The artifact names no per-tool class (its class groupings
    are whole domains), so classes are inferred from tool names (``set_window`` -> ``window``)."""
    root = Path(arg)
    if not root.is_dir():
        raise CatalogError("not a directory", where=str(root), fix="point toolschemaspace: at the folder with tools.json")
    entries = read_json(root / "tools.json")
    if not isinstance(entries, list):
        raise CatalogError("tools.json must be a list", where=str(root / "tools.json"))
    tools = []
    for i, e in enumerate(entries):
        where = f"{root / 'tools.json'}[{i}]"
        if not isinstance(e, dict) or "group" not in e:
            raise CatalogError("entry needs 'group', 'name' and 'parameters'", where=where,
                               fix='write {"uid": ..., "group": "<domain>", "name": ..., "parameters": {...}}')
        tools.append(parse_tool(e, e["group"], where))
    systems: dict[str, str] = {}
    tasks: list[Task] = []
    for qfile in sorted(root.glob("queries*.jsonl")):
        for j, row in enumerate(read_jsonl(qfile)):
            where = f"{qfile}:{j + 1}"
            try:
                domain = row["domain"]
                systems.setdefault(domain, row.get("system", ""))
                gold = tuple(NativeAction(domain, c["name"], dict(c.get("arguments") or {})) for c in row["gold_calls"])
                tasks.append(Task(id=str(row["id"]), domain=domain, query=row.get("query") or row["query_base"],
                                  query_templated=row.get("query_base", ""), gold=gold,
                                  meta={"type": row.get("type", ""), "source": qfile.name}))
            except KeyError as exc:
                raise CatalogError(f"query row lacks field {exc}", where=where,
                                   fix="rows need id, domain, gold_calls [{name, arguments}] and query") from None
            except (TypeError, ValueError, AttributeError):
                raise CatalogError("malformed query row: it must be an object whose gold_calls is a list of "
                                   "{name, arguments} objects", where=where,
                                   fix="rows need id, domain, gold_calls [{name, arguments}] and query") from None
    return Catalog(name=f"toolschemaspace:{arg}", domains=_group_domains(tools, systems), tasks=tuple(tasks))


@register_catalog_kind("tau2")
def _load_tau2(arg: str) -> Catalog:
    """tau2-bench's airline or retail domain, imported from an installed tau2 at run time."""
    from ..integrations.tau2 import load_tau2_catalog  # lazy: tau2 is an optional install

    return load_tau2_catalog(arg)


__all__ = ["CATALOG_KINDS", "load_catalog", "register_catalog_kind", "infer_class"]

from . import bfcl as _bfcl  # noqa: E402,F401  registers the "bfcl:DIR" kind
