"""CLI: ``toolbias reproduce``: a paper's protocol run on the user's model, printed among the paper's models.

Each subcommand lives in its own module, imported only when it runs."""

from __future__ import annotations

import click

from . import LazyGroup

#: name -> ("module:attribute", short help), as :data:`toolbias.cli.COMMANDS`
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "schema": ("toolbias.cli.reproduce_schema:schema_cmd",
               "The schema-bias paper's protocol on your model, beside Figure 2's eleven models."),
    "selection": ("toolbias.cli.reproduce_selection:selection_cmd",
                  "Tool-selection bias: the BiasBusters protocol on your model, beside the paper's seven models."),
}


@click.group("reproduce", cls=LazyGroup, table=SUBCOMMANDS)
def reproduce() -> None:
    """Run a paper's protocol on your model and print it among the paper's models."""
