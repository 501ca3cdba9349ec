"""CLI: `toolbias catalog` commands (filled in by its owner)."""

from __future__ import annotations

import click


def register(group: click.Group) -> None:
    """Add this module's commands to the top-level group."""
