"""The schema-bias paper's published values, and a model's own results placed among them.

The values (``report/data/schema_paper.json``, written by ``tools/gen_schema_paper_values.py``) are the
paper's Figure 2 (11 models x 13 representative variants, success and failure-mode composition), Figure 4
(the appendix variants, 9 models), Table 3's rows, Table 6 (merge encodings) and Table 10 (compliance vs
exact); each block names the table or figure it comes from. :func:`place_model` sets one model's cells
of a report beside them: its success with the report's 95% task-bootstrap interval, its paired
difference from native, and its rank among the paper's models on the same variant.
"""

from __future__ import annotations

import functools
import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from importlib import resources
from typing import Any

from ..errors import ToolbiasError
from ..study.stats import CellStats, Difference
from .grid import ReportData

#: the figures whose rows are variants (``--appendix`` adds Figure 4)
FIGURES = ("figure2", "figure4")
#: the published tables a run can be set beside (``--tables``), by their key in the report's paper tables
PAPER_TABLES = {"table6": "merge_encodings", "table7": "convention_mixture", "table8": "class_controls"}
#: Table 10's columns -> the registered variants whose compliance probes fill them
TABLE10_VARIANTS = {"transaction": "transaction", "schema discovery": "schema_discovery",
                    "opaque names": "opaque_names", "fully merged": "fully_merged"}


@functools.cache
def published() -> dict[str, Any]:
    """The paper's published values (each block with its ``source``)."""
    text = resources.files("toolbias.report").joinpath("data/schema_paper.json").read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def _label_key(label: str) -> str:
    # the artifact's CSVs write the ratio sign as U+00D7, the registry as "x"
    return label.replace("\u00d7", "x").strip().lower()


def variant_of_label(label: str) -> str | None:
    """The registered toolbias variant that reproduces the paper's row ``label`` (None: none does)."""
    from ..variants.named import REGISTRY

    key = _label_key(label)
    return next((name for name, spec in REGISTRY.items() if spec.paper and _label_key(spec.paper) == key), None)


def paper_variants(*, appendix: bool = False) -> list[str]:
    """The registered variants of Figure 2's rows (and Figure 4's with ``appendix``), native first."""
    pub = published()
    labels = list(pub["figure2"]["variants"]) + (list(pub["figure4"]["variants"]) if appendix else [])
    names = [variant_of_label(label) for label in labels]
    return list(dict.fromkeys(n for n in names if n is not None))


def table_arms(*, paper: bool = False) -> list[str]:
    """The variants of the arms of Tables 6, 7 and 8: each arm's first registered name, or with
    ``paper`` the artifact's own arm (its ``paper.<name>`` rendering, as the paper's tables define them)."""
    from ..variants.named import REGISTRY
    from .paper_tables import (
        CLASS_CONTROLS,
        CONVENTION_TARGETS,
        MERGE_ENCODINGS,
        PAPER_CLASS_CONTROLS,
        PAPER_CONVENTION_TARGETS,
        PAPER_MERGE_ENCODINGS,
    )

    if paper:
        arms = [*PAPER_MERGE_ENCODINGS.values(), *(n for t in PAPER_CONVENTION_TARGETS.values() for n in t.values()),
                *PAPER_CLASS_CONTROLS.values()]
        return list(dict.fromkeys(names[0] for names in arms))
    arms = [*MERGE_ENCODINGS.values(), *(n for t in CONVENTION_TARGETS.values() for n in t.values()),
            *CLASS_CONTROLS.values()]
    return list(dict.fromkeys(next(n for n in names if n in REGISTRY) for names in arms))


@dataclass(frozen=True)
class PaperValue:
    """One published cell: a model's success on a variant, its change from native and its failure modes
    (fractions of all episodes, paper Table 2's modes plus ``other``)."""

    model: str
    success: float
    delta: float
    failure_modes: dict[str, float]


