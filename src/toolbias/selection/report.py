"""Selection results of a store as reports, one per result group, and as HTML sections.

A result group (:class:`~toolbias.selection.records.GroupKey`) is (model, benchmark,
presentation, prompt, condition, temperature, top-p, tool_choice): records of two groups
are never pooled. :func:`store_reports` gives one
:class:`~toolbias.selection.metrics.BiasReport` per group (its ``extra["group"]`` holds
the key), labelled by :attr:`GroupKey.label`. :func:`html_fragments` is the hook the HTML
report (:mod:`toolbias.report.html`) calls: ``html_fragments(store_path) -> [(title, html)]``,
empty when the file holds no selection results; it never writes to the file.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import ToolbiasError
from .metrics import BiasReport, agreement
from .mitigate import FilterScores, score_filter
from .perturb import perturbation_effects
from .records import GroupKey, SelectionRecord, Status
from .runner import report_of
from .store import SelectionStore
from .types import Benchmark, FilterExample

BASE, MITIGATED = "base", "mitigated"
GROUP_FIELDS = ("model", "benchmark", "presentation", "prompt", "condition", "temperature", "top_p", "tool_choice")


def group_records(records: list[SelectionRecord], **filters: Any) -> dict[GroupKey, list[SelectionRecord]]:
    """Records by result group, keeping groups whose fields equal every filter given (None: any)."""
    wanted = {k: v for k, v in filters.items() if v is not None}
    unknown = set(wanted) - set(GROUP_FIELDS)
    if unknown:
        raise ToolbiasError(f"unknown group filter(s): {sorted(unknown)}", fix=f"use {', '.join(GROUP_FIELDS)}")
    out: dict[GroupKey, list[SelectionRecord]] = defaultdict(list)
    for r in records:
        g = r.group
        if all(_same(getattr(g, k), v) for k, v in wanted.items()):
            out[g].append(r)
    return dict(sorted(out.items(), key=lambda kv: kv[0].label))


def _same(have: Any, want: Any) -> bool:
    if isinstance(have, float) or isinstance(want, float):
        try:
            return have is not None and abs(float(have) - float(want)) < 1e-12
        except (TypeError, ValueError):
            return False
    return str(have) == str(want) if have is not None else str(want).lower() in ("none", "?", "")


def reports_from(st: SelectionStore, *, rule: str = "exact", **filters: Any) -> dict[GroupKey, BiasReport]:
    """One report per stored group with at least one parsed selection (filters optional)."""
    out: dict[GroupKey, BiasReport] = {}
    for key, recs in group_records(st.records(), **filters).items():
        if not any(r.to_selection(rule) for r in recs):
            continue
        rep = report_of(recs, label=key.label, rule=rule)
        out[key] = replace(rep, extra={**rep.extra, "group": key.to_dict(), "rule": rule})
    return out


def store_reports(store: str | Path, *, rule: str = "exact", **filters: Any) -> dict[GroupKey, BiasReport]:
    """:func:`reports_from` on a store file; ToolbiasError when nothing matches."""
    st = SelectionStore.open_existing(store)
    if st is None:
        raise ToolbiasError("no selection results in this store", where=str(store),
                            fix="run `toolbias select run --store FILE` first")
    with st:
        out = reports_from(st, rule=rule, **filters)
    if not out:
        raise ToolbiasError("no parsed selections in the store match", where=str(store),
                            fix="check the filters (toolbias select metrics --store FILE lists the groups)")
    return out


def one_group(reports: dict[GroupKey, BiasReport], what: str) -> tuple[GroupKey, BiasReport]:
    """The only group, or a ToolbiasError listing the groups to choose from (never pooled)."""
    if len(reports) == 1:
        return next(iter(reports.items()))
    listing = "; ".join(k.label for k in reports)
    raise ToolbiasError(f"{len(reports)} result groups match for {what}: {listing}",
                        fix="narrow with --model, --presentation, --prompt, --condition, --temperature, --top-p "
                            "or --tool-choice")


def filter_scores_from(st: SelectionStore) -> dict[str, FilterScores]:
    """Filter-quality scores per (filter model, evaluation set) from the stored filter answers."""
    rows_by: dict[str, list[dict]] = defaultdict(list)
    for r in st.filter_rows():
        if r.get("status") != Status.ERROR.value:
            rows_by[f"{r['model']} on {r['eval_set']}"].append(r)
    out = {}
    for label, rows in rows_by.items():
        examples = [FilterExample(id=str(r["example"]), query="", candidates=(), correct=frozenset(r["correct"]))
                    for r in rows]
        preds = [frozenset(r["predicted"]) if r["predicted"] is not None else None for r in rows]
        out[label] = score_filter(examples, preds)
    return out


def _bench_for(name: str) -> Benchmark | None:
    if name != "builtin":
        return None
    from .benchmark import builtin_benchmark

    return builtin_benchmark()


def html_fragments(store: str | Path) -> list[tuple[str, str]]:
    """(title, static HTML) sections for the selection results in a store; [] when there are none."""
    from . import figures

    st = SelectionStore.open_existing(store)
    if st is None:
        return []
    with st:
        reports = reports_from(st)
        scores = filter_scores_from(st)
    out: list[tuple[str, str]] = []
    base = {k.label: r for k, r in reports.items() if k.condition == BASE}
    benches = {k.benchmark for k in reports if k.condition == BASE}
    if base:
        bench = _bench_for(next(iter(benches))) if len(benches) == 1 else None
        out.append(("Selection bias", "".join(figures.html_fragments(reports=base, bench=bench))))
        by_setting: dict[GroupKey, dict[str, BiasReport]] = defaultdict(dict)
        for k, r in reports.items():
            if k.condition == BASE:
                by_setting[replace(k, model="")][k.model] = r
        for setting, per_model in by_setting.items():
            if len(per_model) >= 2:
                try:
                    agree = agreement({m: dict(r.api_rates()) for m, r in per_model.items()})
                except ToolbiasError:
                    continue
                out.append((f"Selection agreement ({setting.label.lstrip(' |')})",
                            "".join(figures.html_fragments(agreement=agree))))
    groups: dict[GroupKey, dict[str, BiasReport]] = defaultdict(dict)
    for k, r in reports.items():
        groups[replace(k, condition="")][k.condition] = r
    for setting, conds in groups.items():
        perturbed = {c: r for c, r in conds.items() if c not in (BASE, MITIGATED)}
        if BASE in conds and perturbed:
            effects = perturbation_effects(conds[BASE], perturbed)
            out.append((f"Perturbations: {setting.label}",
                        "".join(figures.html_fragments(effects=effects, base=conds[BASE]))))
    for k, after in reports.items():
        if k.condition != MITIGATED:
            continue
        before = {f"before: {b.model} ({b.presentation})": r for b, r in reports.items()
                  if b.condition == BASE and b.benchmark == k.benchmark}
        pair = {**before, f"after: filter {k.model} + uniform draw": after}
        out.append((f"Mitigation ({k.benchmark})", "".join(figures.html_fragments(mitigation=pair))))
    for label, s in scores.items():
        out.append((f"Filter quality: {label}", "".join(figures.html_fragments(filter_scores=s))))
    return out
