"""CLI: ``toolbias reproduce schema``: Figure 2's protocol on the user's model, beside the paper's models."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from ..report import ReportSettings, build_report
from ..report.schema_paper import TEXT_HEAD, Placement, paper_variants, place_model, render_html, text_rows
from ..store import Store
from ..study.defaults import study_config
from ..study.paper_protocol import Protocol, check_protocol
from ..study.runner import build_study, run_study_async
from .display import stdout_console
from .extra_body import apply_extra_body, extra_body_option
from .options import base_url_option, concurrency_option, model_option, store_option


@click.command("schema")
@model_option(default="local")
@base_url_option
@click.option("--catalog", default="builtin", show_default=True, help="the paper's twelve domains (builtin), or "
              "toolschemaspace:DIR")
@click.option("--sample", type=int, default=24, show_default=True,
              help="a stratified sample of N tasks, the same for every variant (the paper: all 2,748)")
@click.option("--appendix", is_flag=True, help="also Figure 4's variants (the remaining methods of each operator)")
@click.option("--protocol", type=click.Choice([p.value for p in Protocol]), default="paper", show_default=True,
              help="paper (the artifact's evaluation: the only one comparable with the paper's numbers) or "
                   "toolbias (its own stricter protocol, printed as not comparable)")
@click.option("--seed", type=int, default=0, show_default=True)
@store_option("reproduce-schema.db")
@concurrency_option
@click.option("--json", "as_json", is_flag=True, help="the placement as JSON on stdout")
@click.option("--html", type=click.Path(dir_okay=False), help="also write the placement as an HTML page here")
@extra_body_option()
def schema_cmd(model: str, base_url: tuple[str, ...], catalog: str, sample: int, appendix: bool, protocol: str,
               seed: int, store: str, concurrency: int, as_json: bool, html: str | None,
               extra_body: str | None) -> None:
    """Run the schema-bias paper's representative variants on your model and print it beside the paper's
    models: success with a 95% interval, change from native, rank per variant. Re-running resumes."""
    from .outputs import lasting_store, output_file

    lasting_store(store, command="reproduce schema")
    if html:
        output_file(html, option="--html", inputs=[store, catalog.partition(":")[2]])
    comparable = check_protocol(protocol) is Protocol.PAPER
    match = "paper" if comparable else "auto"
    cfg = study_config(model=model, catalog=catalog, variants=",".join(paper_variants(appendix=appendix)),
                       sample=sample, seed=seed, control="strict", concurrency=concurrency, base_urls=base_url,
                       match=match, study=f"reproduce-schema|{model}|{protocol}|{catalog}|{sample}|{seed}")
    cfg = apply_extra_body(cfg, extra_body)
    study = build_study(cfg)
    err = Console(stderr=True)
    err.print(f"{len(study.codecs)} variants x {len(study.tasks)} tasks on {model} ({protocol} protocol)",
              highlight=False)
    with Store(store) as st:
        asyncio.run(run_study_async(study, st))  # checks the model first, in the same event loop
        data = build_report(st, settings=ReportSettings(seed=seed), study=cfg.study_name)
    placement = place_model(data, model, control=cfg.control.value, condition=study.config.condition_label,
                            appendix=appendix)
    if not comparable:
        placement.notes.insert(0, "run under toolbias's own protocol: its numbers are not comparable with the "
                                  "paper's (use --protocol paper)")
    if html:
        Path(html).write_text(render_html(placement), encoding="utf-8")
    if as_json:
        click.echo(json.dumps(placement.to_json(), indent=2))
        return
    _print(placement, len(study.tasks))
    if html:
        click.echo(f"report: {html}")


def _print(placement: Placement, n: int) -> None:
    table = Table(title=f"{placement.model} beside the schema-bias paper's models: exact success on {n} tasks "
                  "(the paper: 2,748)", title_justify="left")
    for col in TEXT_HEAD:
        table.add_column(col, justify="left" if col.startswith(("variant", "nearest", "your")) else "right")
    for row in text_rows(placement):
        table.add_row(*row)
    console = stdout_console()
    console.print(table)
    for note in placement.notes:
        console.print(f"note: {note}", highlight=False)
