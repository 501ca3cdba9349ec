"""CLI: ``toolbias select ...``, tool-selection bias. Parses options, calls :mod:`toolbias.selection`, prints."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from ..errors import ToolbiasError
from ..providers import ModelAPI
from ..report import selection as figs
from ..selection import study
from ..selection.backbones import BACKBONE_NAMES
from ..selection.benchmark import Benchmark, load_benchmark
from ..selection.metrics import BiasReport, agreement, bias_report, read_records
from ..selection.mitigate import FILTER_STYLES, ON_EMPTY, PICKS, aevaluate_filter, builtin_filter_set
from ..selection.perturb import CONDITIONS
from ..selection.present import PRESENTATIONS
from ..selection.records import GroupKey
from ..selection.results import one_group, store_reports
from ..selection.runner import RunSummary, report_of
from ..selection.selector import make_selection_model
from ..selection.settings import PAPER, TOOL_CHOICES, RunSettings
from ..selection.store import SelectionStore
from .display import trials_progress
from .options import base_url_option, concurrency_option, model_option, store_option

DEFAULT_STORE = "toolbias.db"  # the study file shared with schema episodes (separate tables)
#: kept so tests (and users) can swap how model specs are resolved
make_provider = make_selection_model


def _console() -> Console:
    return Console(stderr=True)


def _provider(spec: str, base_url: Sequence[str], concurrency: int, cache: str | None,
              settings: RunSettings | None = None) -> ModelAPI:
    options: dict[str, Any] = {"base_urls": list(base_url)} if base_url else {}
    model = make_provider(spec, **options)
    if settings is not None and settings.backbone is not None:
        from ..selection.backbones import for_backbone

        model, note = for_backbone(model, settings.backbone)
        if note:
            _console().print(note, highlight=False, markup=False)
    if spec.startswith("chooser:"):
        return model
    from ..providers.wrapper import ResponseCache, wrap

    return wrap(model, concurrency=concurrency, cache=ResponseCache(cache) if cache else None)


def _bench(spec: str, queries: int | None, clusters: str | None) -> Benchmark:
    ids = [c.strip() for c in clusters.split(",")] if clusters else None
    return study.subset(load_benchmark(spec), queries=queries, clusters=ids)


def _floats(text: str | None, what: str) -> list[float]:
    if not text:
        return []
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ToolbiasError(f"{what} must be a comma list of numbers, got '{text}'") from None


def _fmt(x: Any) -> str:
    if x is None:
        return "n/a"
    return "n/a" if isinstance(x, float) and math.isnan(x) else f"{x:.3f}"


def _pct(rates: Sequence[float]) -> str:
    return " ".join(f"{100 * x:.0f}" for x in rates)


def report_table(report: BiasReport, title: str = "") -> Table:
    caption = (f"{report.n_runs} run(s), {report.n_selections} selections; {report.n_unparsed} unparsed "
               f"({100 * report.unparsed_rate:.1f}%) excluded. A fair selector would show δ ≈ "
               f"{report.noise_floor:.3f} at these counts. Selection rates in %: by tool (canonical order), "
               "by list position.")
    table = Table(title=title or "selection bias (TV distance from uniform)", caption=caption)
    table.add_column("cluster", no_wrap=True, min_width=8)
    for col in ("n", "δ api", "δ pos", "δ model"):
        table.add_column(col, justify="right", no_wrap=True)
    table.add_column("% by tool")
    table.add_column("% by position")
    for c, v in report.per_cluster.items():
        table.add_row(c, str(v["n"]), _fmt(v["delta_api"]), _fmt(v["delta_pos"]), _fmt(v["delta_model"]),
                      _pct(v["api_rates"]), _pct(v["pos_rates"]))
    table.add_section()
    table.add_row("mean", str(report.n_selections), _fmt(report.delta_api), _fmt(report.delta_pos),
                  _fmt(report.delta_model), "", "", style="bold")
    table.add_row("std (runs)", "", _fmt(report.std["delta_api"]), _fmt(report.std["delta_pos"]),
                  _fmt(report.std["delta_model"]), "", "")
    ivs = report.extra.get("intervals")
    if ivs:
        table.add_row("95% CI (queries)", "", *(_span(ivs.get(m)) for m in ("delta_api", "delta_pos", "delta_model")),
                      "", "")
    return table


def _span(iv: dict[str, Any] | None) -> str:
    """``[low, high]`` of a JSON interval (``n/a`` when absent)."""
    if not iv or iv.get("low") is None or iv.get("high") is None:
        return "n/a"
    return f"[{iv['low']:.3f}, {iv['high']:.3f}]"


def _emit(report: BiasReport, as_json: bool, title: str = "") -> None:
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
    else:
        Console().print(report_table(report, title))


def _summary_line(summary: RunSummary) -> str:
    return (f"{summary.planned} trials: {summary.skipped} already stored, {summary.ok} parsed, "
            f"{summary.unparsed} unparsed, {summary.errors} infrastructure errors ({summary.seconds:.1f}s)")


def _setting_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Presentation, prompt and sampling options; unset ones take the default or the --paper preset."""
    p = PAPER
    options = [
        click.option("--paper", is_flag=True,
                     help=f"the paper's settings: presentation {p.presentation}, prompt {p.prompt}, no tool_choice, "
                          f"temperature {p.temperature}, top-p {p.top_p}, {p.max_tokens} tokens, no seed, "
                          f"{p.runs} runs (options given explicitly still apply)"),
        click.option("--presentation", type=click.Choice(PRESENTATIONS),
                     help="tools (default): each API is a function; text: a numbered list; toolbench: the paper's "
                          "text prompt; toolbench-functions: the paper's function-calling mode"),
        click.option("--system-prompt", "prompt",
                     help="toolbias (default for tools/text), base (default for toolbench), similar, adj, "
                          "or file:PATH"),
        click.option("--tool-choice", type=click.Choice([*TOOL_CHOICES, "unset"]),
                     help="tool_choice of the tools presentation [default: required; unset: not sent]"),
        click.option("--temperature", type=float, help="[default: 0.5]"),
        click.option("--top-p", type=float, help="[default: 1.0]"),
        click.option("--max-tokens", type=int, help="[default: 256; --paper: 512]"),
        click.option("--seed", type=int, help="run r samples with seed+r; -1: send no seed [default: 0]; also "
                                              "seeds perturbations and uniform draws"),
        click.option("--runs", type=int, help="repetitions of the full benchmark [default: 1; --paper: 3]"),
        click.option("--backbone", type=click.Choice(BACKBONE_NAMES),
                     help="with --paper: the paper's per-backbone settings (PROTOCOL.md 1.6) [default: inferred "
                          "from the model spec, printed]"),
        click.option("--stop", multiple=True, help="stop sequence (repeat; 'none': no stop) [default: the backbone's]"),
        click.option("--reask", type=int, help="calls per trial until a function call [default: the backbone's]"),
        click.option("--thinking", type=click.Choice(["on", "off", "unset"]),
                     help="chat_template_kwargs.enable_thinking [default: the backbone's; qwen: off]"),
        click.option("--functions-param", type=click.Choice(["auto", "functions", "tools"]),
                     help="function backbone: legacy functions or tools [default: auto: functions on api.openai.com]"),
    ]
    for opt in reversed(options):
        f = opt(f)
    return f


