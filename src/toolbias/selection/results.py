"""Selection results of a store as reports, one per result group.

A result group (:class:`~toolbias.selection.records.GroupKey`) is (model, benchmark,
presentation, prompt, condition, temperature, top-p, tool_choice): records of two groups
are never pooled. :func:`store_reports` gives one
:class:`~toolbias.selection.metrics.BiasReport` per group (its ``extra["group"]`` holds
the key), labelled by :attr:`GroupKey.label`. Figures and HTML sections of these results
live in :mod:`toolbias.report.selection`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import ToolbiasError
from .intervals import with_intervals
from .metrics import Agreement, BiasReport, agreement
from .mitigate import FilterScores, score_filter
from .records import GroupKey, SelectionRecord, Status
from .runner import report_of
from .store import SelectionStore
from .types import FilterExample

BASE, MITIGATED = "base", "mitigated"
#: the mitigated conditions: the draw recorded (``mitigated``) and end to end (``mitigated-e2e``)
MITIGATED_CONDITIONS = (MITIGATED, "mitigated-e2e")
GROUP_FIELDS = ("model", "benchmark", "presentation", "prompt", "condition", "temperature", "top_p", "tool_choice",
                "backbone")


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
        rep = with_intervals(report_of(recs, label=key.label, rule=rule),
                             [s for s in (r.to_selection(rule) for r in recs) if s is not None])
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


def agreements(reports: Mapping[GroupKey, BiasReport]) -> dict[GroupKey, Agreement]:
    """Cross-model agreement among the base groups that differ in the model alone (key: the group, model '')."""
    by_setting: dict[GroupKey, dict[str, BiasReport]] = defaultdict(dict)
    for k, r in reports.items():
        if k.condition == BASE:
            by_setting[replace(k, model="")][k.model] = r
    out = {}
    for setting, per_model in by_setting.items():
        if len(per_model) >= 2:
            try:
                out[setting] = agreement({m: dict(r.api_rates()) for m, r in per_model.items()})
            except ToolbiasError:
                continue
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
