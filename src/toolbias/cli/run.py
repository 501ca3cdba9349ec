"""CLI: ``toolbias run`` (a study), ``toolbias merge`` (shards), ``toolbias export``."""

from __future__ import annotations

import asyncio
from collections import defaultdict

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..codec import Control
from ..episode import Condition
from ..errors import ToolbiasError
from ..providers.base import GenerateConfig
from ..runner import Progress as RunProgress
from ..runner import StudyConfig, build_study, run_study_async
from ..store import Store, export, merge_stores
from .display import finding_of, print_finding, progress_bar

#: ``toolbias run`` with no task options on the embedded model: one task per variant from the domain
#: with the smallest schema, at most 3 turns of at most 192 tokens unless --turn-limit/--max-tokens
#: say otherwise. Measured on 2 cores: the first prompt of a variant (its tools, 1,200-3,000 tokens)
#: takes 16-40 s at ~76 tokens/s, and the 0.5B model tends to use every turn (uncapped, one episode
#: spent 155 s on 8 turns of 1,150 generated tokens; at 4 turns of 256 tokens, 77-90 s).
#: Pass --sample/--domains for more.
DEFAULT_LOCAL_SAMPLE = 1
DEFAULT_LOCAL_DOMAINS = ("fitness_watch",)
DEFAULT_LOCAL_TURN_LIMIT = 3
DEFAULT_LOCAL_MAX_TOKENS = 192


def _print_infra_errors(console: Console, store: str, study: str, count: int) -> None:
    """Which variants hit infrastructure errors and why (one line per variant and reason), so a
    user can tell a transient fault (re-run) from one that will recur (a prompt too long)."""
    reasons: dict[tuple[str, str], int] = {}
    with Store(store) as st:
        for row in st.rows(study=study, status="infra_error"):
            message = str(row.record.get("infra_error") or "unknown error")
            reasons[(row.variant, message)] = reasons.get((row.variant, message), 0) + 1
    console.print(f"[yellow]{count} episode(s) hit infrastructure errors (kept apart from model failures):[/]")
    for (variant, message), n in sorted(reasons.items()):
        console.print(f"  {variant}: {n} x {escape(message)}", highlight=False)
    console.print("[yellow]re-run the same command to retry them; errors that are not transient (a prompt "
                  "longer than the context window) recur: leave those variants out with --variants or "
                  "use a model with a longer context[/]")


def _shard(value: str | None) -> tuple[int, int] | None:
    if not value:
        return None
    try:
        i, n = (int(x) for x in value.split("/"))
    except ValueError:
        raise ToolbiasError(f"bad --shard '{value}'", fix="write i/n with 0 <= i < n, e.g. 0/4") from None
    if not 0 <= i < n:
        raise ToolbiasError(f"bad --shard '{value}': need 0 <= i < n", fix="e.g. --shard 0/4 ... 3/4")
    return (i, n)


def summary_table(store: Store, study: str) -> Table:
    cells: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    modes: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for r in store.rows(study=study, with_record=False):
        cells[r.variant][0] += int(bool(r.success))
        cells[r.variant][1] += 1
        if r.failure_mode:
            modes[r.variant][r.failure_mode] += 1
    table = Table(title=f"study {study}")
    for col in ("variant", "n", "success", "top failure"):
        table.add_column(col, justify="right" if col in ("n", "success") else "left")
    for variant, (ok, n) in cells.items():
        top = max(modes[variant].items(), key=lambda kv: kv[1], default=("-", 0))
        table.add_row(variant, str(n), f"{100 * ok / n:.1f}%", f"{top[0]} ({top[1]})" if top[1] else "-")
    return table


