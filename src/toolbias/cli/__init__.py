"""The ``toolbias`` command: a thin layer over the Python API.

Each command family lives in its own module exposing ``register(group)``. User
errors (:class:`~toolbias.errors.ToolbiasError`) print as a message, never a traceback.
"""

from __future__ import annotations

import importlib
import json
import sys

import click

from ..errors import ToolbiasError

#: command modules, in help order
COMMAND_MODULES = ("catalog", "variants", "run", "report", "select", "train", "recommend", "proxy")


@click.group(context_settings={"help_option_names": ["-h", "--help"], "auto_envvar_prefix": "TOOLBIAS"})
@click.version_option(package_name="toolbias")
def cli() -> None:
    """Measure and mitigate interface bias in tool-using LLM agents."""


for _name in COMMAND_MODULES:
    importlib.import_module(f"{__name__}.{_name}").register(cli)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    try:
        cli.main(args=args, standalone_mode=False)
    except ToolbiasError as exc:
        if "--json" in args:  # a script asked for JSON: the error comes as JSON on stdout too
            click.echo(json.dumps({"error": exc.to_dict()}))
        click.echo(f"error: {exc.render()}", err=True)
        sys.exit(2)
    except click.exceptions.Abort:  # click's form of Ctrl-C
        click.echo("interrupted: finished results are kept", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("interrupted: finished results are kept", err=True)
        sys.exit(130)