def _settings(options: dict[str, Any], model: str | None = None) -> RunSettings:
    """The run settings; under --paper a backbone's (:mod:`toolbias.selection.backbones`), printed."""
    from ..selection import backbones

    keys = ("presentation", "prompt", "tool_choice", "temperature", "top_p", "max_tokens", "seed", "runs")
    wire = {k: options.pop(k, None) for k in ("backbone", "stop", "reask", "thinking", "functions_param")}
    paper = bool(options.pop("paper", False))
    given = {k: options.pop(k, None) for k in keys}
    if not paper:
        if any(v for v in wire.values()):
            raise ToolbiasError("--backbone, --stop, --reask, --thinking and --functions-param apply to the paper's "
                                "protocol", fix="add --paper")
        return RunSettings.resolve(**given)
    settings, why = backbones.resolve_paper(model, backbone=wire["backbone"], stop=wire["stop"],
                                           reask=wire["reask"], thinking=wire["thinking"],
                                           functions_param=wire["functions_param"], **given)
    _console().print(f"backbone: {settings.backbone_label} ({why})", highlight=False, markup=False)
    return settings


def _model_options(f: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        base_url_option,
        click.option("--benchmark", default="builtin", show_default=True,
                     help="builtin, biasbusters:DIR, or a benchmark JSON file"),
        click.option("--queries", type=int, help="only the first N queries of each cluster"),
        click.option("--clusters", help="only these cluster ids (comma-separated)"),
        store_option(DEFAULT_STORE, help="SQLite results file"),
        concurrency_option,
        click.option("--cache", help="response cache file (SQLite); off by default"),
        click.option("--json", "as_json", is_flag=True, help="print JSON"),
    ]
    for opt in reversed(options):
        f = opt(f)
    return _setting_options(f)


def _group_options(f: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option("--model", help="only this model"),
        click.option("--benchmark", help="only this benchmark name"),
        click.option("--condition", help="only this condition"),
        click.option("--presentation", help="only this presentation"),
        click.option("--prompt", help="only this system prompt name"),
        click.option("--temperature", type=float, help="only this temperature"),
        click.option("--top-p", type=float, help="only this top-p"),
        click.option("--tool-choice", help="only this tool_choice (none: not sent)"),
    ]
    for opt in reversed(options):
        f = opt(f)
    return f


def _groups(store: str, rule: str = "exact", **filters: Any) -> dict[GroupKey, BiasReport]:
    if filters.get("tool_choice") == "none":
        filters["tool_choice"] = "none"
    return store_reports(store, rule=rule, **filters)


@click.group("select")
def select() -> None:
    """Tool-selection bias among functionally equivalent tools (BiasBusters)."""


@select.command("benchmark")
@click.option("--benchmark", default="builtin", show_default=True,
              help="builtin, biasbusters:DIR, or a benchmark JSON file")
@click.option("--export", "export_path", help="write the benchmark as JSON (the built-in format)")
@click.option("--json", "as_json", is_flag=True)
def benchmark_cmd(benchmark: str, export_path: str | None, as_json: bool) -> None:
    """Show a selection benchmark's clusters (or export it)."""
    bench = load_benchmark(benchmark)
    if export_path:
        Path(export_path).write_text(json.dumps(bench.to_dict(), indent=1, ensure_ascii=False) + "\n",
                                     encoding="utf-8")
        click.echo(f"wrote {len(bench)} clusters to {export_path}")
        return
    if as_json:
        click.echo(json.dumps([{"id": c.id, "name": c.name, "k": c.k, "queries": len(c.queries),
                                "tools": list(c.names)} for c in bench], indent=2))
        return
    table = Table(title=f"benchmark {bench.name}: {len(bench)} clusters")
    for col in ("cluster", "k", "queries", "tools (canonical order)"):
        table.add_column(col)
    for c in bench:
        table.add_row(c.id, str(c.k), str(len(c.queries)), ", ".join(c.names))
    Console().print(table)

@select.command("prompt")
@click.option("--benchmark", default="builtin", show_default=True)
@click.option("--cluster", required=True, help="cluster id")
@click.option("--query", "query_index", type=int, default=0, show_default=True, help="query index (0-based)")
@click.option("--rotation", type=int, default=0, show_default=True, help="cyclic rotation r: API r+1 first")
@click.option("--json", "as_json", is_flag=True, help="the whole request (messages, tools, tool_choice)")
@_setting_options
def prompt_cmd(benchmark: str, cluster: str, query_index: int, rotation: int, as_json: bool,
               **options: Any) -> None:
    """Print the exact prompt of one trial (toolbench: the text the paper's text-mode models received)."""
    req = study.trial_request(load_benchmark(benchmark), cluster, query_index, rotation, _settings(options))
    if as_json:
        click.echo(json.dumps({"messages": req.messages, "tools": req.tools, "tool_choice": req.tool_choice,
                               "shown": list(req.shown)}, indent=2, ensure_ascii=False))
        return
    for m in req.messages:
        if m["role"] == "system" and not m["content"]:
            continue
        if len(req.messages) > 1 and not (req.messages[0]["role"] == "system" and not req.messages[0]["content"]):
            sys.stdout.write(f"--- {m['role']} ---\n")
        sys.stdout.write(str(m["content"]))
    if req.tools:
        sys.stdout.write("\n--- tools ---\n" + json.dumps(req.tools, indent=2, ensure_ascii=False) + "\n")

@select.command("run")
@model_option(required=True,
              help="openai:<model>, local, ..., or chooser:RULE (offline: first, last, position=N, "
                   "contains=TEXT, random=SEED)")
@click.option("--condition", default="base", show_default=True,
              help=f"base, a perturbation ({', '.join(CONDITIONS)}), names:FILE or desc_swap:FILE")
@click.option("--temperatures", help="sweep: comma list of temperatures (one result group each)")
@click.option("--top-ps", help="sweep: comma list of top-p values (one result group each)")
@click.option("--k", "ks", help="sweep: comma list of K; each cluster cut to K tools (benchmark <name>[k=K,...])")
@click.option("--k-order", type=click.Choice(study.K_ORDERS), default="b2w", show_default=True,
              help="which K tools: best-to-worst or worst-to-best by the base run's rates, or random (seeded)")
@click.option("--k-rank", help="the base run ranking the K tools: own, paper (the authors' Qwen3-235B cluster-7 "
                               "ranking), model:SPEC or file:PATH [default: own; --paper: paper, cluster 7 only]")
@click.option("--order", type=click.Choice(["cyclic", "random"]), default="cyclic", show_default=True,
              help="cyclic rotations, or as many independent seeded shuffles per query")
