"""The run's progress on resume and its first ETA (issue 24, item 5): stored episodes skipped on
resume count as done *and* their successes count as successes (a 100% run resumed shows 100%, not
the share played in this run); no ETA is drawn from a single episode, and the ETA is timed from the
end of the first episode, so its start-up (the model's check, forking) does not swell it."""

from __future__ import annotations

import io
import sqlite3
from pathlib import Path

from rich.console import Console

from toolbias.cli.display import ETA_MIN_EPISODES, ProgressLines, eta_seconds
from toolbias.store import Store
from toolbias.study.runner import Progress, StudyConfig, run_study


def test_a_resumed_oracle_run_counts_the_stored_successes(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    cfg = StudyConfig(model="oracle", catalog="builtin", variants="native,fully_merged", tasks=5)
    first = run_study(cfg, str(store))
    assert first.done == first.successes == 10 and first.skipped == 0
    with sqlite3.connect(store) as db:  # a run killed after 6 of its 10 episodes
        db.execute("DELETE FROM episodes WHERE rowid IN (SELECT rowid FROM episodes ORDER BY rowid DESC LIMIT 4)")
    seen: list[Progress] = []
    prog = run_study(cfg, str(store), on_progress=lambda p: seen.append(Progress(**vars(p))))
    assert prog.skipped == 6 and prog.done == 10
    assert prog.successes == 10  # today's code: 4 (only the 4 played in this run)
    assert seen and all(p.successes == p.done for p in seen)
    with Store(str(store)) as st:
        assert st.count("done") == 10


def test_a_resumed_run_with_nothing_left_reports_every_stored_success(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    cfg = StudyConfig(model="oracle", catalog="builtin", variants="native", tasks=4)
    run_study(cfg, str(store))
    again = run_study(cfg, str(store))
    assert (again.done, again.skipped, again.successes) == (4, 4, 4)


def test_no_eta_from_one_episode() -> None:
    console = Console(file=io.StringIO(), force_terminal=False, width=200)
    lines = ProgressLines(console, clock=lambda: 10.0)
    # the first episode took 9 s (start-up): today's code says 'eta 14 min 51 s' for 99 left
    lines(Progress(total=100, done=1, successes=1, started=1.0, first_done=10.0))
    assert console.file.getvalue().strip() == "episodes 1/100, success 1/1 (100%)"
    assert eta_seconds(Progress(total=100, done=ETA_MIN_EPISODES - 1, started=0.0), 5.0) is None


def test_the_eta_is_timed_from_the_first_episode_not_the_start_up() -> None:
    # start-up 30 s, then 10 episodes in 1 s after the first: 89 left take about 8.9 s, not 4 min
    p = Progress(total=100, done=11, successes=11, started=0.0, first_done=30.0)
    left = eta_seconds(p, 31.0)
    assert left is not None and abs(left - 8.9) < 1e-6
    # resumed: 50 stored, 11 played; the stored ones neither slow nor speed the estimate
    p = Progress(total=100, done=61, skipped=50, successes=61, started=0.0, first_done=30.0)
    left = eta_seconds(p, 31.0)
    assert left is not None and abs(left - 3.9) < 1e-6
