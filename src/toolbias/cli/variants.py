"""CLI: ``toolbias variants``, ``toolbias shape`` and ``toolbias verify``.

Thin wiring over :mod:`toolbias.variants`, :mod:`toolbias.variants.verify` and
:mod:`toolbias.variants.artifact` (variant spec files: toolbias ``{"steps": ...}`` or the
paper artifact's ``{"ops": ...}``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from ..catalog.loaders import load_catalog
from ..catalog.model import Catalog
from ..errors import ToolbiasError, VariantError
from ..variants import VariantSpec, build_codec, resolve_variants
from .outputs import output_file

CATALOG_HELP = "catalog spec: builtin, toolschemaspace:DIR, bfcl:DIR, tools:FILE, mcp:FILE"


def _catalog_option() -> Any:
    return click.option("--catalog", "catalog_spec", default="builtin", show_default=True, envvar="TOOLBIAS_CATALOG",
                        help=CATALOG_HELP)


def _specs(catalog: Catalog, variant: str | None, spec_files: tuple[str, ...]) -> list[VariantSpec]:
    from ..variants.artifact import load_spec_file

    out: list[VariantSpec] = []
    if variant:
        out.extend(resolve_variants(variant))
    out.extend(load_spec_file(f, catalog) for f in spec_files)
    return out


def _echo_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False))


def _steps_text(spec: VariantSpec, built: list[str] | None = None) -> str:
    if not spec.steps:
        return "-"
    if any(s.get("op") == "recipe" for s in spec.steps):  # the steps it gives on this catalog
        names = ", ".join(str(s.get("name")) for s in spec.steps if s.get("op") == "recipe")
        return f"recipe({names})" + (" -> " + " + ".join(built) if built else "")
    return " + ".join(
        str(s.get("op")) + ("(" + ", ".join(f"{k}={_short(v)}" for k, v in s.items() if k != "op") + ")"
                            if len(s) > 1 else "")
        for s in spec.steps)


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value
    return text if len(text) <= 24 else text[:21] + "..."


def variant_rows(catalog: Catalog, specs: list[VariantSpec]) -> list[dict[str, Any]]:
    """name, steps, function count, variant/native ratio and paper entry of each variant."""
    native = len(catalog.tools)
    rows = []
    for spec in specs:
        row: dict[str, Any] = {"name": spec.name, "steps": [dict(s) for s in spec.steps], "paper": spec.paper,
                               "construction": spec.description}
        try:
            codec = build_codec(catalog, spec)
            row["operators"] = [layer.op for layer in codec.layers]  # as built (a recipe expands on the catalog)
            row["lenient"] = {layer.op: layer.LENIENT for layer in codec.layers}  # what --control lenient executes
            row["functions"] = codec.function_count()
            row["ratio"] = round(codec.function_count() / native, 3) if native else None
        except ToolbiasError as exc:
            row["functions"] = None
            row["ratio"] = None
            row["error"] = exc.what
        rows.append(row)
    return rows


@click.command("variants")
@_catalog_option()
@click.option("--variant", "--variants", "variant", default="all", show_default=True,
              help="all, representative, comma-separated names, or spec files (toolbias's or the artifact's)")
@click.option("--json", "as_json", is_flag=True,
              help="print JSON: [{name, steps, construction, operators, lenient, functions, ratio, paper}]")
def variants_cmd(catalog_spec: str, variant: str, as_json: bool) -> None:
    """List registered variants with their operator steps and function counts."""
    catalog = load_catalog(catalog_spec)
    rows = variant_rows(catalog, resolve_variants(variant))
    if as_json:
        _echo_json(rows)
        return
    # one block per variant: name, size and paper entry, then its construction and steps
    click.echo(f"variants on {catalog.name} ({len(catalog.tools)} native functions)")
    by_name = {s.name: s for s in resolve_variants(variant)}
    width = max((len(r["name"]) for r in rows), default=4)
    for row in rows:
        size = "-" if row["functions"] is None else f"{row['functions']:>5} functions {row['ratio']:.2f}x"
        paper = f"  paper: {row['paper']}" if row["paper"] else ""
        click.echo(f"{click.style(row['name'].ljust(width), bold=True)}  {size}{paper}")
        if row.get("error"):
            click.echo("    " + click.style(f"error: {row['error']}", fg="red"))
        if row["construction"]:
            click.echo(f"    {row['construction']}")
        click.echo(f"    steps: {_steps_text(by_name[row['name']], row.get('operators'))}")

@click.command("shape")
@_catalog_option()
@click.option("--variant", "--variants", "variant", default=None,
              help="a registered variant name or a spec file")
@click.option("--spec", "spec_file", default=None, type=click.Path(dir_okay=False),
              help="a variant spec file (toolbias steps or the paper's {\"ops\": [...]})")
@click.option("--domain", default=None, help="write only this domain's tool list")
@click.option("-o", "--output", default=None, type=click.Path(dir_okay=False), help="file to write (default: stdout)")
@click.option("--format", "fmt", default="openai", show_default=True,
              type=click.Choice(["openai", "responses", "anthropic", "gemini", "mcp"]),
              help="tool format: OpenAI chat or Responses tools, Anthropic tools, Gemini "
                   "[{functionDeclarations}], or an MCP tools/list result")
def shape_cmd(catalog_spec: str, variant: str | None, spec_file: str | None, domain: str | None,
              output: str | None, fmt: str) -> None:
    """Write a variant's OpenAI tool list: a list for one --domain, else {domain: [tools]}.

    --format writes it as OpenAI Responses, Anthropic or Gemini tools, or an MCP tools/list result."""
    if bool(variant) == bool(spec_file):
        raise VariantError("give exactly one of --variant NAME or --spec FILE", where="toolbias shape")
    if output:  # checked before any work: never over a folder, a missing folder, a store or an input
        output_file(output, option="--output", inputs=(spec_file,))
    catalog = load_catalog(catalog_spec)
    specs = _specs(catalog, variant, (spec_file,) if spec_file else ())
    if len(specs) != 1:
        raise VariantError("shape writes one variant at a time", where="toolbias shape",
                           fix="name one variant, not a list")
    codec = build_codec(catalog, specs[0])

    def tools_of(name: str) -> Any:
        if fmt == "openai":
            return codec.schema(name)
        from ..catalog.formats import write_tools

        return write_tools(codec.tools_for(name), fmt)

    data: Any
    if domain is not None:
        catalog.domain(domain)  # unknown domains raise with the list of known ones
        names = [domain]
        data = tools_of(domain)
    elif len(catalog.domains) == 1:
        names = [catalog.domains[0].name]
        data = tools_of(names[0])
    else:
        names = [d.name for d in catalog.domains]
        data = {name: tools_of(name) for name in names}
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    if output:
        Path(output).write_text(text, encoding="utf-8")
        n = sum(len(codec.tools_for(name)) for name in names)
        click.echo(f"wrote {n} tools of variant '{codec.name}' to {output}", err=True)
    else:
        click.echo(text, nl=False)

@click.command("verify")
@_catalog_option()
@click.option("--variant", "--variants", "variant", default=None,
              help="all (default), representative, comma-separated names or spec files")
@click.option("--spec", "spec_files", multiple=True, type=click.Path(dir_okay=False),
              help="also verify a variant spec file (repeatable)")
@click.option("--probes", default=2, show_default=True, type=int,
              help="perturbed call sequences decoded per tool (closure check; 0 = off)")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--jobs", default=0, show_default=True, type=int,
              help="variants verified in parallel worker processes (0 = one per CPU, 1 = this process)")
@click.option("--json", "as_json", is_flag=True,
              help='print {"ok", "variants": [{"name", "checked", "failed", "examples"}]}')
def verify_cmd(catalog_spec: str, variant: str | None, spec_files: tuple[str, ...], probes: int, seed: int,
               jobs: int, as_json: bool) -> None:
    """Check that variants are equivalent to the native schema; exit 1 if any check fails."""
    from ..variants.verify import verify_all

    catalog = load_catalog(catalog_spec)
    selector = variant if variant is not None else ("all" if not spec_files else None)
    specs = _specs(catalog, selector, spec_files)
    if jobs <= 0:
        import os

        jobs = os.cpu_count() or 1
    results = verify_all(catalog, specs, probes=probes, seed=seed, jobs=jobs)
    ok = all(r.ok for r in results)
    if as_json:
        _echo_json({"ok": ok, "catalog": catalog.name, "variants": [r.to_dict() for r in results]})
    else:
        width = max((len(r.name) for r in results), default=4)
        for r in results:
            status = click.style("ok", fg="green") if r.ok else click.style("FAIL", fg="red")
            click.echo(f"{r.name:<{width}}  {status:>4}  {r.checked:>6} checked  {r.failed:>4} failed  "
                       f"{r.seconds:6.2f}s")
            for ex in r.examples:
                click.echo(f"    - {ex}")
        total = sum(r.checked for r in results)
        failed = sum(1 for r in results if not r.ok)
        click.echo(f"{len(results)} variants on {catalog.name}: {total} checks, "
                   f"{failed} variant(s) failed")
    if not ok:
        sys.exit(1)