def register(group: click.Group) -> None:
    @group.command("run")
    @click.option("--model", default="local", show_default=True, envvar="TOOLBIAS_MODEL",
                  help="openai:<model>, local, local:PATH.gguf, oracle, scripted:FILE, replay:FILE")
    @click.option("--base-url", multiple=True, help="OpenAI-compatible endpoint(s); repeat to share load "
                  "[env OPENAI_BASE_URL]")
    @click.option("--catalog", default="builtin", show_default=True, help="builtin, toolschemaspace:DIR, "
                  "bfcl:DIR, tools:FILE, mcp:FILE")
    @click.option("--variants", default="representative", show_default=True,
                  help="all, representative (the paper's 12), a comma list of names, or spec files")
    @click.option("--tasks", type=int, help="only the first N tasks")
    @click.option("--sample", type=int, help="a stratified sample of N tasks, the same for every variant")
    @click.option("--domains", help="only tasks of these domains (comma list)")
    @click.option("--seed", type=int, default=0, show_default=True)
    @click.option("--control", type=click.Choice([c.value for c in Control]), default="strict", show_default=True)
    @click.option("--condition", type=click.Choice([c.value for c in Condition]), default="base", show_default=True,
                  help="base, instruction (per-variant instruction), required (constrained first call)")
    @click.option("--store", default="toolbias.db", show_default=True, help="SQLite file of the study")
    @click.option("--study", help="study name inside the store [default: model|control|condition]")
    @click.option("--concurrency", type=int, default=8, show_default=True)
    @click.option("--workers", type=click.IntRange(min=1), help="processes for CPU-bound models (oracle, scripted, "
                  "replay) [default: one per core from 2,000 episodes on; 1: this process only]")
    @click.option("--shard", help="run shard i of n (i/n); merge shards with `toolbias merge`")
    @click.option("--turn-limit", type=int, default=16, show_default=True,
                  help=f"model turns per episode [the embedded default job: {DEFAULT_LOCAL_TURN_LIMIT}]")
    @click.option("--temperature", type=float, default=0.0, show_default=True)
    @click.option("--max-tokens", type=int, default=512, show_default=True,
                  help=f"tokens per model turn [the embedded default job: {DEFAULT_LOCAL_MAX_TOKENS}]")
    @click.option("--cache", help="response cache file (SQLite); off by default")
    @click.option("--html", type=click.Path(dir_okay=False), help="also write the study's HTML report here")
    def run_cmd(model: str, base_url: tuple[str, ...], catalog: str, variants: str, tasks: int | None,
                sample: int | None, domains: str | None, seed: int, control: str, condition: str, store: str, study: str | None,
                concurrency: int, workers: int | None, shard: str | None, turn_limit: int, temperature: float,
                max_tokens: int, cache: str | None, html: str | None) -> None:
        """Run a study: a model on every chosen variant x task. Re-running resumes."""
        chosen_domains = tuple(d.strip() for d in domains.split(",") if d.strip()) if domains else ()
        if model.startswith("local") and sample is None and tasks is None and not chosen_domains \
                and catalog == "builtin":
            sample, chosen_domains = DEFAULT_LOCAL_SAMPLE, DEFAULT_LOCAL_DOMAINS
            ctx = click.get_current_context()
            if ctx.get_parameter_source("turn_limit") is click.core.ParameterSource.DEFAULT:
                turn_limit = DEFAULT_LOCAL_TURN_LIMIT
            if ctx.get_parameter_source("max_tokens") is click.core.ParameterSource.DEFAULT:
                max_tokens = DEFAULT_LOCAL_MAX_TOKENS
        options = {"base_urls": list(base_url)} if base_url else {}
        cfg = StudyConfig(model=model, catalog=catalog, variants=variants, tasks=tasks, sample=sample, seed=seed,
                          domains=chosen_domains,
                          control=Control(control), condition=Condition(condition), turn_limit=turn_limit,
                          generate=GenerateConfig(temperature=temperature, max_tokens=max_tokens),
                          concurrency=concurrency, workers=workers, shard=_shard(shard), study=study, cache=cache,
                          provider_options=options)
        built = build_study(cfg)
        console = Console(stderr=True)

        async def check_then_run(st: Store) -> RunProgress:
            # one event loop for the check and the run: SDK clients belong to the loop that made them
            await built.model.check()  # unreachable server, bad key, unknown model: before any episode
            with progress_bar(console) as on_progress:
                return await run_study_async(built, st, on_progress, check=False)

        with Store(store) as st:
            prog = asyncio.run(check_then_run(st))
            Console().print(summary_table(st, cfg.study_name))
            found = finding_of(st, cfg.study_name)
            report = None
            if html:
                from ..report import ReportSettings, build_report
                from ..report.html import write_html

                data = build_report(st, settings=ReportSettings(), study=cfg.study_name)
                report = write_html(data, html, st)
        print_finding(Console(), found, report)
        if prog.infra_errors:
            _print_infra_errors(console, store, cfg.study_name, prog.infra_errors)

    @group.command("merge")
    @click.argument("inputs", nargs=-1, required=True)
    @click.option("-o", "--output", required=True, help="the merged store (must not exist)")
    def merge_cmd(inputs: tuple[str, ...], output: str) -> None:
        """Merge shard stores of one study into one store."""
        counts = merge_stores(inputs, output)
        click.echo(f"merged {counts['episodes']} episodes from {len(inputs)} stores into {output}")

    @group.command("export")
    @click.option("--store", default="toolbias.db", show_default=True)
    @click.option("--format", "fmt", type=click.Choice(["jsonl", "csv", "parquet"]), default="jsonl",
                  show_default=True)
    @click.option("-o", "--output", help="output file [default: <store>.<format>]")
    def export_cmd(store: str, fmt: str, output: str | None) -> None:
        """Export finished episodes for pandas and friends."""
        out = output or f"{store.rsplit('.', 1)[0]}.{fmt}"
        n = export(store, fmt, out)
        click.echo(f"wrote {n} episodes to {out}")
