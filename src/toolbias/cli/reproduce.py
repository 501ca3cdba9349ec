"""CLI: ``toolbias reproduce ...``, a paper's protocol run on the user's model and set in the paper's tables.

Each subcommand lives in its own module, listed in :data:`SUBCOMMANDS` and imported only when it runs
(the same lazy group as the top-level commands, :class:`toolbias.cli.LazyGroup`): ``selection``
(:mod:`.reproduce_selection`, the BiasBusters tool-selection study). Another subcommand (``schema``)
adds one line to the table and its own module.
"""

from __future__ import annotations

import click

from . import LazyGroup

#: subcommand -> ("module:attribute", short help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "selection": ("toolbias.cli.reproduce_selection:selection_cmd",
                  "Tool-selection bias: the BiasBusters protocol on your model, beside the paper's seven models."),
}


class ReproduceGroup(LazyGroup):
    table = SUBCOMMANDS


@click.group("reproduce", cls=ReproduceGroup)
def reproduce() -> None:
    """Run a paper's protocol on your model and place it in the paper's tables."""
