"""Catalog specs: one string everywhere (``builtin``, ``toolschemaspace:DIR``, ``tools:FILE``,
``bfcl:DIR``, ``bfcl-multi:CATEGORY``, ``mcp:FILE``), resolved through ``CATALOG_KINDS``: one explicit table
(:class:`~toolbias.base.plugins.Registry`) of loaders ``(arg) -> Catalog``, each imported when its
kind is first used."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..base.plugins import Plugin, Registry
from ..errors import CatalogError
from .formats import infer_class
from .model import Catalog, Domain, NativeAction, Task, Tool
from .openai_format import parse_tool, read_json, read_jsonl
from .phrasing import PHRASINGS as _PHRASINGS
from .validation import validate_catalog

Loader = Callable[[str], Catalog]
CATALOG_KINDS: Registry[Loader] = Registry("catalog kind", {
    "builtin": "toolbias.catalog.loaders:load_builtin_spec",
    "tools": "toolbias.catalog.loaders:load_tools",
    "mcp": "toolbias.catalog.loaders:load_mcp",
    "toolschemaspace": "toolbias.catalog.loaders:load_toolschemaspace",
    "bfcl": "toolbias.integrations.bfcl:load_bfcl_spec",
    # BFCL multi-turn: needs bfcl-eval (extra "bfcl"), imported by the loader itself when first used
    "bfcl-multi": Plugin("toolbias.integrations.bfcl_multi:load_bfcl_multi", extra="bfcl"),
    "tau2": "toolbias.integrations.tau2:load_tau2_catalog",
    "mcp-config": Plugin("toolbias.integrations.mcp_live:load_mcp_config", extra="mcp"),  # live MCP servers
}, error=CatalogError)


@lru_cache(maxsize=16)
def load_catalog(spec: str = "builtin") -> Catalog:
    """Load and validate a catalog from its spec string."""
    kind, _, arg = spec.partition(":")
    loader = CATALOG_KINDS.resolve(kind, where=f"catalog spec '{spec}'", fix="use one of: " + ", ".join(
        k + (":PATH" if k != "builtin" else "") for k in CATALOG_KINDS))
    if kind != "builtin" and not arg:
        raise CatalogError("missing path", where=f"catalog spec '{spec}'", fix=f"write {kind}:PATH")
    catalog = loader(arg)
    validate_catalog(catalog)
    return catalog


def load_builtin_spec(arg: str) -> Catalog:
    from .builtin import load_builtin

    return load_builtin()


def _group_domains(tools: list[Tool], systems: dict[str, str] | None = None) -> tuple[Domain, ...]:
    by_domain: dict[str, list[Tool]] = defaultdict(list)
    for t in tools:
        by_domain[t.domain].append(t)
    systems = systems or {}
    return tuple(Domain(name=d, tools=tuple(ts), system=systems.get(d, ""), title=d) for d, ts in by_domain.items())


def load_tools(arg: str) -> Catalog:
    """A tool list in any format :mod:`.formats` reads; one domain named after the file, or one per key
    of a ``{domain: tool list}`` object (what ``toolbias shape`` writes for several domains)."""
    from .formats import read_domains

    path = Path(arg)
    tools = read_domains(read_json(path), domain=path.stem, source=str(path))
    return Catalog(name=f"tools:{arg}", domains=_group_domains(tools))


def load_mcp(arg: str) -> Catalog:
    """An MCP ``tools/list`` result (one page, every page of a paginated dump, or their JSON-RPC
    responses): read by the same reader as ``tools:``, so any tool format loads here too."""
    from .formats import read_domains

    path = Path(arg)
    tools = read_domains(read_json(path), domain=path.stem, source=str(path))
    return Catalog(name=f"mcp:{arg}", domains=_group_domains(tools))


def load_toolschemaspace(arg: str) -> Catalog:
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
    phrasings: dict[str, dict[str, str]] = {}  # task id -> {phrasing: text} (catalog.phrasing)
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
                phrasings[str(row["id"])] = {k: v for k in _PHRASINGS if isinstance(v := row.get(k), str) and v}
            except KeyError as exc:
                raise CatalogError(f"query row lacks field {exc}", where=where,
                                   fix="rows need id, domain, gold_calls [{name, arguments}] and query") from None
            except (TypeError, ValueError, AttributeError):
                raise CatalogError("malformed query row: it must be an object whose gold_calls is a list of "
                                   "{name, arguments} objects", where=where,
                                   fix="rows need id, domain, gold_calls [{name, arguments}] and query") from None
    return Catalog(name=f"toolschemaspace:{arg}", domains=_group_domains(tools, systems), tasks=tuple(tasks),
                   meta={**_artifact_meta(root), "phrasings": phrasings})


def _artifact_meta(root: Path) -> dict[str, Any]:
    """What the artifact declares beside its tools: the interval split's cut points
    (``specs/pred.json``, one cut per numeric argument, computed by the paper on its full
    query set) as ``interval_cuts`` {"domain::tool.param": cut}, and where its spec files are."""
    meta: dict[str, Any] = {}
    specs = root / "specs"
    if specs.is_dir():
        meta["specs_dir"] = str(specs)
    pred = specs / "pred.json"
    if pred.is_file():
        data = read_json(pred)
        ops = data.get("ops", []) if isinstance(data, dict) else []
        cuts = {f"{o['group']}::{o['tool']}.{o['param']}": o["cuts"][0] for o in ops
                if isinstance(o, dict) and o.get("op") == "split_predicate" and len(o.get("cuts") or []) == 1}
        if cuts:
            meta["interval_cuts"] = cuts
    return meta


__all__ = ["CATALOG_KINDS", "infer_class", "load_builtin_spec", "load_catalog", "load_mcp", "load_tools",
           "load_toolschemaspace"]