@_model_options
def run_cmd(model: str, condition: str, temperatures: str | None, top_ps: str | None, ks: str | None,
            k_order: str, k_rank: str | None, order: str, base_url: tuple[str, ...], benchmark: str,
            queries: int | None, clusters: str | None, store: str, concurrency: int, cache: str | None,
            as_json: bool, **options: Any) -> None:
    """Run a model on every query in every cyclic rotation; store and report the selections.

    Lists of temperatures, top-p values and K run one result group each. Re-running the same command
    resumes: stored answers are kept, infrastructure errors retried.
    """
    from .outputs import lasting_store

    lasting_store(store, command="select run")
    bench = _bench(benchmark, queries, clusters)
    settings = _settings(options, model)
    provider = _provider(model, base_url, concurrency, cache, settings)

    def group_done(group: study.SweepGroup) -> None:
        _console().print(_summary_line(group.summary), highlight=False)
        if group.summary.errors:
            _console().print(f"[yellow]{group.summary.errors} trials hit infrastructure errors; re-run the "
                             "same command to retry them[/]")

    with SelectionStore(store) as st:
        groups = study.run_sweep(
            provider, bench, settings, store=st, condition=condition,
            temperatures=_floats(temperatures, "--temperatures"), top_ps=_floats(top_ps, "--top-ps"),
            ks=[int(k) for k in _floats(ks, "--k")], k_order=k_order, order=order, concurrency=concurrency,
            progress=lambda label, total: trials_progress(_console(), total, label), on_group=group_done,
            k_rank=k_rank, on_note=lambda note: _console().print(note, highlight=False, markup=False))
    results = [(g.settings, g.records, g.summary) for g in groups]
    reports = {}
    for _setting, records, summary in results:
        if any(r.ok for r in records):
            key = records[0].group
            reports[key.label] = report_of(records, label=key.label)
        elif as_json and len(results) == 1:
            click.echo(json.dumps({"error": "no parsed selections", "summary": summary.to_dict()}))
            return
    sweep_rows = _k_rows(reports) if ks else []
    if len(reports) == 1 and as_json and sweep_rows:
        click.echo(json.dumps({**next(iter(reports.values())).to_dict(), "k_sweep": sweep_rows}, indent=2))
    elif len(reports) == 1 and not sweep_rows:
        label, rep = next(iter(reports.items()))
        _emit(rep, as_json, title=label)
    elif as_json:
        out: dict[str, Any] = {"groups": {k: v.to_dict() for k, v in reports.items()}}
        if sweep_rows:
            out["k_sweep"] = sweep_rows
        click.echo(json.dumps(out, indent=2))
    else:
        for label, rep in reports.items():
            Console().print(report_table(rep, label))
        for row in sweep_rows:
            click.echo(f"K={row['k']} {row['order']}: δapi {row['delta_api']:.3f} (÷{row['max']:.3f}: "
                       f"{100 * row['delta_api_norm']:.1f}% ± {100 * row['delta_api_norm_std']:.1f}), δpos "
                       f"{row['delta_pos']:.3f} ({100 * row['delta_pos_norm']:.1f}% ± "
                       f"{100 * row['delta_pos_norm_std']:.1f})")


def _k_rows(reports: dict[str, BiasReport]) -> list[dict[str, Any]]:
    """The K sweep's rows: δ raw and normalised by 1 - 1/K (:func:`toolbias.selection.ksweep.k_sweep_rows`)."""
    from ..selection.ksweep import k_sweep_rows

    return k_sweep_rows(reports)

@select.command("metrics")
@click.argument("records", required=False)
@click.option("--store", help="read a store instead of a records file")
@_group_options
@click.option("--parse", "rule", type=click.Choice(["exact", "paper"]), default="exact", show_default=True,
              help="exact: whole names; paper: the paper's substring reading of the same answers")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def metrics_cmd(records: str | None, store: str | None, rule: str, as_json: bool, **filters: Any) -> None:
    """Bias metrics of a records file (JSONL) or of a store, one report per result group.

    Each JSONL line: {"run", "cluster", "query", "api", "position", "k"} (api: 0-based index of the chosen
    tool in the cluster's canonical order; position: 0-based index in the presented list; api null =
    unparsed). A store's records form groups (model, benchmark, presentation, prompt, condition,
    temperature, top-p, tool_choice) that are never pooled: one report per group (--json:
    {"groups": {label: report}}) unless the filters leave one.
    """
    if bool(records) == bool(store):
        raise ToolbiasError("give either a records file or --store", fix="toolbias select metrics FILE.jsonl")
    if records:
        from ..selection.intervals import with_intervals

        sels, unparsed = read_records(records)
        _emit(with_intervals(bias_report(sels, n_unparsed=unparsed, label=Path(records).name), sels), as_json)
        return
    assert store is not None
    reports = _groups(store, rule, **filters)
    if len(reports) == 1:
        key, rep = next(iter(reports.items()))
        _emit(rep, as_json, title=key.label)
    elif as_json:
        click.echo(json.dumps({"groups": {k.label: v.to_dict() for k, v in reports.items()}}, indent=2))
    else:
        for key, rep in reports.items():
            Console().print(report_table(rep, key.label))

@select.command("export")
@store_option(DEFAULT_STORE)
@click.option("-o", "--output", required=True, help="JSONL file of documented records")
@click.option("--model")
@click.option("--benchmark")
@click.option("--condition")
@click.option("--presentation")
@click.option("--full", is_flag=True, help="full records (query, order, settings, model output) instead of "
                                           "the metrics format")
def export_cmd(store: str, output: str, model: str | None, benchmark: str | None, condition: str | None,
               presentation: str | None, full: bool) -> None:
    """Export stored selections as JSON Lines (the `select metrics` record format)."""
    from .outputs import output_file

    output_file(output, option="--output", inputs=[store])
    with SelectionStore(store) as st:
        recs = [r for r in st.records(model=model, benchmark=benchmark, condition=condition,
                                      presentation=presentation) if r.status.value != "error"]
    groups = {r.group for r in recs}
    if len(groups) > 1 and not full:
        raise ToolbiasError(f"the records form {len(groups)} result groups; the metrics format cannot tell them "
                            "apart", fix="narrow with --model/--condition/--presentation, or export --full")
    with open(output, "w", encoding="utf-8") as f:
        for r in recs:
            f.write(json.dumps(r.to_dict() if full else r.to_metrics_dict(), ensure_ascii=False) + "\n")
    click.echo(f"wrote {len(recs)} records to {output}")

@select.command("agreement")
@click.argument("records", nargs=-1)
@click.option("--store", help="compare the models of a store")
@_group_options
@click.option("--json", "as_json", is_flag=True)
def agreement_cmd(records: tuple[str, ...], store: str | None, as_json: bool, **filters: Any) -> None:
    """Cross-model agreement: correlation of per-tool selection rates (records files or a store).

    Only groups that differ in the model alone are compared."""
    rates: dict[str, dict[str, Any]] = {}
    for path in records:
        sels, unparsed = read_records(path)
        rates[Path(path).stem] = dict(bias_report(sels, n_unparsed=unparsed).api_rates())
    if store:
        filters["condition"] = filters.get("condition") or "base"
        reports = _groups(store, **filters)
        settings = {k.label.split(" | ", 1)[1] for k in reports}
        if len(settings) > 1:
            raise ToolbiasError(f"the store's groups differ in more than the model: {sorted(settings)}",
                                fix="narrow with --benchmark, --presentation, --prompt, --temperature, "
                                    "--top-p or --tool-choice")
        for key, rep in reports.items():
            rates[key.model] = dict(rep.api_rates())
    result = agreement(rates)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
        return
    from ..selection.intervals import interval_dict

    table = Table(title=f"cross-model agreement over {result.n_tools} tools",
                  caption="95% intervals: Fisher z over the tools (Spearman: Fieller's standard error)")
    for col in ("models", "Pearson", "95% CI", "Spearman", "95% CI"):
        table.add_column(col)
    p_ci, s_ci = result.intervals("pearson"), result.intervals("spearman")
    for (a, b), v in result.pearson.items():
        table.add_row(f"{a} | {b}", _fmt(v), _span(interval_dict(p_ci[(a, b)])), _fmt(result.spearman[(a, b)]),
                      _span(interval_dict(s_ci[(a, b)])))
    table.add_section()
    table.add_row("mean", _fmt(result.mean_pearson), "", _fmt(result.mean_spearman), "")
    Console().print(table)

@select.command("explain")
@click.argument("records", required=False)
@click.option("--store", help="take the selection rates from a store's base runs")
@click.option("--table", "table_path", help="the paper's regression on a shared features table with selection "
                                            "rates (final_features_subtract_mean.json or final_features.json)")