@dataclass
class PlacedRow:
    """One variant: the paper's models and the user's model side by side."""

    figure: str
    label: str                   # the paper's row label
    variant: str | None          # the toolbias variant that reproduces it (None: not registered)
    paper: list[PaperValue]
    success: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    n: int = 0
    failure_modes: dict[str, float] = field(default_factory=dict)
    delta: float | None = None
    delta_ci: tuple[float, float] | None = None
    rank: int | None = None      # 1 = best, among the paper's models and the user's

    @property
    def of(self) -> int:
        return len(self.paper) + (self.success is not None)

    @property
    def paper_median(self) -> float:
        return statistics.median(v.success for v in self.paper)

    @property
    def nearest(self) -> PaperValue | None:
        """The paper's model whose success on this variant is closest to the user's."""
        if self.success is None or not self.paper:
            return None
        return min(self.paper, key=lambda v: (abs(v.success - (self.success or 0.0)), v.model))

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.update(of=self.of, paper_median=self.paper_median)
        return out


@dataclass
class Placement:
    """A model's results set among the paper's published ones."""

    model: str
    control: str
    condition: str
    rows: list[PlacedRow]
    sources: dict[str, str]
    tables: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "control": self.control, "condition": self.condition,
                "rows": [r.to_dict() for r in self.rows], "tables": self.tables, "sources": self.sources,
                "notes": self.notes}


def _paper_rows(block: Mapping[str, Any]) -> dict[str, list[PaperValue]]:
    out: dict[str, list[PaperValue]] = {}
    for r in block["rows"]:
        out.setdefault(r["variant"], []).append(
            PaperValue(r["model"], float(r["success"]), float(r["delta"]), dict(r["failure_modes"])))
    return out


def _rank(success: float, paper: Sequence[PaperValue]) -> int:
    return 1 + sum(v.success > success for v in paper)


def stored_name(variant: str, *, paper: bool) -> str:
    """The name a study stores ``variant`` under: under the paper's protocol its artifact rendering's
    (``paper.<name>``) where it has one."""
    if not paper:
        return variant
    from ..errors import VariantError
    from ..variants.paper import paper_rendering

    try:
        return paper_rendering(variant).name
    except VariantError:
        return variant


def place_model(report: ReportData, model: str, *, control: str = "strict", condition: str = "base",
                appendix: bool = False, paper: bool = False) -> Placement:
    """``model``'s cells of ``report`` (under ``control`` / ``condition``) beside the paper's rows;
    ``paper``: the study ran under the paper's protocol (its variants stored as ``paper.<name>``)."""
    if model not in report.models:
        raise ToolbiasError(f"no episodes of model '{model}' in the store", where=report.store,
                            fix=f"models in the store: {', '.join(report.models) or 'none'}")
    pub = published()
    diffs: dict[str, Difference] = {
        d.a["variant"]: d for d in report.variant_diffs
        if d.a.get("model") == model and d.a.get("control") == control and d.a.get("condition") == condition}
    rows: list[PlacedRow] = []
    for figure in FIGURES[: 2 if appendix else 1]:
        for label, values in _paper_rows(pub[figure]).items():
            if figure != "figure2" and _label_key(label) == "native":
                continue  # Figure 4 repeats Figure 2's native row
            own = variant_of_label(label)
            row = PlacedRow(figure, label, stored_name(own, paper=paper) if own else None, values)
            cell: CellStats | None = report.cell(model, row.variant, control, condition) if row.variant else None
            if cell is not None and cell.n:
                row.success, row.ci_low, row.ci_high, row.n = cell.success, cell.ci_low, cell.ci_high, cell.n
                row.failure_modes = {m: k / cell.episodes for m, k in cell.failure_modes.items()} if cell.episodes else {}
                row.rank = _rank(cell.success, values)
                d = diffs.get(row.variant or "")
                if d is not None:
                    row.delta, row.delta_ci = d.diff, (d.ci_low, d.ci_high)
            rows.append(row)
    notes = []
    missing = [r.label for r in rows if r.variant is None]
    if missing:
        notes.append(f"no registered variant reproduces: {', '.join(missing)}")
    unrun = [r.label for r in rows if r.variant is not None and r.success is None]
    if unrun:
        notes.append(f"not run for {model}: {', '.join(unrun)}")
    tables: dict[str, Any] = {k: pub[k] for k in ("table3", "table6", "table8", "table10")}
    yours = _your_tables(report, model, control, condition)
    if yours:
        tables["yours"] = yours
    sources = {k: pub[k]["source"] for k in ("figure2", "figure4", "table3", "table6", "table8", "table10")}
    return Placement(model, control, condition, rows, sources, tables, notes)


