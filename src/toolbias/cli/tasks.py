"""CLI: ``toolbias tasks generate`` - task files for any tool list (toolbias.study.taskgen)."""

from __future__ import annotations

import asyncio
import json

import click
from rich.console import Console

from ..errors import ToolbiasError
from .extra_body import extra_body_option, with_extra_body
from .options import base_url_option, model_option


@click.group("tasks")
def tasks() -> None:
    """Write task files (the --task-file format) for any tool list."""


@tasks.command("generate")
@click.option("--catalog", required=True, help="any catalog spec: mcp-config:FILE.json, tools:FILE, mcp:FILE, ...")
@model_option(required=True, help="the model that proposes tasks: openai:<model>, openai-responses:<model>, "
              "anthropic:<model>, local, local:PATH.gguf")
@base_url_option
@click.option("-o", "--output", required=True, help="the task file to write (JSONL, one task a line)")
@click.option("--domains", help="only these domains (comma list) [default: every domain]")
@click.option("--n", "per_domain", type=click.IntRange(min=1), default=10, show_default=True,
              help="tasks to keep per domain")
@click.option("--per-request", type=click.IntRange(min=1), default=5, show_default=True,
              help="tasks asked for in one request")
@click.option("--max-requests", type=click.IntRange(min=1), help="requests per domain at most [default: "
              "enough for --n at --per-request, three times over]")
@click.option("--max-calls", type=click.IntRange(min=1), default=3, show_default=True,
              help="gold calls per task at most")
@click.option("--temperature", type=float, default=0.7, show_default=True)
@click.option("--max-tokens", type=int, default=2048, show_default=True)
@extra_body_option()
def generate_cmd(catalog: str, model: str, base_url: tuple[str, ...], output: str, domains: str | None,
                 per_domain: int, per_request: int, max_requests: int | None, max_calls: int, temperature: float,
                 max_tokens: int, extra_body: str | None) -> None:
    """Have a model propose tasks (a query and its gold calls) for a catalog's tools; keep each only if its
    gold calls run without error on a fresh environment (a live MCP server from its fresh state)."""
    from ..catalog import load_catalog
    from ..providers import make_provider
    from ..providers.wrapper import wrap
    from ..study.defaults import parse_domains
    from ..study.taskgen import DomainResult, GenerateSettings, generate_tasks
    from .outputs import output_file

    output_file(output, option="--output", inputs=[catalog.partition(":")[2]])
    settings = GenerateSettings(per_domain=per_domain, per_request=per_request,
                                max_requests=max_requests or 3 * -(-per_domain // per_request),
                                max_calls=max_calls, temperature=temperature, max_tokens=max_tokens)
    cat = load_catalog(catalog)
    options = with_extra_body({"base_urls": list(base_url)} if base_url else {}, extra_body, model)
    provider = wrap(make_provider(model, **options), concurrency=1)
    err = Console(stderr=True)

    def progress(r: DomainResult) -> None:
        err.print(f"{r.domain}: request {r.requests}, {r.proposed} proposed, {len(r.kept)} kept", highlight=False)

    async def go() -> list[DomainResult]:
        try:
            await provider.check()
            return await generate_tasks(provider, cat, settings, domains=parse_domains(domains), on_request=progress)
        finally:
            await provider.aclose()

    results = asyncio.run(go())
    rows = [row for r in results for row in r.kept]
    for r in results:
        reasons = ", ".join(f"{n} {why}" for why, n in r.rejected.most_common())
        err.print(f"{r.domain}: kept {len(r.kept)} of {r.proposed} proposed in {r.requests} request(s)"
                  + (f"; refused: {reasons}" if reasons else "")
                  + (f"; check calls dropped from {r.checks_dropped} (results differ between replays)"
                     if r.checks_dropped else ""), highlight=False, markup=False)
    if not rows:
        raise ToolbiasError("no proposed task survived its checks; nothing written", where=catalog,
                            fix="see the reasons above; try another --model, a higher --max-requests or --max-calls")
    with open(output, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    click.echo(f"wrote {len(rows)} tasks to {output} (use: --catalog {catalog} --task-file {output})")
