"""CLI: ``toolbias run`` (a study), ``toolbias merge`` (shards), ``toolbias export``."""

from __future__ import annotations

import asyncio
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..catalog.phrasing import PHRASINGS
from ..errors import ToolbiasError
from ..store import Store, export, merge_stores
from ..study.defaults import (
    EMBEDDED_DEFAULT_JOB,
    MAX_TOKENS,
    TURN_LIMIT,
    plan_study,
)
from ..study.episode import Condition
from ..study.paper_protocol import check_protocol
from ..study.runner import Progress as RunProgress
from ..study.runner import build_study, run_study_async
from ..study.success import MatchRule
from ..variants.codec import Control
from .extra_body import apply_extra_body, extra_body_option
from .options import (
    base_url_option,
    model_option,
    protocol_option,
    store_option,
    study_concurrency_option,
    task_file_option,
)


def _print_infra_errors(console: Console, store: str, study: str, count: int) -> None:
    """Which variants hit infrastructure errors and why (one line per variant and reason)."""
    from ..report.summary import infra_error_reasons

    with Store(store) as st:
        reasons = infra_error_reasons(st, study)
    console.print(f"[yellow]{count} episode(s) hit infrastructure errors (kept apart from model failures):[/]")
    for (variant, message), n in reasons.items():
        console.print(f"  {variant}: {n} x {escape(message)}", highlight=False)
    console.print("[yellow]re-run the same command to retry them; errors that are not transient (a prompt "
                  "longer than the context window) recur: leave those variants out with --variants or "
                  "use a model with a longer context[/]")


def summary_table(store: Store, study: str) -> Table:
    from ..report.summary import study_summary

    table = Table(title=f"study {study}")
    for col in ("variant", "n", "success", "top failure"):
        table.add_column(col, justify="right" if col in ("n", "success") else "left")
    for line in study_summary(store, study):
        top = f"{line.top_failure[0]} ({line.top_failure[1]})" if line.top_failure else "-"
        table.add_row(line.variant, str(line.episodes), f"{100 * line.success_rate:.1f}%", top)
    return table


def _calls(value: str | None) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in value.split(",") if v.strip()) if value else ()
    except ValueError:
        raise ToolbiasError(f"bad --calls '{value}'", fix="numbers of gold calls, e.g. --calls 1 or --calls 1,2") from None


@click.command("run")
@model_option(default="local")
@base_url_option
@click.option("--catalog", default="builtin", show_default=True, help="builtin, tau2:airline|retail, toolschemaspace:DIR, "
              "bfcl:DIR, bfcl-multi:base, tools:FILE, mcp:FILE")
@click.option("--variants", help="all, representative (the paper's 12), a comma list of names, or spec files "
              f"[default: representative; the embedded default job: {EMBEDDED_DEFAULT_JOB.variants}]")
@click.option("--tasks", type=int, help="only the first N tasks")
@click.option("--sample", type=int, help="a stratified sample of N tasks, the same for every variant")
@click.option("--domains", help="only tasks of these domains (comma list)")
@click.option("--calls", help="only tasks whose gold has this many calls (comma list, e.g. 1 or 1,2)")
@click.option("--phrasing", type=click.Choice(PHRASINGS), help="which phrasing of the queries to ask: query "
              "(the paper's colloquial one), query_base (the templated source; the built-in catalog has it), "
              f"query_easy/llm/hard (the artifact) [default: query; the embedded default job: "
              f"{EMBEDDED_DEFAULT_JOB.phrasing}]")
@click.option("--split", type=click.Choice(["train", "eval"]), help="only this part of the splits manifest "
              "(eval: never a training task of `toolbias train-data`)")
@click.option("--splits", default="default", show_default=True,
              help="the splits manifest: default (the catalog's), table4, builtin, or a JSON file")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--control", type=click.Choice([c.value for c in Control]), default="strict", show_default=True)
@click.option("--condition", type=click.Choice([c.value for c in Condition]), default="base", show_default=True,
              help="base, instruction (per-variant instruction), required (constrained first call)")
@click.option("--match", type=click.Choice(["auto"] + [r.value for r in MatchRule]), default="auto",
              show_default=True, help="success rule: exact (toolbias's own: strings character for character, "
              "numbers as JSON numbers), normalised (strings trimmed and case-folded), bfcl (BFCL's string "
              "standardisation), paper (the schema-bias artifact's: null/\"\" arguments dropped, numeric-aware, "
              "case-insensitive); auto: the catalog's own (bfcl for BFCL, else exact). A non-default rule is "
              "stored as part of the condition")
@protocol_option(
              help="toolbias (toolbias's own evaluation: strict schema validation, replies that list the tools, "
              "state after each call) or paper (the schema-bias artifact's: its hard/loose control for "
              "strict/lenient, its replies and prompt, 1,024 tokens, 16 turns, its success rule; stored as "
              "<condition>@paper)")