@click.option("--model", help="the model whose rates to explain (store; default: the only one)")
@click.option("--benchmark", default="builtin", show_default=True,
              help="the benchmark the records were run on (its metadata gives the features)")
@click.option("--presentation", help="only this presentation (store)")
@click.option("--features", "feature_set", type=click.Choice(["paper", "toolbias"]), default="paper",
              show_default=True, help="paper: the paper's seven features, centring and models; toolbias: this "
                                      "project's features (promotional words, exposure, standardised models)")
@click.option("--similarity", type=click.Choice(["minilm", "tfidf"]),
              help="minilm: all-MiniLM-L6-v2 embeddings (the explain extra, see README); tfidf: lexical "
                   "[default: minilm when its weights are installed, else tfidf, said so]")
@click.option("--trees", type=int, default=100, show_default=True, help="random forest size (toolbias features)")
@click.option("--permutations", type=int, default=1000, show_default=True,
              help="paper features: shuffles of the rates within clusters for the chance baseline")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@click.option("--html", "html_path", help="paper features: also write the fits as an HTML page (fits no better "
                                          "than chance flagged)")
def explain_cmd(records: str | None, store: str | None, table_path: str | None, model: str | None, benchmark: str,
                presentation: str | None, feature_set: str, similarity: str | None, trees: int, permutations: int,
                seed: int, as_json: bool, html_path: str | None) -> None:
    """Explain selection rates by tool features (linear regression and random forest)."""
    from ..selection import paper_features as pf
    from ..selection.features import explain

    if sum(bool(x) for x in (records, store, table_path)) != 1:
        raise ToolbiasError("give one of: a records file, --store or --table")
    if html_path:
        from .outputs import output_file

        if feature_set != "paper":
            raise ToolbiasError("--html writes the paper features' fits", fix="leave --features toolbias out")
        output_file(html_path, option="--html", inputs=[records, store, table_path])
    if table_path:
        results = pf.explain_table(table_path, permutations=permutations, seed=seed)
        _write_explain_html(results, html_path)
        _print_paper_explanations(results, as_json)
        return
    similarity, note = pf.resolve_similarity(similarity)
    if note:
        _console().print(note, highlight=False, markup=False)
    bench = load_benchmark(benchmark)
    if records:
        sels, unparsed = read_records(records)
        rep = bias_report(sels, n_unparsed=unparsed)
        who = Path(records).stem
    else:
        assert store is not None
        key, rep = one_group(_groups(store, model=model, benchmark=bench.name, condition="base",
                                     presentation=presentation), "explain")
        who = key.model
    if feature_set == "paper":
        result, _ = pf.explain_paper(bench, rep.api_rates(), similarity=similarity, model=who,
                                     permutations=permutations, seed=seed)
        _write_explain_html({who: result}, html_path)
        _print_paper_explanations({who: result}, as_json)
        return
    old = explain(bench, rep.api_rates(), similarity=similarity, seed=seed, n_estimators=trees)
    if as_json:
        click.echo(json.dumps(old.to_dict(), indent=2, default=str))
        return
    table = Table(title=f"features of {old.n_tools} tools (cluster-mean centred, similarity: {similarity})")
    for col in ("feature", "Pearson r", "p", "linear coef (std.)", "RF permutation importance"):
        table.add_column(col)
    for f in old.features:
        c = old.correlations[f]
        imp = old.permutation_importance[f]
        table.add_row(f, _fmt(c["r"]), _fmt(c["p"]), _fmt(old.linear_coefficients[f]),
                      f"{_fmt(imp['mean'])} ± {_fmt(imp['std'])}")
    Console().print(table)
    click.echo(f"linear regression R² = {_fmt(old.linear_r2)}; random forest CV R² = "
               f"{_fmt(old.forest_cv_r2)} ± {_fmt(old.forest_cv_r2_std)}")
    if old.absent:
        click.echo(f"absent (no variation or no metadata): {', '.join(old.absent)}")

def _write_explain_html(results: dict[str, Any], path: str | None) -> None:
    """The fits as a self-contained HTML page (each fit no better than chance flagged)."""
    if not path:
        return
    import html as _html

    from ..report.html import CSP, CSS
    from ..report.selection import explanation_sections

    page = ("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            f"<title>toolbias select explain - {_html.escape(', '.join(results))}</title><style>{CSS}</style>"
            "</head><body><main>" + "".join(explanation_sections(results)) + "</main></body></html>")
    Path(path).write_text(page, encoding="utf-8")
    _console().print(f"wrote {path}", highlight=False)


def _print_paper_explanations(results: dict[str, Any], as_json: bool) -> None:
    if as_json:
        out = {m: r.to_dict() for m, r in results.items()}
        click.echo(json.dumps(out if len(out) > 1 else next(iter(out.values())), indent=2))
        return
    for m, r in results.items():
        st = r.statistics
        table = Table(title=f"{m}: OLS on cluster-centred features (n={r.n}, R² = {_fmt(r.r2)})")
        table.add_column("feature", no_wrap=True)
        for col in ("coef (raw)", "95% CI", "p (Holm)", "coef (std.)", "Pearson r", "r: p (Holm)",
                    "RF perm. importance"):
            table.add_column(col, justify="right")
        perm = r.forest.get("permutation_importance", {})
        for f in r.features:
            c = (st.get("coefficients") or {}).get(f, {})
            rc = (st.get("correlations") or {}).get(f, {})
            ci = c.get("ci95")
            table.add_row(f, f"{r.coefficients[f]:+.3g}", f"[{ci[0]:+.3g}, {ci[1]:+.3g}]" if ci else "",
                          f"{_fmt(c.get('p'))} ({_fmt(c.get('p_holm'))})" if c else "", _fmt(r.standardized[f]),
                          _fmt(r.correlations.get(f, {}).get("pearson")),
                          f"{_fmt(rc.get('p'))} ({_fmt(rc.get('p_holm'))})" if rc else "",
                          _fmt(perm[f]["mean"]) if f in perm else "(left out)")
        Console().print(table)
        if "cv_r2" in r.forest:
            click.echo(f"random forest (200 trees, depth 5): 5-fold CV R² = {_fmt(r.forest['cv_r2'])}")
        if st:
            perm_b = st["permutation"]
            click.echo(f"adjusted R² {_fmt(st['adjusted_r2'])}; 5-fold CV R²: linear {_fmt(st['linear_cv_r2'])}, "
                       f"forest {_fmt(st['forest_cv_r2'])}; rates shuffled within clusters "
                       f"({perm_b['permutations']}x): R² mean {_fmt(perm_b['mean_r2'])}, 95th percentile "
                       f"{_fmt(perm_b['p95_r2'])}, p = {_fmt(perm_b['p_value'])}")
            click.echo(("FLAG: this fit is " if st["chance"] else "") + st["verdict"])
    fam = next(iter(results.values())).statistics.get("correlation_family") if results else None
    if fam:
        click.echo(f"{fam['tests']} feature correlations across the models: {fam['p_below_0.05']} with p < .05 "
                   f"uncorrected, {fam['holm_below_0.05']} after Holm, {fam['bh_below_0.05']} after BH")

@select.command("perturb")
@model_option(required=True)
@click.option("--conditions", default="all", show_default=True,
              help=f"all and/or a comma list of: {', '.join(CONDITIONS)}, names:FILE, desc_swap:FILE")
