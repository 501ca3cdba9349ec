"""CLI: ``toolbias reproduce schema``: Figure 2's protocol on the user's model, beside the paper's models."""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from ..errors import ToolbiasError
from ..report import ReportSettings, build_report
from ..report.schema_paper import (
    TABLE10_VARIANTS,
    TEXT_HEAD,
    Placement,
    paper_variants,
    place_model,
    render_html,
    table_arms,
    text_rows,
)
from ..report.summary import infra_error_reasons
from ..store import Store
from ..study.defaults import study_config
from ..study.paper_protocol import Protocol, check_protocol
from ..study.probes import probe_study
from ..study.runner import build_study, run_study, run_study_async
from .display import stdout_console
from .extra_body import apply_extra_body, extra_body_option
from .options import base_url_option, model_option, protocol_option, store_option, study_concurrency_option

#: where the artifact's catalog is found when --catalog is not given (--protocol paper)
DATA_ENV = "TOOLBIAS_TOOLSCHEMASPACE"
#: else here, as `reproduce selection` finds the BiasBusters files
DEFAULT_DATA = "../shared/data/toolschemaspace"


def catalog_spec(given: str | None, protocol: Protocol) -> str:
    """``--catalog`` as given; else under the paper's protocol the artifact's catalog from
    :data:`DATA_ENV` or :data:`DEFAULT_DATA` (absolute, so the study is the same from any folder),
    under toolbias's the built-in one."""
    if given:
        return given
    if protocol is not Protocol.PAPER:
        return "builtin"
    folder = os.environ.get(DATA_ENV) or DEFAULT_DATA
    if Path(folder, "tools.json").is_file() and Path(folder, "specs").is_dir():
        return f"toolschemaspace:{Path(folder).resolve()}"
    raise ToolbiasError("which catalog? The paper's protocol plays the artifact's renderings on its catalog",
                        where=f"--catalog (not given; looked in {folder})",
                        fix=f"give --catalog toolschemaspace:DIR (the folder of the artifact's tools.json, "
                            f"queries*.jsonl and specs/), or set {DATA_ENV}=DIR; --protocol toolbias runs on "
                            "the built-in catalog")


@click.command("schema")
@model_option(default="local")
@base_url_option
@click.option("--catalog", help="the paper's twelve domains: under --protocol paper the artifact's catalog, "
              "toolschemaspace:DIR (its spec-file variants are built from DIR/specs/) [default: "
              f"toolschemaspace:${DATA_ENV}, else toolschemaspace:{DEFAULT_DATA}]; under --protocol toolbias "
              "[default: builtin]")
@click.option("--sample", type=int, default=24, show_default=True,
              help="a stratified sample of N tasks, the same for every variant (the paper: all 2,748)")
@click.option("--appendix", is_flag=True, help="also Figure 4's variants (the remaining methods of each operator)")
@click.option("--tables", is_flag=True, help="also the arms of Tables 6, 7 and 8 and Table 10's compliance probes, "
              "each printed beside the paper's rows")
@protocol_option(default="paper",
              help="paper (the artifact's evaluation: the only one comparable with the paper's numbers) or "
                   "toolbias (its own stricter protocol, printed as not comparable)")