def _your_tables(report: ReportData, model: str, control: str, condition: str) -> dict[str, Any]:
    """The model's rows of Tables 6, 7 and 8 (where their arms were run) and of Table 10 (where probes were)."""
    out: dict[str, Any] = {}
    for key, name in PAPER_TABLES.items():
        rows = [r for r in report.paper_tables.get(name, [])
                if (r["model"], r["control"], r["condition"]) == (model, control, condition)]
        if rows:
            out[key] = rows
    probes = {p.variant.removeprefix("paper."): p for p in report.probes if p.model == model and p.control == control
              and p.condition == condition}
    table10 = {col: {"compliance": probes[v].compliance, "compliance_low": probes[v].compliance_low,
                     "compliance_high": probes[v].compliance_high, "exact": probes[v].task_success}
               for col, v in TABLE10_VARIANTS.items() if v in probes}
    if table10:
        out["table10"] = table10
    return out


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def _interval(lo: float | None, hi: float | None, *, signed: bool = False) -> str:
    if lo is None or hi is None:
        return ""
    f = "{:+.0f}" if signed else "{:.0f}"
    return f"[{f.format(100 * lo)}, {f.format(100 * hi)}]"


def text_rows(placement: Placement) -> list[list[str]]:
    """One line per variant for the terminal: yours, its change from native, rank, the paper's spread."""
    out = []
    for r in placement.rows:
        near = r.nearest
        paper = [v.success for v in r.paper]
        delta = "" if r.delta is None else f"{100 * r.delta:+.0f} {_interval(*(r.delta_ci or (None, None)), signed=True)}"
        dominant = max(r.failure_modes.items(), key=lambda kv: kv[1])[0] if r.failure_modes else ""
        out.append([r.label, f"{_pct(r.success)} {_interval(r.ci_low, r.ci_high)}".strip(), delta,
                    f"{r.rank}/{r.of}" if r.rank else "-",
                    f"{_pct(min(paper))}-{_pct(r.paper_median)}-{_pct(max(paper))}",
                    f"{near.model} {_pct(near.success)}" if near else "", dominant])
    return out


TEXT_HEAD = ["variant (paper row)", "yours % [95% CI]", "vs native pp [95% CI]", "rank",
             "paper min-median-max %", "nearest paper model", "your main failure"]


def render_html(placement: Placement) -> str:
    """A standalone HTML page: every paper model's success per variant, the user's column beside them."""
    from .html import e

    models = list(dict.fromkeys(v.model for r in placement.rows for v in r.paper))
    head = ["variant", *models, f"{placement.model} [95% CI]", "rank"]
    body = []
    for r in placement.rows:
        by = {v.model: v.success for v in r.paper}
        cells = [f"<td>{e(r.label)}</td>"] + [f"<td class=n>{_pct(by.get(m))}</td>" for m in models]
        cells.append(f"<td class='n you'>{e(_pct(r.success))} {e(_interval(r.ci_low, r.ci_high))}</td>")
        cells.append(f"<td class=n>{e(f'{r.rank}/{r.of}' if r.rank else '-')}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    sources = "".join(f"<li>{e(s)}</li>" for s in placement.sources.values())
    notes = "".join(f"<li>{e(n)}</li>" for n in placement.notes)
    return ("<!doctype html><html><head><meta charset=utf-8><title>toolbias: "
            f"{e(placement.model)} beside the schema-bias paper</title><style>"
            "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
            "td,th{border:1px solid #ccc;padding:2px 6px}td.n{text-align:right}td.you{background:#ffd}"
            "</style></head><body>"
            f"<h1>{e(placement.model)} beside the paper's models</h1>"
            f"<p>exact success (%), control {e(placement.control)}, condition {e(placement.condition)}</p>"
            "<table><tr>" + "".join(f"<th>{e(h)}</th>" for h in head) + "</tr>" + "".join(body) + "</table>"
            f"<h2>Sources</h2><ul>{sources}</ul>" + (f"<h2>Notes</h2><ul>{notes}</ul>" if notes else "")
            + "</body></html>\n")


__all__ = ["stored_name", "FIGURES", "PAPER_TABLES", "TABLE10_VARIANTS", "table_arms", "PaperValue", "Placement", "PlacedRow", "TEXT_HEAD", "paper_variants", "place_model",
           "published", "render_html", "text_rows", "variant_of_label"]
