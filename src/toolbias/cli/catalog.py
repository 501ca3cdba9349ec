"""CLI: ``toolbias catalog stats|list|show`` - inspect a native catalog."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..catalog import load_catalog
from ..catalog.model import Catalog, Tool
from ..catalog.stats import argument_kind, catalog_stats, stats_table

F = TypeVar("F", bound=Callable[..., Any])

CATALOG_HELP = "catalog spec: builtin, toolschemaspace:DIR, bfcl:DIR, tools:FILE.json, mcp:FILE.json"


def catalog_option(fn: F) -> F:
    return click.option("--catalog", "spec", default="builtin", show_default=True, envvar="TOOLBIAS_CATALOG",
                        help=CATALOG_HELP + " [env TOOLBIAS_CATALOG]")(fn)


def _param_summary(name: str, schema: Mapping[str, Any]) -> str:
    kind = argument_kind(schema)
    if kind == "enum":
        values = [str(v) for v in schema["enum"]]
        shown = "|".join(values[:6]) + ("|..." if len(values) > 6 else "")
        return f"{name}: {shown}"
    lo, hi = schema.get("minimum"), schema.get("maximum")
    rng = f" [{lo}..{hi}]" if lo is not None or hi is not None else ""
    return f"{name}: {kind}{rng}"


def _tool_dict(tool: Tool) -> dict[str, Any]:
    return {"name": tool.name, "class": tool.cls, "description": tool.description,
            "parameters": json.loads(json.dumps(tool.parameters))}


def _echo_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False))


def _load(spec: str) -> Catalog:
    return load_catalog(spec)


@click.group("catalog")
def catalog() -> None:
    """Inspect native tool catalogs (the built-in one or imported ones)."""

@catalog.command("stats")
@catalog_option
@click.option("--json", "as_json", is_flag=True, help="print the statistics as JSON")
def stats_cmd(spec: str, as_json: bool) -> None:
    """Catalog statistics like the paper's Table 5: tools, arguments, enums, queries."""
    stats = catalog_stats(_load(spec))
    if as_json:
        _echo_json(stats)
    else:
        Console().print(stats_table(stats))

@catalog.command("list")
@catalog_option
@click.option("--json", "as_json", is_flag=True, help="print the list as JSON")
def list_cmd(spec: str, as_json: bool) -> None:
    """Domains with their tool, class and task counts."""
    cat = _load(spec)
    rows: list[dict[str, Any]] = [{"domain": d.name, "title": d.title, "tools": len(d.tools), "classes": len(d.classes),
             "tasks": sum(1 for t in cat.tasks if t.domain == d.name)} for d in cat.domains]
    if as_json:
        _echo_json(rows)
        return
    table = Table(title=f"catalog {cat.name}")
    for col in ("domain", "title", "tools", "classes", "tasks"):
        table.add_column(col, justify="right" if col in ("tools", "classes", "tasks") else "left")
    for r in rows:
        table.add_row(r["domain"], r["title"], str(r["tools"]), str(r["classes"]), str(r["tasks"]))
    table.add_section()
    table.add_row("total", "", str(sum(r["tools"] for r in rows)), str(sum(r["classes"] for r in rows)),
                  str(len(cat.tasks)))
    Console().print(table)

@catalog.command("show")
@click.argument("domain")
@catalog_option
@click.option("--json", "as_json", is_flag=True, help="print the domain (system prompt, tools) as JSON")
def show_cmd(domain: str, spec: str, as_json: bool) -> None:
    """The tools of one DOMAIN with their class and parameters."""
    cat = _load(spec)
    dom = cat.domain(domain)
    if as_json:
        _echo_json({"domain": dom.name, "title": dom.title, "system": dom.system,
                    "tasks": sum(1 for t in cat.tasks if t.domain == dom.name),
                    "tools": [_tool_dict(t) for t in dom.tools]})
        return
    console = Console()
    if dom.system:
        console.print(Text.assemble((dom.title or dom.name, "bold"), ": ", dom.system))
    table = Table(title=f"{dom.name}: {len(dom.tools)} tools, {len(dom.classes)} classes")
    for col in ("tool", "class", "parameters", "description"):
        table.add_column(col, overflow="fold")
    for t in dom.tools:
        params = "\n".join(_param_summary(n, s) for n, s in t.properties.items()) or "-"
        table.add_row(t.name, t.cls, params, t.description)
    console.print(table)
