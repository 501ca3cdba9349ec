"""``toolbias mcp-proxy``: serve a variant of an MCP server's tools to any MCP client."""

from __future__ import annotations

import click

from ..variants.codec import Control


@click.command("mcp-proxy", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--variant", required=True, help="a registered variant name or a variant spec file (*.json)")
@click.option("--upstream-url", help="the upstream MCP server over streamable HTTP (instead of a command after --)")
@click.option("--listen", help="serve streamable HTTP at http://HOST:PORT[/PATH] (0: any free port) "
              "[default: serve over stdio]")
@click.option("--store", help="SQLite file: every client session is a live row [default: none]")
@click.option("--study", help="study name in the store [default: mcp-proxy|<variant>]")
@click.option("--model", default="mcp-client", show_default=True, help="the store's model column for the sessions")
@click.option("--control", type=click.Choice([c.value for c in Control]), default="strict", show_default=True,
              help="strict: off-schema calls come back as errors; lenient: unambiguous ones run")
@click.option("--instructions", is_flag=True, help="give the variant's instruction as the server's instructions")
@click.option("--start-timeout", type=click.FloatRange(min=0, min_open=True), default=30.0, show_default=True,
              help="seconds the upstream may take to start and list its tools")
@click.option("--call-timeout", type=click.FloatRange(min=0, min_open=True), default=30.0, show_default=True,
              help="seconds the upstream may take to answer one call")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def mcp_proxy_cmd(variant: str, upstream_url: str | None, listen: str | None, store: str | None, study: str | None,
                  model: str, control: str, instructions: bool, start_timeout: float, call_timeout: float,
                  command: tuple[str, ...]) -> None:
    """Serve VARIANT of an MCP server's tools (-- COMMAND ARGS..., or --upstream-url) to any MCP client."""
    import anyio

    from ..proxy.mcp_server import McpProxyConfig, parse_listen, serve

    if listen:
        parse_listen(listen)  # a bad URL is refused before the upstream starts
    config = McpProxyConfig(variant=variant, command=tuple(command), upstream_url=upstream_url,
                            control=Control(control), instructions=instructions, study=study, model=model,
                            start_timeout=start_timeout, call_timeout=call_timeout)

    def ready(served: object, url: str | None) -> None:
        tools = len(getattr(served, "tools", ()))
        click.echo(f"toolbias mcp-proxy: variant '{getattr(served, 'name', variant)}' ({tools} tools) over "
                   f"{config.upstream_url or ' '.join(command)}", err=True)
        if url:
            click.echo(f"READY {url}", err=True)

    proxy = anyio.run(serve, config, store, listen, ready)
    recorder = proxy.recorder
    if recorder is not None and recorder.unwritten:
        from ..errors import StoreError

        raise StoreError(f"{recorder.unwritten} sessions could not be written ({recorder.error})",
                         where=f"--store {store}", fix="free the store (another process holds it locked?)")
