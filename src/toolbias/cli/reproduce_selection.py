"""CLI: ``toolbias reproduce selection``: the BiasBusters protocol on the user's model, in the paper's table.

Parses options, calls :func:`toolbias.selection.reproduce.reproduce_selection`, prints the table
(text, ``--json``, ``--html FILE``)."""

from __future__ import annotations

import html
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from ..errors import ToolbiasError
from ..selection.backbones import BACKBONE_NAMES
from .options import base_url_option, concurrency_option, model_option, store_option

#: where the authors' BiasBusters files are found when --benchmark is not given
DATA_ENV = "TOOLBIAS_BIASBUSTERS"
#: else here, as `select pretrain-corpus` and `select paper` look
DEFAULT_DATA = "../shared/data/biasbusters"


def _benchmark_spec(given: str | None) -> str:
    if given:
        return given
    folder = os.environ.get(DATA_ENV)
    if folder:
        return f"biasbusters:{folder}"
    if Path(DEFAULT_DATA, "duplicate_api_clusters.json").is_file():
        return f"biasbusters:{DEFAULT_DATA}"
    raise ToolbiasError("which benchmark? The paper's table was measured on the authors' ten clusters",
                        where="--benchmark", fix=f"give --benchmark biasbusters:DIR (the folder of "
                                                 f"duplicate_api_clusters.json), or set {DATA_ENV}=DIR; "
                                                 "builtin or FILE.json run another benchmark")


def _floats(text: str | None) -> list[float]:
    if not text:
        return []
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ToolbiasError(f"--temperatures must be a comma list of numbers, got '{text}'") from None


def _names(text: str | None) -> list[str]:
    return [x.strip() for x in (text or "").split(",") if x.strip()]


def _num(x: Any) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def _with_ci(row: Mapping[str, Any], metric: str) -> str:
    iv = (row.get("intervals") or {}).get(metric)
    text = _num(row.get(metric))
    if iv and iv.get("low") is not None:
        text += f" [{iv['low']:.3f}, {iv['high']:.3f}]"
    return text


METRICS = ("delta_api", "delta_pos", "delta_model")


Section = tuple[str, list[str], list[list[str]], list[bool]]


def sections(result: Mapping[str, Any]) -> list[Section]:
    """(title, header, rows, bold rows) of the main table and of each optional table."""
    where = result["benchmark"] + (f", first {result['queries_per_cluster']} queries per cluster"
                                   if result["queries_per_cluster"] else "")
    rows = result["main_table"]
    out: list[Section] = [(
        f"tool-selection bias: {result['model']} ({result['backbone']}) among the paper's models "
        f"(paper rows: {result['main_table_source']}; this run: {where}; 95% bootstrap intervals over queries)",
        ["model", "source", "δ API", "δ pos", "δ model"],
        [[r["model"], r["source"], *(_with_ci(r, m) for m in METRICS)] for r in rows],
        [r["source"] == "this run" for r in rows])]
    if "temperature" in result:
        t = result["temperature"]
        out.append((f"temperature ({t['paper']['source']})", ["T", "δ model (this run)", "δ model (paper)"],
                    [[f"{r['temperature']:g}", _with_ci(r, "delta_model"), _num(r["paper_delta_model"])]
                     for r in t["rows"]], []))
    if "prompt" in result:
        p = result["prompt"]
        out.append((f"system prompt ({p['paper']['source']})", ["prompt", "δ API", "δ pos", "δ model",
                                                                "paper δ model"],
                    [[r["prompt"], *(_with_ci(r, m) for m in METRICS), _num((r["paper"] or {}).get("delta_model"))]
                     for r in p["rows"]], []))
    if "perturbation" in result:
        q = result["perturbation"]
        models = q["paper"]["models"]
        out.append((f"perturbations: TV to the base run ({q['paper']['source']})",
                    ["condition", "this run", *(f"paper: {m}" for m in models)],
                    [[f"{r['label']} ({r['condition']})", _num(r["tv_to_base"]),
                      *(_num((r["paper_tv_vs_base"] or {}).get(m)) for m in models)] for r in q["rows"]], []))
    return out


def text_tables(result: Mapping[str, Any]) -> list[Table]:
    """The tables of :func:`sections` as rich tables."""
    tables = []
    for title, header, rows, bold in sections(result):
        t = Table(title=title)
        for col in header:
            t.add_column(col)
        for i, r in enumerate(rows):
            t.add_row(*r, style="bold" if i < len(bold) and bold[i] else None)
        tables.append(t)
    return tables


