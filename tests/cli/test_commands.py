"""The command line as a table of lazily imported, module-level commands.

``toolbias --help`` lists every command from :data:`toolbias.cli.COMMANDS` without importing
one; each command is an importable module-level object whose own short help is the table's;
importing the CLI loads a handful of toolbias modules and none of matplotlib, selection or
training (start-up times are printed by ``python -m bench.bench_startup``, not asserted here).
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from toolbias.cli import COMMANDS, cli


def _command(target: str) -> click.Command:
    module, _, attr = target.partition(":")
    command = getattr(importlib.import_module(module), attr)
    assert isinstance(command, click.Command)
    return command


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_command_is_a_module_level_object_whose_help_is_the_tables(name: str) -> None:
    target, short = COMMANDS[name]
    command = _command(target)
    assert command.name == name
    assert command.get_short_help_str(limit=1000) == short
    result = CliRunner().invoke(command, ["--help"])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output


def test_top_level_help_lists_every_command_in_order() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    listed = [line.split()[0] for line in result.output.split("Commands:")[1].splitlines() if line.strip()]
    assert listed == sorted(COMMANDS)


def _loaded_after(code: str) -> dict[str, object]:
    probe = (f"import sys\n{code}\n"
             "mods = sorted(m for m in sys.modules if m == 'toolbias' or m.startswith('toolbias.'))\n"
             "print(json.dumps({'toolbias': mods, 'matplotlib': 'matplotlib' in sys.modules}))")
    out = subprocess.run([sys.executable, "-c", "import json\n" + probe], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_importing_the_cli_loads_little() -> None:
    loaded = _loaded_after("import toolbias.cli")
    mods = loaded["toolbias"]
    assert isinstance(mods, list)
    assert len(mods) <= 40, mods
    assert not loaded["matplotlib"]
    assert not any(m.startswith(("toolbias.selection", "toolbias.training", "toolbias.report")) for m in mods), mods


def test_listing_commands_imports_no_command_module() -> None:
    loaded = _loaded_after("import toolbias.cli\n"
                           "try:\n    toolbias.cli.main(['--help'])\nexcept SystemExit:\n    pass")
    mods = loaded["toolbias"]
    assert isinstance(mods, list)
    assert not [m for m in mods if m.startswith("toolbias.cli.")], mods


def test_run_help_loads_no_selection_training_or_matplotlib() -> None:
    loaded = _loaded_after("import toolbias.cli\n"
                           "try:\n    toolbias.cli.main(['run', '--help'])\nexcept SystemExit:\n    pass")
    mods = loaded["toolbias"]
    assert isinstance(mods, list)
    assert not loaded["matplotlib"]
    assert not any(m.startswith(("toolbias.selection", "toolbias.training")) for m in mods), mods


def test_an_unknown_command_is_a_usage_error() -> None:
    result = CliRunner().invoke(cli, ["no-such-command"])
    assert result.exit_code == 2
    assert "No such command" in result.output


def test_every_protocol_option_offers_exactly_the_protocols_the_study_knows() -> None:
    from toolbias.cli.options import PROTOCOLS
    from toolbias.study.paper_protocol import Protocol

    assert PROTOCOLS == tuple(p.value for p in Protocol)
