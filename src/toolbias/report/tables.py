"""Terminal tables (rich): the model x variant grid and the smaller sections."""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterator
from typing import Any

from rich.console import Console, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from .grid import ReportData
from .live import LEGEND, TEXT_COLUMNS, live_table_rows
from .tau2_table import paper_table_rows

MODE_SHORT = {
    "livelock": "livelock", "transaction_handle": "txn handle", "rejected_and_stuck": "rejected",
    "wrong_class": "wrong class", "under_execution": "under-exec", "over_execution": "over-exec",
    "wrong_arguments": "wrong args",
}


def pct(x: float | None, digits: int = 1) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.{digits}f}"


def pp(x: float | None) -> str:
    """Signed percentage points."""
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:+.1f}"


def add_row(table: Table, *cells: RenderableType) -> None:
    """Add a row whose plain strings are taken literally (never as rich markup)."""
    table.add_row(*[Text(c) if isinstance(c, str) else c for c in cells])


def _style(success: float) -> str:
    return "green" if success >= 0.75 else "yellow" if success >= 0.4 else "red"


def grid_tables(data: ReportData) -> Iterator[Table]:
    """One table per (control, condition): rows variants, columns models (paper Figure 2)."""
    for control, condition in data.conditions:
        models = [m for m in data.models if any(data.cell(m, v, control, condition) for v in data.variants)]
        table = Table(title=escape(f"{control}/{condition}: success % [95% CI], top failure"),
                  title_justify="left")
        table.add_column("variant", style="bold")
        for m in models:
            table.add_column(escape(m), justify="center")
        for v in data.variants:
            row: list[RenderableType] = [Text(v)]
            if not any(data.cell(m, v, control, condition) for m in models):
                continue
            for m in models:
                c = data.cell(m, v, control, condition)
                if c is None:
                    row.append("")
                    continue
                t = Text(f"{pct(c.success)}", style=_style(c.success))
                t.append(f" [{pct(c.ci_low, 0)}, {pct(c.ci_high, 0)}]", style="dim")
                t.append(f"\n{MODE_SHORT.get(c.dominant_failure or '', c.dominant_failure or '')}", style="dim")
                t.append(f" n={c.n}", style="dim")
                row.append(t)
            table.add_row(*row)
        yield table


def _by_condition(items: list[Any], get: Callable[[Any], tuple[str, str]]) -> dict[tuple[str, str], list[Any]]:
    out: dict[tuple[str, str], list[Any]] = {}
    for it in items:
        out.setdefault(get(it), []).append(it)
    return out


def _ci(low: float, high: float, fmt: Callable[[float | None], str] = pp) -> str:
    return f"[{fmt(low)}, {fmt(high)}]"


def _diff_text(d: Any) -> Text:
    style = "red" if d.ci_high < 0 else "green" if d.ci_low > 0 else ""
    t = Text(pp(d.diff), style=style)
    t.append(f" {_ci(d.ci_low, d.ci_high)}", style="dim")
    return t


def differences_tables(data: ReportData) -> Iterator[Table]:
    """variant - baseline per (control, condition): rows variants, columns models."""
    groups = _by_condition(data.variant_diffs, lambda d: (d.a["control"], d.a["condition"]))
    for (control, condition), diffs in groups.items():
        models = list(dict.fromkeys(d.a["model"] for d in diffs))
        index = {(d.a["model"], d.a["variant"]): d for d in diffs}
        table = Table(title=escape(f"{control}/{condition}: variant - {data.settings.baseline}, pp [paired CI]"),
                  title_justify="left")
        table.add_column("variant", style="bold")
        for m in models:
            table.add_column(escape(m), justify="right", no_wrap=True)
        for v in data.variants:
            if not any((m, v) in index for m in models):
                continue
            add_row(table, v, *[_diff_text(index[(m, v)]) if (m, v) in index else Text("") for m in models])
        yield table


def model_differences_table(data: ReportData) -> Table | None:
    if not data.model_diffs:
        return None
    table = Table(title=escape("model A - model B, pp [paired 95% CI]"),
                  title_justify="left")
    for col in ("A - B", "variant", "ctl/cond", "n", "diff [CI]"):
        table.add_column(escape(col), justify="right" if col in ("n", "diff [CI]") else "left",
                         no_wrap=col == "diff [CI]")
    for d in data.model_diffs:
        add_row(table, f"{d.a['model']} - {d.b['model']}", d.a["variant"], f"{d.a['control']}/{d.a['condition']}",
                      str(d.n), _diff_text(d))
    return table


