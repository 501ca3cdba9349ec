"""``python -m toolbias``: the command line."""

from .cli import main

main()
