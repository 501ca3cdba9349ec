"""CLI: ``toolbias recommend`` - which schema variant suits a model."""

from __future__ import annotations

import asyncio
import json

import click
from rich.console import Console
from rich.table import Table

from ..store import Store
from ..study.defaults import study_config
from ..study.paper_protocol import check_protocol
from ..study.recommend import HalvingResult, Round, export_variant, rank_variants, successive_halving
from ..study.runner import StudyConfig, build_study, run_study_async
from ..study.success import MatchRule
from ..variants.codec import Control
from .display import stdout_console
from .extra_body import apply_extra_body, extra_body_option
from .options import (
    base_url_option,
    model_option,
    protocol_option,
    store_option,
    study_concurrency_option,
    task_file_option,
)


@click.command("recommend")
@model_option(default="local")
@base_url_option
@click.option("--catalog", default="builtin", show_default=True)
@click.option("--variants", default="representative", show_default=True, help="candidates")
@click.option("--sample", type=int, default=36, show_default=True,
              help="paired stratified sample: the tasks the finalists play")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--control", type=click.Choice([c.value for c in Control]), default="strict", show_default=True)
@click.option("--match", type=click.Choice(["auto"] + [r.value for r in MatchRule]), default="auto",
              show_default=True, help="success rule, as `toolbias run --match` (paper: the schema-bias artifact's)")
@protocol_option(
              help="as `toolbias run --protocol` (paper: the schema-bias artifact's evaluation; variants whose "
              "reading it does not reproduce yet are refused)")
@store_option("recommend.db")
@study_concurrency_option
@click.option("--halving/--no-halving", default=True, show_default=True,
              help="successive halving (the better half of the candidates plays twice the tasks, until two "
                   "finalists play the whole sample); --no-halving plays every candidate on every task")
@click.option("--export", "export_dir", help="write the chosen variant (variant.json for `toolbias proxy "
              "--variant`, tools.json, recommendation.json) into this directory")
@click.option("--json", "as_json", is_flag=True)
@task_file_option
@extra_body_option()
def recommend_cmd(model: str, base_url: tuple[str, ...], catalog: str, variants: str, sample: int, seed: int,
                  control: str, match: str, protocol: str, store: str, concurrency: int | None, halving: bool, export_dir: str | None,
                  as_json: bool, task_file: str | None, extra_body: str | None) -> None:
    """Estimate candidate variants' success on a small paired sample, rank them and pick one."""
    from .outputs import output_dir

    if export_dir:
        output_dir(export_dir, option="--export", inputs=[store, catalog.partition(":")[2], task_file])
    check_protocol(protocol, "recommend")
    rule = "" if match == "auto" else f"|{match}"
    rule += "|paper-protocol" if protocol == "paper" else ""
    cfg = study_config(model=model, catalog=catalog, variants=variants, sample=sample, seed=seed, control=control,
                       concurrency=concurrency, study=f"recommend|{model}|{control}|{sample}|{seed}{rule}",
                       base_urls=base_url, match=match, task_file=task_file, protocol=protocol)
    cfg = apply_extra_body(cfg, extra_body)
    err = Console(stderr=True)
    if not halving:
        _full(cfg, store, seed, sample, export_dir, as_json)
        return

    def progress(r: Round) -> None:
        left = [v for v in r.candidates if v not in r.kept]
        err.print(f"round {r.index}: {len(r.candidates)} candidates on {r.tasks} tasks"
                  + (f"; out: {', '.join(left)}" if left else ""))

    with Store(store) as st:
        result = successive_halving(cfg, st, seed=seed,
                                    on_round=None if as_json else progress)
    paths = export_variant(result.choice, cfg, export_dir, result) if export_dir else []
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
        return
    _print_halving(result, model, catalog)
    for p in paths:
        click.echo(f"wrote {p}")

def _print_halving(result: HalvingResult, model: str, catalog: str) -> None:
    n = max(r.n for r in result.ranking)
    table = Table(title=f"{model} on {catalog}: successive halving, finalists on {n} paired tasks",
                  title_justify="left")
    for col in ("rank", "variant", "functions", "tasks", "success [95% CI]", "left in round"):
        table.add_column(col, justify="left" if col == "variant" else "right")
    for i, r in enumerate(result.ranking, 1):
        table.add_row(str(i), r.variant, f"{r.functions} ({r.ratio:.2f}x)", str(r.n),
                      f"{100 * r.success:.0f}% [{100 * r.ci_low:.0f}, {100 * r.ci_high:.0f}]",
                      "finalist" if r.eliminated_in is None else str(r.eliminated_in))
    stdout_console().print(table)
    lead = ""
    if result.lead is not None:
        finalists = [r.variant for r in result.ranking if r.eliminated_in is None]
        est, lo, hi = result.lead
        lead = f"; lead over {finalists[1]}: {100 * est:+.0f} points [{100 * lo:+.0f}, {100 * hi:+.0f}]"
    click.echo(f"recommended: {result.choice} (best in {100 * result.p_best:.0f}% of task resamples{lead})")
    click.echo(f"episodes played: {result.episodes} of {result.episodes_full} for every candidate on every task")

def _full(cfg: StudyConfig, store: str, seed: int, sample: int, export_dir: str | None, as_json: bool) -> None:
    study = build_study(cfg)
    with Store(store) as st:
        asyncio.run(run_study_async(study, st))  # checks the model first, in the same event loop
        ranked = rank_variants(study, st, seed=seed)
    paths = export_variant(ranked[0].variant, cfg, export_dir) if export_dir else []
    if as_json:
        click.echo(json.dumps([r.to_dict() for r in ranked], indent=2))
        return
    table = Table(title=f"{cfg.model} on {cfg.catalog}: {sample} paired tasks per variant")
    for col in ("variant", "functions", "success [95% CI]", "vs best [95% CI]", ""):
        table.add_column(col)
    for r in ranked:
        table.add_row(r.variant, f"{r.functions} ({r.ratio:.2f}x)",
                      f"{100 * r.success:.0f}% [{100 * r.ci_low:.0f}, {100 * r.ci_high:.0f}]",
                      f"{100 * r.diff_to_best:+.0f} [{100 * r.diff_ci_low:+.0f}, {100 * r.diff_ci_high:+.0f}]",
                      "best" if r is ranked[0] else ("tied" if r.tied_with_best else ""))
    Console().print(table)
    tied = [r.variant for r in ranked if r.tied_with_best]
    click.echo(f"recommended: {ranked[0].variant}" +
               (f" (statistically tied at n={sample}: {', '.join(tied[1:])})" if len(tied) > 1 else ""))
    for p in paths:
        click.echo(f"wrote {p}")