def gap_table(data: ReportData) -> Table | None:
    if not data.gap:
        return None
    table = Table(title=escape("schema-form gap: lenient - strict, pp [paired 95% CI]"),
                  title_justify="left")
    for col in ("model", "variant", "cond", "n", "strict %", "lenient %", "gap [CI]"):
        table.add_column(escape(col), justify="left" if col in ("model", "variant", "cond") else "right",
                         no_wrap=col == "gap [CI]")
    for d in data.gap:
        add_row(table, d.a["model"], d.a["variant"], d.a["condition"], str(d.n), pct(d.success_b),
                      pct(d.success_a), _diff_text(d))
    return table


def probes_table(data: ReportData) -> Table | None:
    if not data.probes:
        return None
    table = Table(title=escape("compliance probes vs full-task success, % (paper Table 10)"),
                  title_justify="left")
    for col in ("model", "variant", "ctl/cond", "n", "compliance [CI]", "exact call", "task success"):
        table.add_column(escape(col), justify="left" if col in ("model", "variant", "ctl/cond") else "right",
                         no_wrap=col == "compliance [CI]")
    for p in data.probes:
        comp = Text(pct(p.compliance))
        comp.append(f" {_ci(p.compliance_low, p.compliance_high, lambda x: pct(x, 0))}", style="dim")
        add_row(table, p.model, p.variant, f"{p.control}/{p.condition}", str(p.n), comp, pct(p.exact_call),
                      pct(p.task_success))
    return table


def difficulty_table(data: ReportData) -> Table | None:
    if not data.prediction:
        return None
    n = data.settings.sample_n
    table = Table(title=escape(f"difficulty prediction: a random sample of {n} tasks (or probe compliance) vs the "
                        "full-set success, across variants"),
                  title_justify="left")
    for col in ("model", "ctl/cond", "predictor", "k", "MAE pp", "max pp", "cover %", "cover~ %", "r", "rho"):
        table.add_column(escape(col), justify="left" if col in ("model", "ctl/cond", "predictor") else "right")

    def num(x: float | None) -> str:
        return "-" if x is None else f"{x:.2f}"

    for s in data.prediction:
        label = f"sample {n}" if s.predictor == "sample" else "compliance"
        add_row(table, s.model, f"{s.control}/{s.condition}", label, str(s.variants), f"{100 * s.mae:.1f}",
                      f"{100 * s.max_abs_error:.1f}", pct(s.coverage, 0), pct(s.repeat_coverage, 0),
                      num(s.pearson), num(s.spearman))
    table.caption = ("k variants; MAE/max: |prediction - full| in pp; cover: share of intervals containing the "
                     f"full score (first draw); cover~: over {data.settings.repeats} draws; r/rho: Pearson/Spearman")
    return table


def print_text_tables(tables: dict[str, tuple[list[str], list[list[str]]]], console: Console,
                      text_columns: Collection[str] = ()) -> None:
    """Tables given as title -> (header, text cells): the first column and those headed by a
    name in ``text_columns`` left, the others (numbers) right; cells taken literally (never as
    rich markup)."""
    for title, (head, rows) in tables.items():
        console.print(Text(title, style="italic"))  # above the table: a narrow table would wrap it
        t = Table()
        for i, h in enumerate(head):
            t.add_column(h, justify="left" if i == 0 or h in text_columns else "right")
        for row in rows:
            add_row(t, *row)
        console.print(t)


def print_report(data: ReportData, console: Console | None = None) -> None:
    console = console or Console()
    if not data.cells and not data.probes and not paper_table_rows(data.paper_tables) and not data.live:
        console.print(f"[yellow]no finished episodes in {data.store}[/]")
        return
    for table in grid_tables(data):
        console.print(table)
    for table in differences_tables(data):
        console.print(table)
    for make in (model_differences_table, gap_table, probes_table, difficulty_table):
        t = make(data)
        if t is not None:
            console.print(t)
    print_text_tables(paper_table_rows(data.paper_tables), console)  # the paper's Tables 6-9
    print_text_tables(live_table_rows(data.live), console, TEXT_COLUMNS)  # conversations through the proxy
    if data.live:
        console.print(Text(LEGEND, style="dim"))
    for note in data.notes:
        console.print(f"[dim]note: {note}[/]")


__all__ = ["MODE_SHORT", "differences_tables", "difficulty_table", "model_differences_table", "gap_table", "grid_tables", "pct", "pp", "print_report",
           "probes_table"]
