"""Reports count task episodes in SQL (toolbias.report.tally, Store.tallies) instead of loading
them: on a real store built by the oracle (then varied: failures, episodes without a success
value, repeats, a second model) every output equals the one computed row by row."""

from __future__ import annotations

import json
import re
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run_cli
from tests.support.stores import oracle_store, vary
from toolbias.report import tally
from toolbias.report.grid import DRILL_DOWN_KINDS, _drill_down_candidates
from toolbias.report.mitigation import mitigation_table, mitigation_table_from_store
from toolbias.store import Store, Tally, episodes_dataframe
from toolbias.study import stats


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return vary(oracle_store(tmp_path_factory.mktemp("tally") / "s.db", sample=12))


def row_tallies(st: Store, kind: str = "task") -> list[Tally]:
    """The row-by-row path: every finished episode read, then counted in Python."""
    return tally.tallies_of_rows(r.__dict__ for r in st.rows(kind=kind, with_record=False))


def test_sql_tallies_equal_the_row_by_row_count(store: Path) -> None:
    with Store(store) as st:
        sql, rows = st.tallies(), row_tallies(st)
        n = st.count("done")
    assert [t[:-2] for t in sql] == [t[:-2] for t in rows]  # first/last: rowids against row positions
    assert sum(t.episodes for t in sql) == n and len(sql) < n
    assert {t.model for t in sql} == {"oracle", "oracle-b"} and any(t.scored < t.episodes for t in sql)
    assert [t.first for t in sql] == sorted(t.first for t in sql)


def test_cell_tables_of_rows_and_of_tallies_are_equal(store: Path) -> None:
    with Store(store) as st:
        df = episodes_dataframe(st)
        counted = tally.cell_table(st.tallies())
    from_rows = stats.cell_table(df)
    assert list(from_rows.items()) == list(counted.items())  # the same cells, tasks and counts, in order
    assert any(0 < ok < n for cell in counted.values() for ok, n in cell.tasks.values())  # repeats disagree
    opts: dict[str, Any] = {"seed": 3, "n_resamples": 500}
    for fn in (stats.cell_stats, stats.variant_differences, stats.model_differences, stats.schema_form_gap):
        assert [asdict(x) for x in fn(df, **opts)] == [asdict(x) for x in fn(counted, **opts)], fn.__name__
    assert stats.difficulty_prediction(df, repeats=5, **opts) == stats.difficulty_prediction(counted, repeats=5, **opts)


def report(capsys: pytest.CaptureFixture[str], store: Path, *extra: str) -> dict[str, Any]:
    code, out, err = run_cli(capsys, "report", "--store", str(store), "--json", "--resamples", "500", *extra)
    assert code == 0, err
    result: dict[str, Any] = json.loads(out)
    return result


def html(capsys: pytest.CaptureFixture[str], store: Path, path: Path) -> str:
    code, _, err = run_cli(capsys, "report", "--store", str(store), "--html", str(path), "--resamples", "500")
    assert code == 0, err
    return re.sub(r"generated \d{4}-\d\d-\d\d \d\d:\d\d UTC", "generated NOW", path.read_text(encoding="utf-8"))


def test_reports_equal_the_row_by_row_path(store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    new = [report(capsys, store), report(capsys, store, "--study", "oracle|strict|base")]
    new_html = html(capsys, store, tmp_path / "new.html")
    monkeypatch.setattr(Store, "tallies", lambda self, kind="task", status="done": row_tallies(self, kind))
    old = [report(capsys, store), report(capsys, store, "--study", "oracle|strict|base")]
    assert new == old
    assert html(capsys, store, tmp_path / "old.html") == new_html
    whole = new[0]
    assert sum(c["episodes"] for c in whole["cells"]) == 12 * 13 * 3 * 2 * 2  # every episode, unscored included
    assert whole["differences"]["model_vs_model"] and whole["gap"] and whole["mitigation"]["rows"]
    assert any(c["failure_modes"] for c in whole["cells"])


def test_the_mitigation_table_of_tallies_equals_the_one_of_rows(store: Path) -> None:
    with Store(store) as st:
        rows = [r.__dict__ for r in st.rows(with_record=False)]
        sql = mitigation_table_from_store(st, n_resamples=500)
    assert sql is not None and sql.to_dict() == mitigation_table(rows, n_resamples=500).to_dict()  # type: ignore[union-attr]


def row_by_row_candidates(st: Store, *, per_mode: int, successes: int, study: str | None) -> tuple[list[Any], int]:
    """The drill-down's earlier choice: every finished episode read, the first of each slot kept."""
    chosen: list[Any] = []
    counts: dict[tuple[Any, ...], int] = {}
    total = 0
    for r in st.rows(kind=None, with_record=False):
        if r.kind not in DRILL_DOWN_KINDS or (study is not None and not r.study.startswith(study)):
            continue
        total += 1
        slot = (r.kind, r.model, r.variant, r.control, r.condition, r.failure_mode if not r.success else "+")
        cap = successes if r.success else per_mode
        if counts.get(slot, 0) < cap:
            counts[slot] = counts.get(slot, 0) + 1
            chosen.append(r)
    return chosen, total


@pytest.mark.parametrize(("per_mode", "successes", "study"), [(5, 1, None), (1, 0, None), (2, 3, "oracle|len")])
def test_drill_down_candidates_chosen_in_sql_equal_the_row_by_row_choice(
        store: Path, per_mode: int, successes: int, study: str | None) -> None:
    with Store(store) as st:
        sql, n = _drill_down_candidates(st, per_mode=per_mode, successes=successes, study=study)
        rows, total = row_by_row_candidates(st, per_mode=per_mode, successes=successes, study=study)
    fields = ("key", "kind", "model", "variant", "control", "condition", "task_id", "success", "failure_mode")
    assert [tuple(getattr(r, f) for f in fields) for r in rows] == [tuple(c) for c in sql]
    assert n == total and len(sql) < total