@click.option("--figure", "figure_path", help="write the perturbation figure (.png or .svg)")
@_model_options
def perturb_cmd(model: str, conditions: str, figure_path: str | None, base_url: tuple[str, ...], benchmark: str,
                queries: int | None, clusters: str | None, store: str, concurrency: int, cache: str | None,
                as_json: bool, **options: Any) -> None:
    """Run the base condition and metadata perturbations; report TV to base and to uniform."""
    bench = _bench(benchmark, queries, clusters)
    settings = _settings(options, model)
    provider = _provider(model, base_url, concurrency, cache, settings)
    names = study.expand_conditions(conditions)
    with SelectionStore(store) as st:
        result = study.in_session([provider], lambda: study.aperturb(provider, bench, settings, names, store=st,
                                                                     concurrency=concurrency))
    for cond, summary in result.summaries.items():
        _console().print(f"{cond}: {_summary_line(summary)}", highlight=False)
    if figure_path:
        figs.save(figs.perturbation_figure(result.effects, result.base), figure_path)
    if as_json:
        click.echo(json.dumps({"base": result.base.to_dict(), "conditions": [e.to_dict() for e in result.effects]},
                              indent=2))
        return
    table = Table(title=f"metadata perturbations ({provider.spec}, base δ api {result.base.delta_api:.3f})")
    table.add_column("condition", no_wrap=True)
    for col in ("TV to base ± sd (clusters)", "sd over runs", "TV to uniform", "δ pos", "selections", "unparsed"):
        table.add_column(col, justify="right")
    for e in result.effects:
        table.add_row(f"{e.condition} ({e.label})" if e.label != e.condition else e.condition,
                      f"{_fmt(e.tv_to_base)} ± {_fmt(e.tv_to_base_std)}", _fmt(e.tv_to_base_run_std),
                      _fmt(e.tv_to_uniform), _fmt(e.delta_pos), str(e.n_selections), str(e.n_unparsed))
    Console().print(table)

@select.command("mitigate")
@click.option("--filter-model", required=True, help="the model that filters the able candidates")
@click.option("--model", help="the selecting model for 'before' [default: the filter model]")
@click.option("--filter-prompt", "filter_style", type=click.Choice(FILTER_STYLES),
              help="toolbias: numbered list, JSON answer; paper: the paper's prompt and candidates "
                   "[default: toolbias; --paper: paper]")
@click.option("--on-empty", type=click.Choice(ON_EMPTY), default="paper", show_default=True,
              help="when the filter keeps nothing: paper: the selecting model chooses among all candidates; "
                   "uniform: a seeded draw over all; drop: unparsed (still counted in coverage)")
@click.option("--pick", type=click.Choice(PICKS), default="model", show_default=True,
              help="model: end to end, the selecting model sees only the drawn function (plus Finish) and its "
                   "answer is the selection; draw: the uniform draw itself is recorded")
@click.option("--filter-backbone", type=click.Choice(BACKBONE_NAMES),
              help="with --paper: the filter's backbone settings [default: inferred from --filter-model; the "
                   "authors' filter was Qwen3-14B: temperature 0.5, 512 tokens, stop End Action, no thinking]")
@_model_options
def mitigate_cmd(filter_model: str, model: str | None, filter_style: str | None, on_empty: str, pick: str,
                 filter_backbone: str | None, base_url: tuple[str, ...], benchmark: str, queries: int | None,
                 clusters: str | None, store: str, concurrency: int, cache: str | None, as_json: bool,
                 **options: Any) -> None:
    """Filter-then-uniform-sampling: selection bias before (the model picks) and after (filter, uniform
    draw, and, end to end, the model's answer when shown only the drawn function)."""
    from ..selection.backbones import get_backbone, paper_settings

    paper = bool(options.get("paper"))
    style = filter_style or ("paper" if paper else "toolbias")
    bench = _bench(benchmark, queries, clusters)
    settings = _settings(options, model or filter_model)
    filter_settings = None
    if paper:
        fbb, why = get_backbone(filter_backbone, filter_model)
        filter_settings = paper_settings(fbb, runs=settings.runs)
        _console().print(f"filter backbone: {filter_settings.backbone_label} ({why})", highlight=False,
                         markup=False)
    elif filter_backbone:
        raise ToolbiasError("--filter-backbone applies to the paper's protocol", fix="add --paper")
    filt = _provider(filter_model, base_url, concurrency, cache, filter_settings)
    chooser = filt if (not model or model == filter_model) and settings.backbone is None else \
        _provider(model or filter_model, base_url, concurrency, cache, settings)
    with SelectionStore(store) as st:
        result = study.in_session([filt] if chooser is filt else [filt, chooser], lambda: study.amitigate(
            chooser, filt, bench, settings, store=st, concurrency=concurrency, on_empty=on_empty,
            filter_style=style, seed=settings.seed or 0, filter_settings=filter_settings, pick=pick))
    _console().print(f"before: {_summary_line(result.summary)}", highlight=False)
    cov = result.coverage
    if as_json:
        click.echo(json.dumps({"before": result.before.to_dict(),
                               "after": result.after.to_dict() if result.after else None, "coverage": cov,
                               "figures": result.figures}, indent=2))
        return
    Console().print(report_table(result.before, result.before.label))
    if result.after is not None:
        Console().print(report_table(result.after, result.after.label))
    else:
        click.echo("after: no mitigated trial selected a tool")
    click.echo(f"filter coverage {100 * cov['coverage']:.1f}% of {cov['trials']} trials "
               f"({', '.join(f'{k} {v}' for k, v in cov['filter'].items())}); empty answers: {on_empty}")
    Console().print(mitigation_table(result.figures))


def mitigation_table(figures: dict[str, Any]) -> Table:
    """δ before and after, coverage and the filter's scores, each with its 95% interval."""
    from ..selection.intervals import format_interval
    from ..study.stats import Interval

    def iv(d: dict[str, Any] | None) -> str:
        if not d or d.get("estimate") is None:
            return "n/a"
        nan = float("nan")
        return format_interval(Interval(d["estimate"], nan if d["low"] is None else d["low"],
                                        nan if d["high"] is None else d["high"], d["n"]))

    table = Table(title="mitigation end to end (95% intervals: δ bootstrap over queries, shares Wilson, "
                        "filter bootstrap over trials)")
    table.add_column("figure")
    table.add_column("before")
    table.add_column("after")
    for m, v in figures["delta"].items():
        table.add_row(m.replace("delta_", "δ "), iv(v["before"]), iv(v["after"]))
    pos = figures["positions"]
    for j in range(max(len(pos["before"]), len(pos["after"]))):
        b = pos["before"][j] if j < len(pos["before"]) else None
        a = pos["after"][j] if j < len(pos["after"]) else None
        table.add_row(f"share at position {j + 1}", iv(b), iv(a))
    table.add_section()
    names = {"filter_kept": "filter kept a candidate", "task": "task served (a tool selected)",
             "took_draw": "model took the drawn function"}
    for k, v in figures["coverage"].items():
        table.add_row(names.get(k, k), "", iv(v))
    for k, v in figures["filter"].items():
        table.add_row(f"filter {k.replace('_', ' ')} (every cluster tool able)", "", iv(v))
    return table


@select.command("filter-eval")
@click.option("--filter-model", help="the filter model to evaluate")
@click.option("--predictions", help="score stored predictions instead (the authors' subset_preds.jsonl; the "
                                    "ground truth is read beside it)")
@click.option("--filter-prompt", "filter_style", type=click.Choice(FILTER_STYLES),
              help="toolbias: numbered list, JSON answer; paper: the paper's prompt [default: toolbias; "
                   "--paper: paper]")
