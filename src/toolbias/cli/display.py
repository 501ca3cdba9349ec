"""What ``toolbias run`` shows while and after it plays: a progress bar with an ETA and a live
success count, then the study's finding in one sentence and where its HTML report is; and the
progress of ``toolbias select run``'s trials. Where stderr is not a terminal, plain lines."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

if TYPE_CHECKING:  # types only: a command that shows no finding or selection loads neither
    from ..report.finding import Finding
    from ..selection.records import SelectionRecord
    from ..store import Store
    from ..study.runner import Progress as RunProgress
    from ..study.runner import ProgressFn

#: episodes this run must have played before an ETA is shown: one episode's time (it carries the
#: start-up: the model's check, workers forking, a model loading) says little about the rest
ETA_MIN_EPISODES = 3


def eta_seconds(p: RunProgress, now: float) -> float | None:
    """Seconds left, from the episodes this run played (stored ones skipped on resume count as
    done, not as played), timed from the end of this run's first episode so its start-up does
    not count; None until :data:`ETA_MIN_EPISODES` were played, or when nothing is left."""
    ran, left = p.done - p.skipped, p.total - p.done
    if left <= 0 or ran < ETA_MIN_EPISODES:
        return None
    first = p.first_done
    if first is not None and now > first:
        return left * (now - first) / (ran - 1)
    return left * max(now - p.started, 1e-9) / ran


#: above this many episodes the finding is left to ``toolbias report`` (its bootstrap takes a while)
FINDING_MAX_EPISODES = 20_000


class ProgressLines:
    """Progress as plain lines, where stderr is a log file or a CI job rather than a terminal (a
    live bar shows nothing there until the end): one line at each tenth of the work, and one at
    least every ``every_s`` seconds in between."""

    def __init__(self, console: Console, every_s: float = 30.0,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.console, self.every_s, self.clock = console, every_s, clock
        self._tenth = -1
        self._last = clock()

    def due(self, done: int, total: int) -> bool:
        """Whether a line is due at ``done`` of ``total`` (and, if so, count it as printed)."""
        tenth = 10 * done // total if total else 0
        now = self.clock()
        if tenth == self._tenth and now - self._last < self.every_s:
            return False
        self._tenth, self._last = tenth, now
        return True

    def __call__(self, p: RunProgress) -> None:
        if not self.due(p.done, p.total):
            return
        now = self._last
        parts = [f"episodes {p.done}/{p.total}"]
        if p.done:
            parts.append(f"success {p.successes}/{p.done} ({100 * p.successes / p.done:.0f}%)")
        left = eta_seconds(p, now)
        if left is not None:
            parts.append(f"eta {_duration(left)}")
        self.console.print(", ".join(parts), highlight=False, soft_wrap=True)


def stdout_console() -> Console:
    """Rich console for stdout; piped output gets a wide page instead of 80 columns."""
    if sys.stdout.isatty() or os.environ.get("COLUMNS"):
        return Console()
    return Console(width=160)


def _duration(seconds: float) -> str:
    m, s = divmod(int(round(seconds)), 60)
    return f"{m} min {s:02d} s" if m else f"{s} s"


@contextmanager
def progress_bar(console: Console) -> Iterator[ProgressFn]:
    """A live bar: episodes done of the total, successes so far (count and rate), episodes per
    second, elapsed time and the estimated time left. Yields the runner's progress callback
    (:class:`ProgressLines` where the console is not a terminal)."""
    if not console.is_terminal:
        yield ProgressLines(console)
        return
    columns = (TextColumn("[bold]episodes"), BarColumn(), MofNCompleteColumn(),
               TextColumn("success {task.fields[succ]}"), TextColumn("{task.fields[rate]}"),
               TimeElapsedColumn(), TextColumn("eta {task.fields[eta]}"))
    with Progress(*columns, console=console, transient=False) as bar:
        task_id = bar.add_task("episodes", total=None, rate="", succ="-", eta="-")

        def on_progress(p: RunProgress) -> None:
            ran = p.done - p.skipped
            now = time.perf_counter()
            elapsed = max(now - p.started, 1e-9)
            left = eta_seconds(p, now)
            succ = f"{p.successes}/{p.done} ({100 * p.successes / p.done:.0f}%)" if p.done else "-"
            per_s = ran / elapsed
            rate = f"{per_s:.1f} ep/s" if per_s >= 1 else (f"{elapsed / ran:.0f} s/ep" if ran else "")
            bar.update(task_id, total=p.total, completed=p.done, rate=rate, succ=succ,
                       eta="-" if left is None else _duration(left))

        yield on_progress


@contextmanager
def trials_progress(console: Console, total: int, label: str) -> Iterator[Callable[[SelectionRecord], None]]:
    """Tool-selection trials still to come (stored ones are skipped): parsed, unparsed and
    failed answers so far, as a live bar, or :class:`ProgressLines` where the console is not a
    terminal. Yields a callback taking each finished trial's record."""
    counts = {"ok": 0, "unparsed": 0, "error": 0}
    if not console.is_terminal:
        lines, seen = ProgressLines(console), [0]

        def on_line(rec: SelectionRecord) -> None:
            counts[rec.status.value] += 1
            seen[0] += 1
            if lines.due(seen[0], total):
                console.print(f"{label} {seen[0]}/{total}: parsed {counts['ok']}, unparsed {counts['unparsed']}, "
                              f"errors {counts['error']}", highlight=False, soft_wrap=True)
        yield on_line
        return
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("parsed {task.fields[ok]}  unparsed {task.fields[unparsed]}  errors {task.fields[err]}"),
               TimeElapsedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=False) as bar:
        task = bar.add_task(label, total=total, ok=0, unparsed=0, err=0)

        def on_record(rec: SelectionRecord) -> None:
            counts[rec.status.value] += 1
            bar.update(task, advance=1, ok=counts["ok"], unparsed=counts["unparsed"], err=counts["error"])

        yield on_record


def finding_of(store: Store, study: str, baseline: str = "native") -> Finding | None:
    """The study's headline variant-minus-baseline difference (None: no paired difference, or a
    study too large to bootstrap here)."""
    rows: list[dict[str, Any]] = []
    for r in store.rows(study=study, status="done", with_record=False):
        if len(rows) == FINDING_MAX_EPISODES:
            return None
        rows.append(r.__dict__)
    from ..report.finding import study_finding

    return study_finding(rows, baseline=baseline)


def print_finding(console: Console, found: Finding | None, html: Path | None) -> None:
    """The finding as one plain sentence, then the report's path."""
    if found is not None:
        console.print(("finding: " if found.significant else "") + found.sentence(), highlight=False,
                      soft_wrap=True)
    if html is not None:
        console.print(f"report: {html}  (episodes, failure modes and intervals; open it in a browser)",
                      highlight=False, soft_wrap=True)
