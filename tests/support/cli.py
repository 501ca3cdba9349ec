"""Running the ``toolbias`` command in process, the way a user's shell would."""

from __future__ import annotations

import pytest


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``toolbias ARGV...`` through :func:`toolbias.cli.main`: (exit status, stdout, stderr)."""
    from toolbias.cli import main

    try:
        main(list(argv))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err