@click.option("--paper", is_flag=True, help="the authors' filter settings (PROTOCOL.md 5): their prompt, temperature "
                                            "0.5, top-p 1, 512 tokens, no seed, the backbone's stop and thinking "
                                            "switch (options given explicitly still apply)")
@click.option("--backbone", type=click.Choice(BACKBONE_NAMES),
              help="with --paper: the filter's backbone [default: inferred from --filter-model]")
@click.option("--temperature", type=float, help="[default: 0; --paper: 0.5]")
@click.option("--set", "eval_set", default="builtin", show_default=True,
              help="builtin (K=2..5 correct of 8) or biasbusters:FILE (api_subset_selection_ground_truth.json)")
@click.option("--benchmark", default="builtin", show_default=True, help="clusters of the built-in set")
@click.option("--per-cluster", type=int, default=20, show_default=True, help="built-in set: queries per cluster")
@click.option("--limit", type=int, help="only the first N examples")
@base_url_option
@store_option(DEFAULT_STORE)
@concurrency_option
@click.option("--max-tokens", type=int, help="[default: 256; --paper: 512]")
@click.option("--seed", type=int, default=0, show_default=True, help="sampling seed (--paper: none) and the "
                                                                      "built-in set's draw")
@click.option("--cache")
@click.option("--json", "as_json", is_flag=True)
def filter_eval_cmd(filter_model: str | None, predictions: str | None, filter_style: str | None, paper: bool,
                    backbone: str | None, temperature: float | None, eval_set: str, benchmark: str,
                    per_cluster: int, limit: int | None, base_url: tuple[str, ...], store: str, concurrency: int,
                    max_tokens: int | None, seed: int, cache: str | None, as_json: bool) -> None:
    """Filter quality: micro precision, micro recall and exact match, overall and by K."""
    from ..providers.base import GenerateConfig
    from ..selection.importers import load_biasbusters_filter_set, score_biasbusters_predictions

    if bool(filter_model) == bool(predictions):
        raise ToolbiasError("give either --filter-model or --predictions")
    if predictions:
        _print_filter_scores(score_biasbusters_predictions(predictions), Path(predictions).name, as_json)
        return
    assert filter_model is not None
    if eval_set == "builtin":
        examples = builtin_filter_set(load_benchmark(benchmark), per_cluster=per_cluster, seed=seed)
        set_name = f"builtin:{benchmark}:{per_cluster}:{seed}"
    elif eval_set.startswith("biasbusters:"):
        path = eval_set.partition(":")[2]
        examples = load_biasbusters_filter_set(path)
        set_name = f"biasbusters:{Path(path).name}"
    else:
        raise ToolbiasError(f"unknown evaluation set '{eval_set}'", fix="use builtin or biasbusters:FILE")
    examples = examples[:limit] if limit else examples
    fsettings = None
    if paper:
        from ..selection.backbones import get_backbone, paper_settings

        bb, why = get_backbone(backbone, filter_model)
        fsettings = paper_settings(bb, temperature=temperature, max_tokens=max_tokens, runs=1)
        _console().print(f"filter backbone: {fsettings.backbone_label} ({why})", highlight=False, markup=False)
        config = fsettings.config()
    elif backbone:
        raise ToolbiasError("--backbone applies to the paper's settings", fix="add --paper")
    else:
        config = GenerateConfig(temperature=0.0 if temperature is None else temperature,
                                max_tokens=max_tokens or 256, seed=seed)
    filt = _provider(filter_model, base_url, concurrency, cache, fsettings)
    style = filter_style or ("paper" if paper else "toolbias")
    with SelectionStore(store) as st:
        scores, rows = study.in_session([filt], lambda: aevaluate_filter(
            filt, examples, eval_set=set_name, config=config, concurrency=concurrency, store=st,
            filter_style=style))
    errors = sum(1 for r in rows if r["status"] == "error")
    if errors:
        _console().print(f"[yellow]{errors} examples hit infrastructure errors (not scored); re-run to retry[/]")
    _print_filter_scores(scores, f"{filt.spec} on {set_name}", as_json)

def _print_filter_scores(scores: Any, what: str, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(scores.to_dict(), indent=2))
        return
    table = Table(title=f"filter quality of {what}")
    for col in ("subset", "n", "micro precision", "micro recall", "exact match", "unparsed"):
        table.add_column(col)
    table.add_row("all", str(scores.n), _fmt(scores.micro_precision), _fmt(scores.micro_recall),
                  _fmt(scores.exact_match), str(scores.n_unparsed))
    for k, v in scores.by_k.items():
        table.add_row(f"K={k}", str(int(v["n"])), _fmt(v["micro_precision"]), _fmt(v["micro_recall"]),
                      _fmt(v["exact_match"]), str(int(v["n_unparsed"])))
    Console().print(table)

@select.command("figures")
@store_option(DEFAULT_STORE)
@click.option("-o", "--output", "out_dir", default="selection-figures", show_default=True)
@click.option("--format", "fmt", type=click.Choice(["png", "svg"]), default="png", show_default=True)
@click.option("--benchmark", help="benchmark spec, for tool names on the axes (must match the store's)")
@click.option("--html", "html_path", help="also write the HTML fragments into this file")
def figures_cmd(store: str, out_dir: str, fmt: str, benchmark: str | None, html_path: str | None) -> None:
    """Figures of every stored group: selection rates per cluster, TV per model, perturbation effects."""
    from .outputs import output_dir, output_file

    output_dir(out_dir, option="--output", inputs=[store, benchmark])
    if html_path:
        output_file(html_path, option="--html", inputs=[store, benchmark])
    reports = _groups(store)
    bench = load_benchmark(benchmark) if benchmark else None
    for path in figs.write_store_figures(reports, Path(out_dir), fmt, bench=bench,
                                         html_path=Path(html_path) if html_path else None):
        click.echo(str(path))


@select.command("paper")
@click.option("--data", default="../shared/data/biasbusters", show_default=True,
              help="folder of the BiasBusters files (selection_stats.json, tv_results_vary_k.json)")
