"""``toolbias run`` where stderr is not a terminal (a log, a CI job): progress as plain lines,
at each tenth of the work and at least every 30 s, instead of a live bar that shows nothing."""

from __future__ import annotations

import io
import re
from pathlib import Path

from click.testing import CliRunner
from rich.console import Console

from toolbias.cli import cli
from toolbias.cli.display import ProgressLines
from toolbias.study.runner import Progress


def _lines(console: Console) -> list[str]:
    assert isinstance(console.file, io.StringIO)
    return console.file.getvalue().splitlines()


def test_a_line_at_each_tenth_and_after_a_quiet_spell() -> None:
    console = Console(file=io.StringIO(), force_terminal=False, width=200)
    now = [100.0]
    lines = ProgressLines(console, every_s=30.0, clock=lambda: now[0])
    for done in range(41):  # 40 episodes: a new tenth every 4
        lines(Progress(total=40, done=done, successes=done // 2, started=90.0))
    out = _lines(console)
    assert len(out) == 11
    assert out[0] == "episodes 0/40"
    assert out[1] == "episodes 4/40, success 2/4 (50%), eta 1 min 30 s"  # 4 played in 10 s, 36 left
    assert out[-1] == "episodes 40/40, success 20/40 (50%)"
    more = Progress(total=80, done=44, successes=22, started=90.0)  # a study that grew: tenth 5
    lines(more)
    lines(Progress(total=80, done=45, successes=22, started=90.0))  # same tenth, no time passed: quiet
    assert len(_lines(console)) == 12
    now[0] += 31.0
    lines(Progress(total=80, done=46, successes=23, started=90.0))  # same tenth, 31 s later: a line
    assert _lines(console)[-1].startswith("episodes 46/80, success 23/46 (50%), eta ")


def test_eta_counts_only_episodes_played_in_this_run() -> None:
    console = Console(file=io.StringIO(), force_terminal=False, width=200)
    lines = ProgressLines(console, clock=lambda: 110.0)
    # 50 stored episodes skipped, 10 played in 10 s: 40 left take 40 s
    lines(Progress(total=100, done=60, skipped=50, successes=60, started=100.0))
    assert _lines(console) == ["episodes 60/100, success 60/60 (100%), eta 40 s"]


def test_run_in_a_log_prints_progress_lines(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["run", "--model", "oracle", "--variants", "native,fully_merged", "--tasks", "5",
                                   "--store", str(tmp_path / "s.db")])
    assert res.exit_code == 0, res.output
    progress = [ln for ln in res.output.splitlines() if ln.startswith("episodes ")]
    assert progress and progress[-1] == "episodes 10/10, success 10/10 (100%)"
    assert all(re.fullmatch(r"episodes \d+/10(, success \d+/\d+ \(\d+%\))?(, eta .+)?", ln) for ln in progress)