@click.option("--seed", type=int, default=0, show_default=True)
@store_option("reproduce-schema.db")
@study_concurrency_option
@click.option("--json", "as_json", is_flag=True, help="the placement as JSON on stdout")
@click.option("--html", type=click.Path(dir_okay=False), help="also write the placement as an HTML page here")
@extra_body_option()
def schema_cmd(model: str, base_url: tuple[str, ...], catalog: str | None, sample: int, appendix: bool, tables: bool,
               protocol: str,
               seed: int, store: str, concurrency: int | None, as_json: bool, html: str | None,
               extra_body: str | None) -> None:
    """Run the schema-bias paper's representative variants on your model and print it beside the paper's
    models: success with a 95% interval, change from native, rank per variant. Re-running resumes."""
    from .outputs import lasting_store, output_file

    lasting_store(store, command="reproduce schema")
    comparable = check_protocol(protocol, "reproduce schema") is Protocol.PAPER
    catalog = catalog_spec(catalog, Protocol(protocol))
    if html:
        output_file(html, option="--html", inputs=[store, catalog.partition(":")[2]])
    variants = paper_variants(appendix=appendix) + (table_arms(paper=comparable) + list(TABLE10_VARIANTS.values())
                                                    if tables else [])
    cfg = study_config(model=model, catalog=catalog, variants=",".join(dict.fromkeys(variants)),
                       sample=sample, seed=seed, control="strict", concurrency=concurrency, base_urls=base_url,
                       protocol=protocol, study=f"reproduce-schema|{model}|{protocol}|{catalog}|{sample}|{seed}")
    cfg = apply_extra_body(cfg, extra_body)
    study = build_study(cfg)
    err = Console(stderr=True)
    err.print(f"{len(study.codecs)} variants x {len(study.tasks)} tasks on {model} ({protocol} protocol)",
              highlight=False)
    with Store(store) as st:
        asyncio.run(run_study_async(study, st))  # checks the model first, in the same event loop
        if tables:  # Table 10: isolated-call compliance on its four variants
            probe_cfg = replace(cfg, variants=",".join(TABLE10_VARIANTS.values()))
            run_study(probe_study(probe_cfg), st, check=False)
        data = build_report(st, settings=ReportSettings(seed=seed), study=cfg.study_name)
        unplayed = infra_error_reasons(st, cfg.study_name)
    placement = place_model(data, model, control=cfg.control.value, condition=study.config.condition_label,
                            appendix=appendix, paper=comparable)
    placement.notes.extend(_unplayed_notes(unplayed, len(study.tasks)))
    if not comparable:
        placement.notes.insert(0, "run under toolbias's own protocol: its numbers are not comparable with the "
                                  "paper's (use --protocol paper)")
    if html:
        Path(html).write_text(render_html(placement), encoding="utf-8")
    if as_json:
        click.echo(json.dumps(placement.to_json(), indent=2))
        return
    _print(placement, len(study.tasks))
    _print_tables(placement)
    if html:
        click.echo(f"report: {html}")


def _unplayed_notes(reasons: dict[tuple[str, str], int], n_tasks: int) -> list[str]:
    """Per variant, how many of its tasks hit an infrastructure error and the first reason (a prompt
    longer than the embedded model's context window, a server down): the rows they leave short."""
    by_variant: dict[str, tuple[int, str]] = {}
    for (variant, reason), n in reasons.items():
        count, first = by_variant.get(variant, (0, reason))
        by_variant[variant] = (count + n, first)
    return [f"{variant}: {n} of {n_tasks} tasks left out by an infrastructure error ({reason})"
            for variant, (n, reason) in by_variant.items()]


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


def _f3(x: Any) -> str:
    return "-" if x is None else f"{x:.3f}".replace("0.", ".", 1)


#: per published table: its title, the columns shown and the key of the user's rows
_TABLES: dict[str, tuple[str, tuple[str, ...]]] = {
    "table6": ("Table 6: merge penalty by argument structure", ("native", "flat", "nested", "union")),
    "table8": ("Table 8: whole-catalog class-grouping controls",
               ("class_semantic", "class_neutral", "random", "anti_class")),
}


def _print_tables(placement: Placement) -> None:
    """The published rows of Tables 6, 8 and 10 with the user's row last, where the user ran their arms."""
    yours = placement.tables.get("yours", {})
    console = stdout_console()
    for key, (title, cols) in _TABLES.items():
        if key not in yours:
            continue
        table = Table(title=title, title_justify="left")
        for col in ("model", *cols):
            table.add_column(col, justify="left" if col == "model" else "right")
        for r in placement.tables[key]["rows"]:
            table.add_row(str(r["model"]), *(_f3(r.get(c)) for c in cols))
        for r in yours[key]:
            table.add_row(f"{placement.model} (yours)", *(_f3(r.get(c)) for c in cols), style="bold")
        console.print(table)
    for r in yours.get("table7", []):  # the paper's text gives Table 7's values illegibly: yours alone
        console.print(f"Table 7 (yours, {r['target']}x): flat {_f3(r['flat'])}, nested {_f3(r['nested'])}, union "
                      f"{_f3(r['union'])}, mixed {_f3(r['mixed'])}, delta {r['delta']:+.3f}", highlight=False)
    if "table10" in yours:
        table = Table(title="Table 10: compliance / exact", title_justify="left")
        columns = list(TABLE10_VARIANTS)
        for col in ("model", *columns):
            table.add_column(col, justify="left" if col == "model" else "right")
        for r in placement.tables["table10"]["rows"]:
            table.add_row(str(r["model"]), *(f"{_f3(r[c]['compliance'])} / {_f3(r[c]['exact'])}" for c in columns))
        mine = yours["table10"]
        table.add_row(f"{placement.model} (yours)", *(
            f"{_f3(mine[c]['compliance'])} / {_f3(mine[c]['exact'])}" if c in mine else "-" for c in columns),
            style="bold")
        console.print(table)