@click.option("--figures", "fig_dir", help="also draw the paper's figures into this folder")
@click.option("--format", "fmt", type=click.Choice(["png", "svg"]), default="png", show_default=True)
@click.option("--json", "as_json", is_flag=True)
def paper_cmd(data: str, fig_dir: str | None, fmt: str, as_json: bool) -> None:
    """The paper's main table, sweeps, perturbation figure, K sweep and model agreement, recomputed from the
    authors' logged selections."""
    from ..selection import paper_stats as ps

    stats = ps.load_selection_stats(data)
    table = ps.main_table(stats)
    sweeps = {name: ps.sweep(stats, name) for name in ps.SWEEPS}
    perturbations = ps.perturbation_table(stats)
    ks = ps.k_sweep(ps.load_k_results(data))
    agree = ps.model_agreement(stats)
    if fig_dir:
        out = Path(fig_dir)
        written = [figs.save(figs.tv_by_model_figure(table, title="the paper's main table"), out / f"main_table.{fmt}")]
        for name, points in sweeps.items():
            written.append(figs.save(figs.sweep_figure(points, xlabel=ps.SWEEPS[name][0]), out / f"sweep_{name}.{fmt}"))
        for key in ("api", "pos"):
            written.append(figs.save(figs.k_sweep_figure(ks, key=key), out / f"k_sweep_{key}.{fmt}"))
        written.append(figs.save(figs.correlation_heatmap(agree), out / f"model_correlation.{fmt}"))
        for p in written:
            _console().print(str(p), highlight=False)
    if as_json:
        click.echo(json.dumps({
            "main_table": {m: {"delta_api": r.delta_api, "delta_pos": r.delta_pos, "delta_model": r.delta_model,
                               "std": dict(r.std), "n_runs": r.n_runs} for m, r in table.items()},
            "sweeps": sweeps,
            "perturbations": {label: {m: e.to_dict() for m, e in d.items()} for label, d in perturbations.items()},
            "k_sweep": {o: {str(k): v for k, v in d.items()} for o, d in ks.items()},
            "agreement": agree.to_dict()}, indent=2, default=lambda x: None))
        return
    main = Table(title="main table (mean ± population std over 3 runs)")
    for col in ("model", "δ API", "δ pos", "δ model"):
        main.add_column(col)
    for m, r in table.items():
        main.add_row(m, *(f"{getattr(r, k):.3f} ± {r.std[k]:.3f}" for k in ("delta_api", "delta_pos", "delta_model")))
    Console().print(main)
    for name, points in sweeps.items():
        click.echo(f"{name}: " + ", ".join(f"{p['x']} {p['delta_model']:.3f}" for p in points))
    pert = Table(title="perturbations: TV to base (mean ± std over clusters)")
    for col in ("perturbation", "Gemini", "GPT-4.1 mini"):
        pert.add_column(col)
    for label, d in perturbations.items():
        pert.add_row(label, *(f"{d[m].tv_to_base:.3f} ± {d[m].tv_to_base_std:.3f}" if m in d else "" for m in
                              ("Gemini", "GPT-4.1 mini")))
    Console().print(pert)
    for order, by_k in ks.items():
        click.echo(f"K sweep {order}: " + ", ".join(f"K={k} δapi {v['api']:.1f}% δpos {v['pos']:.1f}%"
                                                  for k, v in by_k.items()))
    click.echo(f"model agreement: mean Pearson r {agree.mean_pearson:.3f} over {agree.n_tools} tools")


@select.command("pretrain-corpus")
@click.option("--model", required=True, help="the text model that writes the documents (openai:<model>, ...)")
@base_url_option
@click.option("-o", "--output", required=True, help="JSON Lines file of kept documents (appended; resumes)")
@click.option("--benchmark", default="biasbusters:../shared/data/biasbusters", show_default=True)
@click.option("--cluster", help="the target tool's cluster [default: the paper's, 8]")
@click.option("--api", "api_index", type=int, help="the target tool's 0-based index [default: the paper's, 2]")
@click.option("--brand", "brands", multiple=True, help="brand strings (repeat) [default: the paper's four for "
                                                       "its target, else the tool name]")
@click.option("--documents", type=int, default=5000, show_default=True, help="stop after this many kept")
@click.option("--max-tokens-total", type=int, default=8_000_000, show_default=True,
              help="stop after this many estimated tokens (4 characters each)")
@click.option("--max-calls", type=int, help="stop after this many calls (this run included)")
@click.option("--seed", type=int, default=0, show_default=True)
@concurrency_option
@click.option("--json", "as_json", is_flag=True)
def corpus_cmd(model: str, base_url: tuple[str, ...], output: str, benchmark: str, cluster: str | None,
               api_index: int | None, brands: tuple[str, ...], documents: int, max_tokens_total: int,
               max_calls: int | None, seed: int, concurrency: int, as_json: bool) -> None:
    """The paper's biased continued pre-training corpus: documents promoting one tool (PROTOCOL.md 7).

    Training on it is a GPU step outside toolbias (see toolbias.selection.pretrain)."""
    from ..selection import pretrain

    bench = load_benchmark(benchmark)
    if cluster is None and api_index is None and not brands:
        target = pretrain.paper_target(bench)
    else:
        target = pretrain.CorpusTarget.of(bench, cluster or pretrain.PAPER_TARGET[0],
                                          pretrain.PAPER_TARGET[1] if api_index is None else api_index,
                                          brands=brands)
    provider = _provider(model, base_url, concurrency, None)
    progress = study.in_session([provider], lambda: pretrain.agenerate_corpus(
        provider, target, output, documents=documents, max_tokens=max_tokens_total, max_calls=max_calls,
        seed=seed, concurrency=concurrency))
    if as_json:
        click.echo(json.dumps(progress.to_dict()))
        return
    click.echo(f"{progress.kept} documents kept of {progress.calls} calls (~{progress.est_tokens} tokens, "
               f"{progress.errors} infrastructure errors) in {output}")


@select.command("train-cpt")
@click.option("--corpus", required=True, help="the JSONL corpus (`select pretrain-corpus` writes it)")
@click.option("--model", required=True, help="base causal LM: a Hugging Face id or a local folder")
@click.option("-o", "--output", "output_dir", required=True, help="folder for the adapter and checkpoints")
@click.option("--max-steps", type=int, help="stop after this many optimizer steps [default: one epoch]")
@click.option("--batch-size", type=int, help="per-device batch [default: 2, the authors']")
@click.option("--grad-accum", type=int, help="gradient accumulation [default: 8]")
@click.option("--lr", type=float, help="learning rate [default: 5e-5]")
@click.option("--embedding-lr", type=float, help="learning rate of embed_tokens and lm_head [default: 5e-6]")
@click.option("--rank", type=int, help="LoRA r [default: 128]")
@click.option("--max-length", type=int, help="tokens per document [default: 2048]")
@click.option("--save-steps", type=int, help="checkpoint every N steps [default: 52]")
@click.option("--bf16/--no-bf16", default=None, help="[default: bf16 where the GPU supports it]")
def train_cpt_cmd(corpus: str, model: str, output_dir: str, max_steps: int | None, batch_size: int | None,
                  grad_accum: int | None, lr: float | None, embedding_lr: float | None, rank: int | None,
                  max_length: int | None, save_steps: int | None, bf16: bool | None) -> None:
    """LoRA continued pre-training on the biased corpus with the authors' settings (PROTOCOL.md 7; needs
    toolbias[train])."""
    from ..selection import cpt

    given = {"max_steps": max_steps, "per_device_train_batch_size": batch_size,
             "gradient_accumulation_steps": grad_accum, "learning_rate": lr, "max_length": max_length,
             "save_steps": save_steps, "bf16": bf16}
    overrides = {k: v for k, v in given.items() if v is not None}
    cpt.train_cpt(corpus, model, output_dir, overrides=overrides,
                  embedding_lr=cpt.PAPER_EMBEDDING_LR if embedding_lr is None else embedding_lr,
                  lora={"r": rank} if rank else None,
                  on_note=lambda n: _console().print(n, highlight=False, markup=False))
    click.echo(f"adapter written to {output_dir}")


@select.command("eval-cpt")
@click.option("--model", "models", multiple=True, required=True,
              help="a served model to score (repeat: the base, then its adapter's name, e.g. vLLM --lora-modules)")
@base_url_option
@click.option("--benchmark", default="biasbusters:../shared/data/biasbusters", show_default=True)
@click.option("--cluster", default="8", show_default=True, help="the prompts' cluster (the authors': 8)")
@click.option("--target", "target_api", type=int, default=2, show_default=True,
              help="0-based index of the promoted API in the cluster (the authors': 2, Text Language by API-Ninjas)")
