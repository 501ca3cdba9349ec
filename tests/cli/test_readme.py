"""README's two commands stay true: CI runs exactly README's test command."""

from __future__ import annotations

from tests.support.paths import ROOT


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = text.split("```bash", 1)[1].split("```", 1)[0]
    return [line.strip() for line in block.strip().splitlines()]


def test_readme_opens_with_two_commands():
    install_run, tests = readme_commands()
    assert install_run.endswith("toolbias run") and "[local]" in install_run
    assert "pytest" in tests


def test_ci_runs_the_readme_test_command():
    test_cmd = readme_commands()[1].split("&&")[-1].strip()
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert test_cmd in [line.strip() for line in ci]
