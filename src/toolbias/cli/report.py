"""CLI: ``toolbias report`` (grid, intervals, figures, JSON/CSV, HTML) and
``toolbias probe`` (compliance probes)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import click
from rich.console import Console

from ..study.episode import Condition
from ..study.paper_protocol import Protocol
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

if TYPE_CHECKING:
    from ..integrations.tau2_results import Tau2Import


@click.command("report")
@store_option("toolbias.db", help="SQLite file of the study")
@click.option("--study", help="only this study (name inside the store)")
@click.option("--json", "as_json", is_flag=True, help="print everything as JSON instead of tables")
@click.option("--csv", "csv_path", help="write the per-episode table (tasks and probes) to this CSV file")
@click.option("--figures", "figures_dir", help="write PNG and SVG figures into this directory")
@click.option("--html", "html_path", help="write a self-contained HTML report to this file")
@click.option("--catalog", help="catalog spec for function-count ratios [default: the store's]")
@click.option("--seed", type=int, default=0, show_default=True, help="bootstrap / sampling seed")
@click.option("--resamples", type=int, default=10_000, show_default=True,
              help="bootstrap resamples per interval")
@click.option("--confidence", type=float, default=0.95, show_default=True)
@click.option("--sample-n", type=int, default=36, show_default=True,
              help="difficulty prediction: tasks per random sample")
@click.option("--repeats", type=int, default=200, show_default=True,
              help="difficulty prediction: independent sample draws for error and coverage")
@click.option("--baseline", default="native", show_default=True, help="variant that differences refer to")
@click.option("--episodes-per-mode", type=int, default=5, show_default=True,
              help="HTML drill-down: episodes per cell and failure mode")
@click.option("--episodes-limit", type=int, default=1000, show_default=True,
              help="HTML drill-down: at most this many episodes (every failure mode is kept)")
@click.option("--trained", multiple=True, help="a training run of the base model, LABEL=MODEL[@SPLITS.json] "
              "(repeat): a column of the mitigation table (Table 3) and, with a manifest, Table 14")
@click.option("--base-model", help="the untrained model of the mitigation table [default: the model with "
              "mitigation conditions]")
@click.option("--splits", "splits_spec", help="mark results seen / held-out variant / held-out domain by this "
              "splits manifest (default, table4, builtin or a JSON file)")
@click.option("--tau2-results", multiple=True, metavar="[VARIANT=]FILE",
              help="import a results file `tau2 run` wrote into --store first (repeat; again adds nothing), "
              "for Table 9; VARIANT= names the schema it ran under (the proxy's --variant)")
@click.option("--tau2-variant", help="the schema (variant) of --tau2-results files that do not name one "
              "[default: what the file says, else required]")
@click.option("--tau2-model", help="the model of --tau2-results files [default: the file's agent LLM, "
              "openai/M as openai:M]")
def report_cmd(store: str, study: str | None, as_json: bool, csv_path: str | None, figures_dir: str | None,
               html_path: str | None, catalog: str | None, seed: int, resamples: int, confidence: float,
               sample_n: int, repeats: int, baseline: str, episodes_per_mode: int,
               episodes_limit: int, trained: tuple[str, ...], base_model: str | None,
               splits_spec: str | None, tau2_results: tuple[str, ...], tau2_variant: str | None,
               tau2_model: str | None) -> None:
    """Report a study: model x variant grid with 95% intervals and failure modes,
    paired differences, schema-form gap, probes, difficulty prediction, and the paper's
    tables whose arms were run (Table 9: tau2-bench, in process and imported)."""
    from ..report import ReportSettings, build_report, dumps, print_report
    from ..report import mitigation as mit
    from ..report.grid import open_store
    from .outputs import output_dir, output_file

    inputs = [store, *(t.rpartition("=")[2] for t in tau2_results), splits_spec,
              catalog.partition(":")[2] if catalog else None]
    for path, opt in ((csv_path, "--csv"), (html_path, "--html")):
        if path:
            output_file(path, option=opt, inputs=inputs)
    if figures_dir:
        output_dir(figures_dir, option="--figures", inputs=inputs)
    imports = _import_tau2(store, tau2_results, tau2_variant, tau2_model)
    settings = ReportSettings(seed=seed, n_resamples=resamples, confidence=confidence, sample_n=sample_n,
                              repeats=repeats, baseline=baseline)
    runs = [mit.TrainedRun.parse(t) for t in trained]
    with open_store(store) as st:
        data = build_report(st, settings=settings, catalog=catalog, study=study)
        table = mit.mitigation_table_from_store(st, study=study, trained=runs, base_model=base_model, seed=seed,
                                                n_resamples=resamples, confidence=confidence)
        view = mit.split_view_from_store(st, splits_spec, data.catalogs, study=study, seed=seed,
                                         n_resamples=resamples, confidence=confidence) if splits_spec else None
        err = Console(stderr=True)
        if csv_path:
            from ..store import episodes_dataframe

            df = episodes_dataframe(st, kind=None)
            if study:
                df = df[df["study"].str.startswith(study)]
            df.to_csv(csv_path, index=False)
            err.print(f"wrote {len(df)} episodes to {csv_path}")
        pngs: dict[str, bytes] | None = None
        if figures_dir:
            from ..report.figures import save_figures

            paths = save_figures(data, figures_dir)
            pngs = {p.stem: p.read_bytes() for p in paths if p.suffix == ".png"}
            err.print(f"wrote {len(paths)} figure files to {figures_dir}")
        if html_path:
            from ..report.html import selection_fragments, write_html

            fragments = selection_fragments(str(data.store)) + (
                [("Mitigations (Table 3)", mit.mitigation_html(table))] if table is not None else [])
            write_html(data, html_path, st, per_mode=episodes_per_mode, limit=episodes_limit,
                       figures=pngs if pngs is not None else True, fragments=fragments)
            err.print(f"wrote {html_path}")
    if as_json:
        if table is None and view is None and not imports:
            click.echo(dumps(data))
            return
        import json

        payload = json.loads(dumps(data))
        if imports:
            payload["tau2_imports"] = [i.to_dict() for i in imports]
        if table is not None:
            payload["mitigation"] = table.to_dict()
        if view is not None:
            payload["splits"] = view.to_dict()
        click.echo(json.dumps(payload, indent=2, ensure_ascii=False))
    else:
        console = stdout_console()
        print_report(data, console)
        if table is not None:
            mit.print_mitigations(table, console)
        if view is not None:
            mit.print_split_view(view, console)

def _import_tau2(store: str, files: tuple[str, ...], variant: str | None, model: str | None) -> list[Tau2Import]:
    """Import tau2 results files into ``store`` (created if new); one line each on stderr."""
    if not files:
        if variant or model:
            raise click.UsageError("--tau2-variant and --tau2-model go with --tau2-results FILE")
        return []
    from ..integrations.tau2_results import import_tau2_results, parse_results_option
    from ..store import Store

    done: list[Tau2Import] = []
    with Store(store) as st:
        for value in files:
            path, named = parse_results_option(value)
            done.append(import_tau2_results(st, path, variant=named or variant, model=model))
            click.echo(done[-1].describe(), err=True)
            for note in done[-1].notes:
                click.echo(f"note: {note}", err=True)
    return done

@click.command("probe")
@model_option(required=True)
@base_url_option
@click.option("--catalog", default="builtin", show_default=True)
@click.option("--variants", default="representative", show_default=True,
              help="all, representative, a comma list of names, or spec files")
@click.option("--n", "n_probes", type=int, default=36, show_default=True, help="probes per variant")
@click.option("--seed", type=int, default=0, show_default=True, help="probe selection seed")
@click.option("--control", type=click.Choice([c.value for c in Control]), default="strict", show_default=True)
@click.option("--condition", type=click.Choice([c.value for c in Condition]), default="base",
              show_default=True)
@store_option("toolbias.db")
@click.option("--study", help="study name [default: model|control|condition|probe]")
@study_concurrency_option
@click.option("--turn-limit", type=int, help="turns per probe (compliance is decided by the first native "
              "action) [default: 4; --protocol paper: the artifact's 16]")
@click.option("--temperature", type=float, default=0.0, show_default=True)
@click.option("--max-tokens", type=int, help="tokens per model turn [default: 512; --protocol paper: the "
              "artifact's 1,024]")
@protocol_option(
              help="paper: each probe is an episode of the schema-bias artifact's evaluation, as `toolbias run "
              "--protocol paper` plays it (its prompt, replies, hard/loose control, limits, success rule); "
              "stored as <condition>@paper")
@click.option("--cache", help="response cache file (SQLite)")
@task_file_option
@extra_body_option()
def probe_cmd(model: str, base_url: tuple[str, ...], catalog: str, variants: str, n_probes: int, seed: int,
              control: str, condition: str, store: str, study: str | None, concurrency: int | None, turn_limit: int | None,
              temperature: float, max_tokens: int | None, protocol: str, cache: str | None, task_file: str | None,
              extra_body: str | None) -> None:
    """Compliance probes: single-operation instructions per variant (paper Table 10).
    Stored with kind "probe"; re-running resumes; `toolbias report` shows them."""
    from ..store import Store, episodes_dataframe
    from ..study.defaults import study_config
    from ..study.paper_protocol import check_protocol
    from ..study.probes import PROBE_MAX_TOKENS, PROBE_TURN_LIMIT, compliance_cells, probe_study
    from ..study.runner import run_study
    from ..study.stats import cell_success

    paper = check_protocol(protocol, "probe") is Protocol.PAPER
    if not paper:
        turn_limit = PROBE_TURN_LIMIT if turn_limit is None else turn_limit
        max_tokens = PROBE_MAX_TOKENS if max_tokens is None else max_tokens
    cfg = study_config(model=model, catalog=catalog, variants=variants, seed=seed, control=control,
                       condition=condition, turn_limit=turn_limit, temperature=temperature, max_tokens=max_tokens,
                       concurrency=concurrency, study=study, cache=cache, base_urls=base_url,
                       task_file=task_file, protocol=protocol)
    cfg = apply_extra_body(cfg, extra_body)
    built = probe_study(cfg, n=n_probes)
    err = Console(stderr=True)
    started = time.perf_counter()
    with Store(store) as st:
        prog = run_study(built, st)  # checks the model before any episode, in the same event loop
        err.print(f"{prog.done - prog.skipped} probe episodes run, {prog.skipped} resumed "
                  f"({time.perf_counter() - started:.1f}s)")
        name = built.config.study_name
        rows = [r.__dict__ for r in st.rows(study=name, kind="probe")]
        success = cell_success(episodes_dataframe(st, kind="task"))
    cells = compliance_cells(rows, task_success=success)
    from rich.table import Table

    from ..report.tables import pct

    table = Table(title=f"compliance probes - {name}", title_justify="left")
    for col in ("variant", "probes", "compliance", "95% CI", "exact call", "task success"):
        table.add_column(col, justify="left" if col == "variant" else "right")
    for c in cells:
        table.add_row(c.variant, str(c.n), pct(c.compliance),
                      f"[{pct(c.compliance_low, 0)}, {pct(c.compliance_high, 0)}]", pct(c.exact_call),
                      pct(c.task_success))
    stdout_console().print(table)
    if prog.infra_errors:
        err.print(f"[yellow]{prog.infra_errors} probes hit infrastructure errors; re-run the same command "
                  "to retry them[/]")
