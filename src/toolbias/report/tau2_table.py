"""The schema-bias paper's Table 9: tau2-bench task success per model and schema, per domain.

Rows are models (per schema control and condition: the paper's table is strict/base), columns
the schemas run, native first, then the paper's five (fully merged, nested args, transaction,
reference resolution, schema discovery), then any other variant in registry order. Episodes
come from two places and are pooled per (domain, model, schema): in-process runs
(``--catalog tau2:DOMAIN``, kind ``task``; success is tau2's reward as stored) and tau2 results
files imported with ``toolbias report --tau2-results`` (kind ``tau2``,
:mod:`toolbias.integrations.tau2_results`).

A cell's success is the mean over tasks of each task's mean success over its trials, with a
task bootstrap interval; each schema's difference from native is paired by task (the tasks
both cells ran). ``best`` lists each row's highest-scoring schemas (the paper's bold).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..integrations.tau2_results import SKIPPED, TAU2_KIND
from ..study.stats import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES, bootstrap_ci, paired_bootstrap, task_success
from .paper_tables import condition_of, format_interval, format_value, table_rows

#: the paper's Table 9 schemas, in its column order, with its short column labels
TABLE9_SCHEMAS: dict[str, str] = {
    "native": "native", "fully_merged": "merged", "nested_args": "nested", "transaction": "txn.",
    "reference_resolution": "ref.", "schema_discovery": "disc.",
}
#: tau2's domains in the paper's order; any other tau2 domain follows
DOMAIN_ORDER = ("airline", "retail")
BASELINE = "native"
TABLE_KEY = "tau2_bench"
#: how the catalog of a tau2-bench domain run in process starts (``tau2:airline``)
TAU2_CATALOG = "tau2:"


def is_tau2(df: Any) -> Any:
    """Which rows of an episodes DataFrame are tau2-bench episodes (in process or imported)."""
    return (df["kind"] == TAU2_KIND) | ((df["kind"] == "task") & df["catalog"].astype(str).str.startswith(TAU2_CATALOG))


def schema_order(variants: Sequence[str]) -> list[str]:
    """The paper's six schemas in its order, then other variants in registry order, then the
    rest (a spec-file variant) as first seen."""
    from ..variants import registry

    names = list(dict.fromkeys(variants))
    rank = {v: i for i, v in enumerate([*TABLE9_SCHEMAS, *(n for n in registry() if n not in TABLE9_SCHEMAS)])}
    return sorted(names, key=lambda v: (rank.get(v, len(rank)), names.index(v)))


def tau2_table(df: Any, imported: Any = None, *, seed: int = 0, n_resamples: int = DEFAULT_RESAMPLES,
               confidence: float = DEFAULT_CONFIDENCE) -> list[dict[str, Any]]:
    """Table 9 rows from episodes DataFrames (``df``: any episodes, of which the tau2 ones are
    used; ``imported``: more, e.g. the store's imported results): one per (domain, model,
    control, condition), with a cell per schema run."""
    records = [r for frame in (df, imported) if frame is not None and len(frame)
               for r in frame[is_tau2(frame)].to_dict("records")]
    groups: dict[tuple[str, str, str, str], dict[str, list[dict[str, Any]]]] = {}
    for r in records:
        group = (str(r["domain"]), str(r["model"]), str(r["control"]), str(r["condition"]))
        groups.setdefault(group, {}).setdefault(str(r["variant"]), []).append(r)
    domains = {k[0] for k in groups}
    rank = {d: i for i, d in enumerate([*DOMAIN_ORDER, *sorted(domains - set(DOMAIN_ORDER))])}
    rows = []
    for (domain, model, control, condition), by_variant in sorted(
            groups.items(), key=lambda kv: (rank[kv[0][0]], kv[0][2] != "strict", kv[0][3] != "base")):
        per_task = {v: task_success(rs) for v, rs in by_variant.items()}
        native = per_task.get(BASELINE)
        cells: dict[str, dict[str, Any]] = {}
        for v in schema_order(list(by_variant)):
            rs, tasks = by_variant[v], per_task[v]
            cell_key = ("tau2", domain, model, control, condition, v)
            iv = bootstrap_ci(list(tasks.values()), confidence=confidence, n_resamples=n_resamples, seed=seed,
                              key=cell_key)
            cell: dict[str, Any] = {
                "success": iv.estimate, "ci_low": iv.low, "ci_high": iv.high, "n": len(tasks), "episodes": len(rs),
                "sources": {"in_process": sum(1 for r in rs if r["kind"] != TAU2_KIND),
                            "imported": sum(1 for r in rs if r["kind"] == TAU2_KIND)},
                "skipped": sum(1 for r in rs if r["failure_mode"] == SKIPPED)}
            if native is not None and v != BASELINE:
                d = paired_bootstrap(tasks, native, confidence=confidence, n_resamples=n_resamples, seed=seed,
                                     key=("tau2-diff", *cell_key[1:]))
                cell["vs_native"] = {"estimate": d.estimate, "low": d.low, "high": d.high, "n": d.n}
            cells[v] = cell
        top = max(c["success"] for c in cells.values())
        rows.append({"domain": domain, "model": model, "control": control, "condition": condition,
                     "tasks": max(c["n"] for c in cells.values()), "schemas": list(cells), "cells": cells,
                     "best": [v for v, c in cells.items() if c["success"] >= top - 1e-12]})
    return rows


def tau2_table_rows(rows: Sequence[Mapping[str, Any]]) -> dict[str, tuple[list[str], list[list[str]]]]:
    """Two text tables per domain: success per model and schema (``*``: the row's best schema,
    ``†``: the cell holds samples tau2 skipped after an error, as the paper marks a task scored
    as a failure after its requests timed out; ``(n=k)`` where a cell ran fewer tasks than its
    row), and each schema minus native, paired by task, with its interval."""
    out: dict[str, tuple[list[str], list[list[str]]]] = {}
    for domain in dict.fromkeys(str(r["domain"]) for r in rows):
        mine = [r for r in rows if r["domain"] == domain]
        schemas = schema_order([v for r in mine for v in r["schemas"]])
        labels = [TABLE9_SCHEMAS.get(v, v) for v in schemas]
        rates = []
        for r in mine:
            cells = r["cells"]
            rates.append([r["model"] + condition_of(r), str(r["tasks"])] + [
                "-" if v not in cells else format_value(cells[v]["success"]) + ("*" if v in r["best"] else "")
                + ("†" * bool(cells[v]["skipped"]))
                + (f" (n={cells[v]['n']})" if cells[v]["n"] != r["tasks"] else "") for v in schemas])
        dagger = any(c["skipped"] for r in mine for c in r["cells"].values())
        legend = "* best; n tasks" + ("; † with samples tau2 skipped after an error (failures)" if dagger else "")
        out[f"Table 9, tau2-bench {domain}: task success by schema ({legend})"] = (
            ["model", "n", *labels], rates)
        others = [v for v in schemas if v != BASELINE]
        if BASELINE in schemas and others:
            diffs = [[r["model"] + condition_of(r)] + [format_interval(r["cells"].get(v, {}).get("vs_native")) for v in others]
                     for r in mine]
            out[f"Table 9, tau2-bench {domain}: schema - native, paired by task [95% CI]"] = (
                ["model", *[TABLE9_SCHEMAS.get(v, v) for v in others]], diffs)
    return out


def paper_table_rows(tables: Mapping[str, Any]) -> dict[str, tuple[list[str], list[list[str]]]]:
    """Header and text rows of the paper's Tables 6-9 in a report's ``paper_tables``."""
    return {**table_rows(tables), **tau2_table_rows(tables.get(TABLE_KEY) or [])}


__all__ = ["DOMAIN_ORDER", "TABLE9_SCHEMAS", "TABLE_KEY", "TAU2_CATALOG", "is_tau2", "paper_table_rows", "schema_order",
           "tau2_table", "tau2_table_rows"]