def html_page(result: Mapping[str, Any]) -> str:
    """A self-contained HTML page of the tables (every text escaped: model names and prompts are data)."""
    from ..report.html import CSP, CSS

    e = html.escape
    parts = ["<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">",
             f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
             f"<title>toolbias reproduce selection - {e(str(result['model']))}</title><style>{CSS}</style></head>"
             "<body><main>", f"<h1>Tool-selection bias: {e(str(result['model']))} among the paper's models</h1>"]
    for title, header, rows, bold in sections(result):
        head = "".join(f"<th>{e(h)}</th>" for h in header)
        body = "".join(("<tr><th scope=\"row\">" if i < len(bold) and bold[i] else "<tr><td>")
                       + e(r[0]) + ("</th>" if i < len(bold) and bold[i] else "</td>")
                       + "".join(f"<td>{e(c)}</td>" for c in r[1:]) + "</tr>" for i, r in enumerate(rows))
        parts.append(f"<h2>{e(title)}</h2><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
    if result.get("notes"):
        parts.append("<ul>" + "".join(f"<li>{e(n)}</li>" for n in result["notes"]) + "</ul>")
    parts.append("</main></body></html>")
    return "\n".join(parts)


@click.command("selection")
@model_option(required=True, help="the model to place in the paper's table: openai:<model> (--base-url), or "
                                  "chooser:RULE offline")
@base_url_option
@click.option("--backbone", type=click.Choice(BACKBONE_NAMES),
              help="the paper's per-backbone settings (PROTOCOL.md 1.6) [default: inferred from --model, printed]")
@click.option("--sample", type=int, help="only the first N queries of each cluster (intervals widen accordingly)")
@click.option("--benchmark", help=f"biasbusters:DIR, the authors' clusters [default: biasbusters:${DATA_ENV}, else "
                                  f"biasbusters:{DEFAULT_DATA}]; builtin or FILE.json run another benchmark")
@click.option("--runs", type=int, help="repetitions of the benchmark [default: 3, the paper's]")
@click.option("--temperatures", help="also run these temperatures (comma list): the paper's temperature rows")
@click.option("--prompts", help="also run these system prompts (comma list of similar, adj, file:PATH): the "
                                "paper's prompt rows")
@click.option("--perturbations", help="also run these perturbations (comma list, or all): the authors' files "
                                      "replayed, the paper's perturbation rows")
@store_option("toolbias.db", help="SQLite results file (re-running resumes)")
@concurrency_option
@click.option("--cache", help="response cache file (SQLite); off by default")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
@click.option("--html", "html_path", help="also write the tables as an HTML page")
def selection_cmd(model: str, base_url: tuple[str, ...], backbone: str | None, sample: int | None,
                  benchmark: str | None, runs: int | None, temperatures: str | None, prompts: str | None,
                  perturbations: str | None, store: str, concurrency: int, cache: str | None, as_json: bool,
                  html_path: str | None) -> None:
    """Run the paper's tool-selection protocol on your model and print the paper's main table with your
    row among its seven models (δ_API, δ_pos, δ_model; 95% intervals for your row), plus the temperature,
    prompt and perturbation rows you asked for. Re-running the same command resumes."""
    from ..selection import study
    from ..selection.reproduce import reproduce_selection
    from ..selection.store import SelectionStore
    from .display import trials_progress
    from .outputs import lasting_store, output_file
    from .select import _bench, _console, _provider, _settings

    lasting_store(store, command="reproduce selection")
    if html_path:
        output_file(html_path, option="--html", inputs=[store])
    if sample is not None and sample < 1:
        raise ToolbiasError(f"--sample must be at least 1, got {sample}")
    bench = _bench(_benchmark_spec(benchmark), sample, None)
    settings = _settings({"paper": True, "backbone": backbone, "runs": runs}, model)
    provider = _provider(model, base_url, concurrency, cache, settings)
    conditions = study.expand_conditions(perturbations) if perturbations else []
    with SelectionStore(store) as st:
        result = reproduce_selection(
            provider, bench, settings, store=st, queries_per_cluster=sample,
            temperatures=_floats(temperatures), prompts=_names(prompts), perturbations=conditions,
            concurrency=concurrency, progress=lambda label, total: trials_progress(_console(), total, label),
            on_note=lambda n: _console().print(f"note: {n}", highlight=False, markup=False)).to_dict()
    if html_path:
        Path(html_path).write_text(html_page(result), encoding="utf-8")
        _console().print(f"wrote {html_path}", highlight=False)
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    for t in text_tables(result):
        Console().print(t)