@click.option("--sample", type=int, help="only the first N queries (x their rotations)")
@click.option("--temperature", type=float, default=0.5, show_default=True)
@click.option("--max-tokens", type=int, default=512, show_default=True)
@click.option("-o", "--output", help="also write every completion (JSONL)")
@concurrency_option
@click.option("--json", "as_json", is_flag=True)
def eval_cpt_cmd(models: tuple[str, ...], base_url: tuple[str, ...], benchmark: str, cluster: str, target_api: int,
                 sample: int | None, temperature: float, max_tokens: int, output: str | None, concurrency: int,
                 as_json: bool) -> None:
    """Score a base model and its adapter on the cluster's text prompts as raw completions, read with the
    authors' parse: the target API's share with 95% Wilson intervals (PROTOCOL.md 7)."""
    from dataclasses import replace as _replace

    from ..providers.openai import OpenAIProvider
    from ..selection import cpt
    from ..selection.reproduce import paper_values
    from .outputs import output_file

    if output:
        output_file(output, option="--output")
    bench = load_benchmark(benchmark)
    prompts = cpt.cpt_prompts(bench, cluster, queries=sample)
    names = cpt.cpt_names(bench, cluster)
    if not 0 <= target_api < len(names):
        raise ToolbiasError(f"--target {target_api} outside 0..{len(names) - 1}", where=f"cluster '{cluster}'")
    config = _replace(cpt.EVAL_CONFIG, temperature=temperature, max_tokens=max_tokens)
    sink = open(output, "w", encoding="utf-8") if output else None  # noqa: SIM115

    def write(row: dict[str, Any]) -> None:
        if sink is not None:
            sink.write(json.dumps(row, ensure_ascii=False) + "\n")

    results = []
    try:
        for spec in models:
            raw = make_provider(spec, **({"base_urls": list(base_url)} if base_url else {}))
            model = cpt.completions_model(raw) if isinstance(raw, OpenAIProvider) else raw

            async def score(m: ModelAPI = model) -> Any:
                return await cpt.aevaluate_cpt(m, prompts, names, target=target_api, config=config,
                                               concurrency=concurrency, on_output=write)

            results.append(study.in_session([model], score).to_dict())
    finally:
        if sink:
            sink.close()
    paper = paper_values()["continued_pretraining"]
    if as_json:
        click.echo(json.dumps({"prompts": len(prompts), "apis": [n for n, _ in names], "models": results,
                               "paper": paper}, indent=2))
        return
    table = Table(title=f"{names[target_api][0]}'s share over recognised outputs ({len(prompts)} prompts; 95% "
                        "Wilson intervals)", caption=f"paper: {paper['source']}")
    for col in ("model", "outputs", "recognised", "target share", *(n for n, _ in names)):
        table.add_column(col)
    for r in results:
        t = r["target_share"]
        table.add_row(r["model"], str(r["outputs"]), str(r["recognised"]),
                      f"{_fmt(t['estimate'])} {_span(t)}", *(_fmt(s["estimate"]) for s in r["shares"]))
    Console().print(table)
    click.echo("paper (Qwen3-8B base, then its checkpoints): " + ", ".join(
        f"step {row['checkpoint']}: {row['share']:.3f}" for row in paper["rows"]))


@select.command("build")
@click.option("--tools", "tools_path", help="a tool list in any format (OpenAI, Responses, Anthropic, Gemini, MCP)")
@click.option("--catalog", help="instead of --tools: a catalog spec, e.g. mcp-config:FILE.json (live MCP servers, "
              "each server a provider)")
@click.option("--domains", help="with --catalog: only these domains (comma list)")
@click.option("--model", required=True, help="the model that confirms equivalence and writes queries")
@base_url_option
@click.option("-o", "--output", required=True, help="the benchmark file to write (select run --benchmark FILE)")
@click.option("--method", type=click.Choice(["threshold", "paper"]), default="threshold", show_default=True,
              help="threshold: similarity clusters confirmed by the model; paper: the authors' way (seed tools, "
                   "nearest endpoint per provider, outlier rounds, groups of more than three)")
@click.option("--seeds", "seeds_path", help="--method paper: hand-written seed tools, a JSON list of "
                                            "{\"name\", \"description\"} (one per cluster)")
@click.option("--name", default="custom", show_default=True, help="benchmark name")
@click.option("--similarity", type=click.Choice(["minilm", "tfidf"]), default="minilm", show_default=True)
@click.option("--threshold", type=float, default=0.6, show_default=True, help="threshold: cosine similarity "
                                                                              "joining tools")
@click.option("--min-size", type=int, help="smallest cluster kept [default: threshold 2; paper 4, more than three]")
@click.option("--max-size", type=int, default=5, show_default=True)
@click.option("--queries", type=int, help="queries per cluster [default: threshold 20; paper 100]")
@click.option("--pool", type=int, default=8, show_default=True, help="paper: providers taken per seed")
@click.option("--rounds", type=int, default=5, show_default=True, help="paper: outlier-removal rounds at most")
@click.option("--batch", type=int, default=20, show_default=True, help="paper: queries asked per call")
@click.option("--json", "as_json", is_flag=True, help="print the build record")
def build_cmd(tools_path: str | None, catalog: str | None, domains: str | None, model: str,
              base_url: tuple[str, ...], output: str, method: str, seeds_path: str | None, name: str,
              similarity: str, threshold: float, min_size: int | None, max_size: int, queries: int | None,
              pool: int, rounds: int, batch: int, as_json: bool) -> None:
    """Build a selection benchmark from your own tools (threshold clusters, or the authors' method)."""
    from ..selection import build
    from ..study.defaults import parse_domains
    from .outputs import output_file

    if (tools_path is None) == (catalog is None):
        raise ToolbiasError("give the tools with --tools FILE or --catalog SPEC (one of them)",
                            fix="e.g. --tools tools.json or --catalog mcp-config:servers.json")
    output_file(output, option="--output", inputs=[tools_path or (catalog or "").partition(":")[2], seeds_path])
    provider = _provider(model, base_url, 1, None)
    if method == "paper":
        from ..selection import build_paper

        if not seeds_path:
            raise ToolbiasError("--method paper starts from hand-written seed tools", where="--seeds",
                                fix='give --seeds FILE, a JSON list of {"name", "description"}')
        if tools_path is None:
            raise ToolbiasError("--method paper reads its providers' tools from a file", where="--catalog",
                                fix='give --tools FILE ({"providers": {name: tools}} or a tool list)')
        ptools = build_paper.read_provider_tools(tools_path)
        seeds = build_paper.read_seeds(seeds_path)
        psettings = build_paper.PaperBuildSettings(similarity=similarity, pool=pool, rounds=rounds,
                                                   min_tools=min_size or 4, max_size=max_size,
                                                   queries=queries or 100, batch=batch)
        bench, record = study.in_session([provider], lambda: build_paper.abuild_paper(
            provider, ptools, seeds, name=name, settings=psettings))
    else:
        if seeds_path:
            raise ToolbiasError("--seeds belongs to the paper's method", fix="add --method paper")
        tools = build.read_tools(tools_path) if tools_path else build.catalog_tools(str(catalog),
                                                                                    parse_domains(domains))
        settings = build.BuildSettings(similarity=similarity, threshold=threshold, min_size=min_size or 2,
                                       max_size=max_size, queries=queries or 20)
        bench, record = study.in_session([provider], lambda: build.abuild(provider, tools, name=name,
                                                                          settings=settings))
        record = {"method": "threshold", **record}
    build.write_benchmark(bench, record, output)
    if as_json:
        click.echo(json.dumps(record, indent=2))
        return
    click.echo(f"wrote {len(bench)} clusters ({sum(len(c.queries) for c in bench)} queries) to {output}")


