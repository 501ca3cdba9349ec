"""Catalog statistics in the shape of the schema-bias paper's Table 5.

:func:`catalog_stats` returns plain JSON-able data (for ``--json`` and tests);
:func:`stats_table` renders it as a rich table.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from .model import Catalog

#: Argument kinds, in display order. ``enum`` is any parameter with an ``enum``;
#: ``string`` is a free string; the rest are JSON types (a list of types counts as ``other``).
ARG_KINDS = ("enum", "string", "integer", "number", "boolean", "object", "array", "other")


def _summary(values: Sequence[float]) -> dict[str, float | int | None]:
    if not values:
        return {"min": None, "max": None, "mean": None}
    return {"min": min(values), "max": max(values), "mean": round(sum(values) / len(values), 3)}


def argument_kind(schema: Mapping[str, Any]) -> str:
    """``enum``, ``string`` (free), ``integer``, ``number``, ``boolean``, ``object``, ``array`` or ``other``."""
    if "enum" in schema:
        return "enum"
    t = schema.get("type")
    return t if isinstance(t, str) and t in ARG_KINDS else "other"


def catalog_stats(catalog: Catalog) -> dict[str, Any]:
    """Counts describing a catalog's tools and its query set (paper Table 5).

    Arguments are the top-level parameters of each tool (a nested object counts once).
    Word counts split on whitespace; the templated mean covers tasks that have one.
    """
    tools = catalog.tools
    per_domain = [len(d.tools) for d in catalog.domains]
    per_tool: list[int] = []
    kinds: Counter[str] = Counter()
    enum_sizes: list[int] = []
    required = 0
    for tool in tools:
        props = tool.properties
        per_tool.append(len(props))
        req = set(tool.required)
        for name, schema in props.items():
            kind = argument_kind(schema) if isinstance(schema, Mapping) else "other"
            kinds[kind] += 1
            if kind == "enum":
                enum_sizes.append(len(schema["enum"]))
            required += name in req
    classes = {(d.name, t.cls) for d in catalog.domains for t in d.tools}
    tasks = catalog.tasks
    lengths = Counter(len(t.gold) for t in tasks)
    templated = [len(t.query_templated.split()) for t in tasks if t.query_templated]
    total_args = sum(per_tool)
    return {
        "catalog": catalog.name,
        "domains": len(catalog.domains),
        "tools": len(tools),
        "tools_per_domain": _summary(per_domain),
        "classes": len(classes),
        "arguments": {
            "total": total_args,
            "required": required,
            "all_required": required == total_args,
            "per_tool": _summary(per_tool),
            "by_type": {k: kinds.get(k, 0) for k in ARG_KINDS},
        },
        "enum_values": _summary(enum_sizes),
        "queries": {
            "total": len(tasks),
            "gold_calls": sum(len(t.gold) for t in tasks),
            "by_length": {str(n): lengths[n] for n in sorted(lengths)},
            "by_domain": {d.name: sum(1 for t in tasks if t.domain == d.name) for d in catalog.domains},
            "words": {
                "query": _summary([len(t.query.split()) for t in tasks])["mean"],
                "templated": _summary(templated)["mean"],
            },
        },
    }


def _fmt(x: float | int | None, digits: int = 1) -> str:
    if x is None:
        return "-"
    return str(x) if isinstance(x, int) else f"{x:.{digits}f}"


def stats_table(stats: Mapping[str, Any]) -> Any:
    """A rich Table of :func:`catalog_stats` output, laid out like the paper's Table 5."""
    from rich.table import Table

    table = Table(title=f"catalog {stats['catalog']}", show_header=True)
    table.add_column("statistic")
    table.add_column("value", justify="right", no_wrap=True)
    tpd = stats["tools_per_domain"]
    args = stats["arguments"]
    apt = args["per_tool"]
    by = args["by_type"]
    ev = stats["enum_values"]
    table.add_row("Domains", str(stats["domains"]))
    table.add_row("Native tools", f"{stats['tools']} ({_fmt(tpd['min'])}-{_fmt(tpd['max'])} per domain)")
    table.add_row("Tool classes", str(stats["classes"]))
    req = "all required" if args["all_required"] else f"{args['required']} required"
    table.add_row("Arguments",
                  f"{args['total']} ({_fmt(apt['min'])}-{_fmt(apt['max'])} per tool, mean {_fmt(apt['mean'])}; {req})")
    table.add_row("  enumerated (enum)", f"{by['enum']} ({_fmt(ev['min'])}-{_fmt(ev['max'])} values, mean {_fmt(ev['mean'])})")
    table.add_row("  free string / integer / boolean", f"{by['string']} / {by['integer']} / {by['boolean']}")
    rest = {k: by[k] for k in ("number", "object", "array", "other") if by.get(k)}
    if rest:
        table.add_row("  " + " / ".join(rest), " / ".join(str(v) for v in rest.values()))
    q = stats["queries"]
    table.add_section()
    table.add_row("Queries", str(q["total"]))
    if q["total"]:
        lengths = q["by_length"]
        table.add_row(f"  by gold length ({'/'.join(lengths)})", " / ".join(str(v) for v in lengths.values()))
        table.add_row("  gold calls", str(q["gold_calls"]))
        words = q["words"]
        tmpl = f" (templated {_fmt(words['templated'])})" if words["templated"] is not None else ""
        table.add_row("  words per query, mean", f"{_fmt(words['query'])}{tmpl}")
    return table


__all__ = ["ARG_KINDS", "argument_kind", "catalog_stats", "stats_table"]
