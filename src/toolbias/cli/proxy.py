"""``toolbias proxy``: serve a variant to the model and native calls to any agent."""

from __future__ import annotations

import click

from ..variants.codec import Control
from .options import protocol_option


@click.command("proxy")
@click.option("--upstream", required=True, multiple=True,
              help="the model server's OpenAI-compatible base URL (repeat to share load)")
@click.option("--variant", required=True, help="a registered variant name or a variant spec file (*.json)")
@click.option("--catalog", help="build the variant on this catalog's domain that holds the agent's tools "
              "(its classes and cut points) instead of on the request's own tool list")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=int, default=8400, show_default=True, help="0: any free port")
@click.option("--store", help="SQLite file for every conversation's decoded calls [default: none]")
@click.option("--study", help="study name in the store [default: proxy|<variant>]")
@click.option("--model", help="upstream model name [default: the one each request names]")
@click.option("--api-key", envvar="OPENAI_API_KEY", help="upstream key [env OPENAI_API_KEY]")
@click.option("--proxy-key", envvar="TOOLBIAS_PROXY_KEY",
              help="clients must send 'Authorization: Bearer KEY' (every route but /health) "
                   "[env TOOLBIAS_PROXY_KEY; default: no key, and a warning beyond loopback]")
@click.option("--control", type=click.Choice([c.value for c in Control]), default="strict", show_default=True,
              help="strict: off-schema calls go back to the model as errors; lenient: unambiguous ones run")
@click.option("--instructions", is_flag=True, help="append the variant's instruction to system messages")
@click.option("--max-rounds", type=click.IntRange(min=1), default=16, show_default=True,
              help="upstream requests per agent turn (protocol replies and rejections)")
@click.option("--retries", type=click.IntRange(min=1), default=3, show_default=True,
              help="attempts per upstream request on transient errors")
@click.option("--timeout", type=float, default=120.0, show_default=True, help="seconds per upstream request")
@protocol_option(
              help="paper: behave as the schema-bias artifact's proxy (toolschema/proxy.py); --variant is then "
                   "one of its operators (merge, split, ...) or the paper variant it stands for (fully_merged)")
@click.option("--paper-protocol", type=click.Choice(["feedback", "nofeedback"]), default="feedback",
              show_default=True, help="under --protocol paper: feedback answers a refused call with an error and "
              "asks again; nofeedback (the paper's real-benchmark runs) drops it, at most 8 model calls per turn")
@click.option("--classes", "classes_file", help="under --protocol paper: JSON {tool: class} [default: the name's "
              "prefix before '_']")
@click.option("--cuts", "cuts_file", help='under --protocol paper: JSON {"tool.param": cut} for the interval split')
def proxy_cmd(upstream: tuple[str, ...], variant: str, catalog: str | None, host: str, port: int,
              store: str | None, study: str | None, model: str | None, api_key: str | None,
              proxy_key: str | None, control: str, instructions: bool, max_rounds: int, retries: int,
              timeout: float, protocol: str, paper_protocol: str, classes_file: str | None,
              cuts_file: str | None) -> None:
    """Serve VARIANT to the model at --upstream; agents connect here and see native tools."""
    from ..proxy import ProxyConfig, ProxyServer, exposure_warning

    paper: dict[str, dict[str, object]] = {}
    for key, path in (("paper_classes", classes_file), ("paper_cuts", cuts_file)):
        if path:
            from ..base.jsonfile import read_json

            data = read_json(path)
            if not isinstance(data, dict):
                raise click.BadParameter(f"{path} must hold a JSON object", param_hint="--" + key[6:])
            paper[key] = data
    config = ProxyConfig(upstream=upstream, variant=variant, catalog=catalog, model=model, api_key=api_key,
                         control=Control(control), instructions=instructions, max_rounds=max_rounds,
                         retries=retries, timeout=timeout, study=study, client_key=proxy_key or None,
                         protocol=protocol, paper_feedback=paper_protocol, **paper)  # type: ignore[arg-type]
    server = ProxyServer(config, host=host, port=port, store=store, log_level="info")
    from ..providers.openai import _redact

    click.echo(f"toolbias proxy: variant '{server.app.proxy.variant.name}' -> "
               f"{', '.join(_redact(u) for u in upstream)}", err=True)
    warning = exposure_warning(host, config.client_key)
    if warning:
        click.echo(warning, err=True)
    click.echo(f"READY {server.base_url}", err=True)
    server.run()
    recorder = server.app.proxy.recorder
    if recorder is not None and recorder.unwritten:
        from ..errors import StoreError

        raise StoreError(f"{recorder.unwritten} conversations could not be written ({recorder.error})",
                         where=f"--store {store}", fix="free the store (another process holds it locked?) and "
                         "keep the proxy running until /health says ok before stopping it")