@store_option("toolbias.db", help="SQLite file of the study")
@click.option("--study", help="study name inside the store [default: model|control|condition, then |CATALOG for a catalog other than builtin]")
@study_concurrency_option
@click.option("--workers", type=click.IntRange(min=1), help="processes for CPU-bound models (oracle, scripted, "
              "replay) [default: one per core from 2,000 episodes on; 1: this process only]")
@click.option("--shard", help="run shard i of n (i/n); merge shards with `toolbias merge`")
@click.option("--turn-limit", type=int, help=f"model turns per episode [default: {TURN_LIMIT}; the embedded "
              f"default job: {EMBEDDED_DEFAULT_JOB.turn_limit}]")
@click.option("--temperature", type=float, default=0.0, show_default=True)
@click.option("--max-tokens", type=int, help=f"tokens per model turn [default: {MAX_TOKENS}; the embedded "
              f"default job: {EMBEDDED_DEFAULT_JOB.max_tokens}]")
@click.option("--cache", help="response cache file (SQLite); off by default")
@click.option("--user-model", help="user simulator of multi-turn catalogs (tau2:...), a model spec "
              "[default: a scripted user that states the request and ends at the first answer]")
@click.option("--html", type=click.Path(dir_okay=False), help="also write the study's HTML report here")
@task_file_option
@extra_body_option()
def run_cmd(model: str, base_url: tuple[str, ...], catalog: str, variants: str, tasks: int | None,
            sample: int | None, domains: str | None, calls: str | None, phrasing: str | None, split: str | None,
            splits: str, seed: int, control: str, condition: str, match: str, protocol: str, store: str,
            study: str | None, concurrency: int | None, workers: int | None, shard: str | None, turn_limit: int | None,
            temperature: float, max_tokens: int | None, cache: str | None, user_model: str | None,
            html: str | None, task_file: str | None, extra_body: str | None) -> None:
    """Run a study: a model on every chosen variant x task. Re-running resumes."""
    check_protocol(protocol, "run")
    cfg, job = plan_study(model=model, catalog=catalog, variants=variants, tasks=tasks, sample=sample,
                       domains=domains, calls=_calls(calls), phrasing=phrasing, split=split, splits=splits,
                       seed=seed, control=control, condition=condition, match=match, turn_limit=turn_limit,
                       temperature=temperature, max_tokens=max_tokens, concurrency=concurrency,
                       workers=workers, shard=shard, study=study, cache=cache, base_urls=base_url,
                       user_model=user_model, task_file=task_file, protocol=protocol)
    from .outputs import lasting_store, output_file

    lasting_store(store, command="run")
    if job is not None:
        html = html or str(Path(store).parent / job.html)
    if html:
        output_file(html, option="--html", inputs=[store, cache, catalog.partition(":")[2], splits, task_file])
    cfg = apply_extra_body(cfg, extra_body)
    built = build_study(cfg)
    cfg = built.config  # with the catalog's success rule resolved
    console = Console(stderr=True)
    if job is not None:
        console.print(f"the embedded model's default job ({len(built.codecs)} variants x {len(built.tasks)} "
                      f"tasks; any task or variant option runs your own study instead):\n  {job.command()}",
                      highlight=False, soft_wrap=True)

    async def check_then_run(st: Store) -> RunProgress:
        # one event loop for the check and the run: SDK clients belong to the loop that made them
        await built.model.check()  # unreachable server, bad key, unknown model: before any episode
        from .display import progress_bar

        with progress_bar(console) as on_progress:
            return await run_study_async(built, st, on_progress, check=False)

    with Store(store) as st:
        prog = asyncio.run(check_then_run(st))
        Console().print(summary_table(st, cfg.study_name))
        from .display import finding_of

        found = finding_of(st, cfg.study_name)
        report = None
        if html:
            from ..report import ReportSettings, build_report
            from ..report.html import write_html

            data = build_report(st, settings=ReportSettings(), study=cfg.study_name)
            report = write_html(data, html, st)
    from .display import print_finding

    print_finding(Console(), found, report)
    if prog.infra_errors:
        _print_infra_errors(console, store, cfg.study_name, prog.infra_errors)

@click.command("merge")
@click.argument("inputs", nargs=-1, required=True)
@click.option("-o", "--output", required=True, help="the merged store (must not exist)")
def merge_cmd(inputs: tuple[str, ...], output: str) -> None:
    """Merge shard stores of one study into one store."""
    from .outputs import lasting_store

    lasting_store(output, option="--output", command="merge")
    counts = merge_stores(inputs, output)
    click.echo(f"merged {counts['episodes']} episodes from {len(inputs)} stores into {output}")

@click.command("export")
@store_option("toolbias.db")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "csv", "parquet"]), default="jsonl",
              show_default=True)
@click.option("-o", "--output", help="output file [default: <store>.<format>]")
def export_cmd(store: str, fmt: str, output: str | None) -> None:
    """Export finished episodes for pandas and friends."""
    from .outputs import output_file

    out = output or f"{store.rsplit('.', 1)[0]}.{fmt}"
    output_file(out, option="--output", inputs=[store])
    n = export(store, fmt, out)
    click.echo(f"wrote {n} episodes to {out}")
