"""Selection results of a store as reports and as HTML sections for the study report.

:func:`store_reports` gives one :class:`~toolbias.selection.metrics.BiasReport` per
(model, benchmark, presentation, condition) group, labelled ``"model | benchmark |
presentation | condition"``. :func:`html_fragments` is the hook the HTML report
(:mod:`toolbias.report.html`) calls: ``html_fragments(store_path) -> [(title, html)]``,
empty when the file holds no selection results; it never writes to the file.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from ..errors import ToolbiasError
from .benchmark import Benchmark
from .metrics import BiasReport, agreement
from .mitigate import FilterExample, FilterScores, score_filter
from .perturb import perturbation_effects
from .records import Status
from .runner import report_of
from .store import SelectionStore

BASE, MITIGATED = "base", "mitigated"


def group_label(model: str, benchmark: str, presentation: str, condition: str) -> str:
    return f"{model} | {benchmark} | {presentation} | {condition}"


def reports_from(st: SelectionStore, *, model: str | None = None, benchmark: str | None = None,
                 condition: str | None = None, presentation: str | None = None) -> dict[str, BiasReport]:
    """One report per stored group with at least one parsed selection (filters optional)."""
    out: dict[str, BiasReport] = {}
    for g in st.groups():
        if any(v is not None and g[k] != v for k, v in (("model", model), ("benchmark", benchmark),
                                                         ("condition", condition), ("presentation", presentation))):
            continue
        if not g["ok"]:
            continue
        label = group_label(g["model"], g["benchmark"], g["presentation"], g["condition"])
        recs = st.records(model=g["model"], benchmark=g["benchmark"], condition=g["condition"],
                          presentation=g["presentation"])
        out[label] = report_of(recs, label=label)
    return out


def store_reports(store: str | Path, **filters: str | None) -> dict[str, BiasReport]:
    """:func:`reports_from` on a store file; ToolbiasError when nothing matches."""
    st = SelectionStore.open_existing(store)
    if st is None:
        raise ToolbiasError("no selection results in this store", where=str(store),
                            fix="run `toolbias select run --store FILE` first")
    with st:
        out = reports_from(st, **filters)
    if not out:
        raise ToolbiasError("no parsed selections in the store match", where=str(store))
    return out


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
    parsed = [label.split(" | ") for label in reports]
    base = {f"{m} ({p}, {b})": reports[group_label(m, b, p, c)] for m, b, p, c in parsed if c == BASE}
    benches = {b for _, b, _, c in parsed if c == BASE}
    if base:
        bench = _bench_for(next(iter(benches))) if len(benches) == 1 else None
        out.append(("Selection bias", "".join(figures.html_fragments(reports=base, bench=bench))))
        by_setting: dict[tuple[str, str], dict[str, BiasReport]] = defaultdict(dict)
        for m, b, p, c in parsed:
            if c == BASE:
                by_setting[(b, p)][m] = reports[group_label(m, b, p, c)]
        for (b, p), per_model in by_setting.items():
            if len(per_model) >= 2:
                try:
                    agree = agreement({m: dict(r.api_rates()) for m, r in per_model.items()})
                except ToolbiasError:
                    continue
                out.append((f"Selection agreement ({b}, {p})", "".join(figures.html_fragments(agreement=agree))))
    groups: dict[tuple[str, str, str], dict[str, BiasReport]] = defaultdict(dict)
    for m, b, p, c in parsed:
        groups[(m, b, p)][c] = reports[group_label(m, b, p, c)]
    for (m, b, p), conds in groups.items():
        perturbed = {c: r for c, r in conds.items() if c not in (BASE, MITIGATED)}
        if BASE in conds and perturbed:
            effects = perturbation_effects(conds[BASE], perturbed)
            out.append((f"Perturbations: {m} ({p}, {b})",
                        "".join(figures.html_fragments(effects=effects, base=conds[BASE]))))
    mitigated = {(m, b): reports[group_label(m, b, p, c)] for m, b, p, c in parsed if c == MITIGATED}
    for (fm, b), after in mitigated.items():
        before = {f"before: {m} ({p})": reports[group_label(m, b, p, c)] for m, bb, p, c in parsed
                  if c == BASE and bb == b}
        pair = {**before, f"after: filter {fm} + uniform draw": after}
        out.append((f"Mitigation ({b})", "".join(figures.html_fragments(mitigation=pair))))
    for label, s in scores.items():
        out.append((f"Filter quality: {label}", "".join(figures.html_fragments(filter_scores=s))))
    return out
