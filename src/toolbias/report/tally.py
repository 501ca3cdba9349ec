"""A store's task episodes counted, not loaded: what a report reads instead of every row.

A report's statistics need, per cell (model, variant, control, condition), each task's
successes and episodes and the cell's failure-mode counts (:class:`~toolbias.study.stats.CellTasks`);
its other sections need which studies, catalogs and domains the tasks come from. SQLite counts
the episodes per study, catalog, domain, cell, task and failure mode (:meth:`Store.tallies
<toolbias.store.Store.tallies>`), in the order they were stored, so a million episodes are read
as a few hundred thousand tallies and every number equals the one computed row by row
(:func:`tallies_of_rows` is that row-by-row path, kept for episodes given as rows and for tests).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..store import TALLY_KEYS, Tally
from ..study.stats import CellTable, CellTasks


def tallies_of_rows(rows: Iterable[Mapping[str, Any]]) -> list[Tally]:
    """What :meth:`Store.tallies <toolbias.store.Store.tallies>` counts, from finished episodes
    given as mappings (row by row, in their order; ``first``/``last`` are row positions)."""
    out: dict[tuple[Any, ...], list[Any]] = {}
    for i, r in enumerate(rows):
        key = tuple(r.get(k) for k in TALLY_KEYS)
        success = r.get("success")
        counts = out.get(key)
        if counts is None:
            counts = out[key] = [0, 0, 0, i, i]
        counts[0] += 1
        counts[1] += success is not None
        counts[2] += bool(success)
        counts[4] = i
    return [Tally(*key, *counts) for key, counts in out.items()]


def select(tallies: Iterable[Tally], study: str | None = None, *, prefix: bool = False) -> list[Tally]:
    """The tallies of ``study`` (None: all; ``prefix``: of every study whose name starts with it)."""
    if study is None:
        return list(tallies)
    return [t for t in tallies if (t.study.startswith(study) if prefix else t.study == study)]


def cell_table(tallies: Iterable[Tally], *, scored_only: bool = False) -> CellTable:
    """Per cell, in the order cells first appear: tasks' successes and episodes and failure modes
    (``scored_only``: only episodes with a success value, as the mitigation tables count)."""
    out = CellTable()
    for t in tallies:
        n = t.scored if scored_only else t.episodes
        if not n:
            continue
        key = (t.model, t.variant, t.control, t.condition)
        cell = out.get(key)
        if cell is None:
            cell = out[key] = CellTasks()
        cell.add(t.task_id, t.successes, n, t.failure_mode)
    return out


def tasks_per_domain(tallies: Iterable[Tally]) -> dict[str, float]:
    """Domain -> its distinct tasks, domains sorted (the weights of Figure 3's x-axis)."""
    tasks: dict[str, set[str]] = {}
    for t in tallies:
        tasks.setdefault(str(t.domain), set()).add(t.task_id)
    return {d: float(len(tasks[d])) for d in sorted(tasks)}


def task_domains(tallies: Sequence[Tally], *, scored_only: bool = False) -> dict[str, str]:
    """Task id -> the domain of its last stored episode."""
    chosen = [t for t in tallies if (t.scored if scored_only else t.episodes)]
    return {str(t.task_id): str(t.domain) for t in sorted(chosen, key=lambda t: t.last)}


def episodes(tallies: Iterable[Tally]) -> int:
    return sum(t.episodes for t in tallies)


__all__ = ["cell_table", "episodes", "select", "tallies_of_rows", "task_domains", "tasks_per_domain"]
