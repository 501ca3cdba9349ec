"""The ``toolbias`` command: a thin layer over the Python API.

Each command family lives in its own module, its commands defined at module level
(importable and testable alone) and listed in :data:`COMMANDS`, loaded only when run. User
errors (:class:`~toolbias.errors.ToolbiasError`) print as a message, never a traceback.
"""

from __future__ import annotations

import importlib
import json
import sys
from typing import Any

import click

from ..errors import ToolbiasError

#: every top-level command: name -> ("module:attribute", the short help ``toolbias --help`` shows).
#: A command's module is imported only when that command runs (or its own ``--help`` is asked), so
#: start-up loads click and this table; tests/cli checks each short help against its command's.
COMMANDS: dict[str, tuple[str, str]] = {
    "catalog": ("toolbias.cli.catalog:catalog",
                'Inspect native tool catalogs (the built-in one or imported ones).'),
    "variants": ("toolbias.cli.variants:variants_cmd",
                 'List registered variants with their operator steps and function counts.'),
    "shape": ("toolbias.cli.variants:shape_cmd",
              "Write a variant's OpenAI tool list: a list for one --domain, else {domain: [tools]}."),
    "verify": ("toolbias.cli.variants:verify_cmd",
               'Check that variants are equivalent to the native schema; exit 1 if any check fails.'),
    "run": ("toolbias.cli.run:run_cmd",
            'Run a study: a model on every chosen variant x task.'),
    "merge": ("toolbias.cli.run:merge_cmd",
              'Merge shard stores of one study into one store.'),
    "export": ("toolbias.cli.run:export_cmd",
               'Export finished episodes for pandas and friends.'),
    "report": ("toolbias.cli.report:report_cmd",
               "Report a study: model x variant grid with 95% intervals and failure modes, paired differences, schema-form gap, probes, difficulty prediction, and the paper's tables whose arms were run (Table 9: tau2-bench, in process and imported)."),
    "probe": ("toolbias.cli.report:probe_cmd",
              'Compliance probes: single-operation instructions per variant (paper Table 10).'),
    "select": ("toolbias.cli.select:select",
               'Tool-selection bias among functionally equivalent tools (BiasBusters).'),
    "train-data": ("toolbias.cli.train:train_data",
                   'Write SFT traces (TRL conversational format with tools) from turn-by-turn oracle episodes.'),
    "train-sft": ("toolbias.cli.train:train_sft",
                  "LoRA SFT on `toolbias train-data` traces with the paper's settings (needs toolbias[train], peft)."),
    "train-grpo": ("toolbias.cli.train:train_grpo",
                   "GRPO in the multi-turn environment with the paper's settings (needs toolbias[train])."),
    "recommend": ("toolbias.cli.recommend:recommend_cmd",
                  "Estimate candidate variants' success on a small paired sample, rank them and pick one."),
    "tasks": ("toolbias.cli.tasks:tasks",
              'Write task files (the --task-file format) for any tool list.'),
    "reproduce": ("toolbias.cli.reproduce:reproduce",
                  "Run a paper's protocol on your model and print it among the paper's models."),
    "proxy": ("toolbias.cli.proxy:proxy_cmd",
              'Serve VARIANT to the model at --upstream; agents connect here and see native tools.'),
    "mcp-proxy": ("toolbias.cli.mcp_proxy:mcp_proxy_cmd",
                  "Serve VARIANT of an MCP server's tools (-- COMMAND ARGS..., or --upstream-url) to any MCP client."),
}


class LazyGroup(click.Group):
    """A click group whose commands are a table like :data:`COMMANDS` (the default), each imported on
    first use; a command group of its own passes ``table=``."""

    def __init__(self, *args: Any, table: dict[str, tuple[str, str]] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.table = COMMANDS if table is None else table

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.table, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        entry = self.table.get(cmd_name)
        if entry is None:
            return None
        module, _, attr = entry[0].partition(":")
        command: click.Command = getattr(importlib.import_module(module), attr)
        self.commands[cmd_name] = command
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list from the table's short help: listing commands imports none of them."""
        names = self.list_commands(ctx)
        if names:
            limit = formatter.width - 6 - max(map(len, names))  # as click.Group.format_commands
            # a command not yet imported shows its table help, worded by click as its own would be
            rows = [(name, (self.commands.get(name) or click.Command(name, help=self.table[name][1]))
                     .get_short_help_str(limit)) for name in names]
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"],
                                              "auto_envvar_prefix": "TOOLBIAS"})
@click.version_option(package_name="toolbias")
def cli() -> None:
    """Measure and mitigate interface bias in tool-using LLM agents."""


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
