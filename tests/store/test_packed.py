"""Packed records (toolbias.base.packed): every field round-trips, the oracle grid fits the size
budget, a store in the earlier layout (JSON text records) migrates and reads alike, and export
and report of a packed store equal those of the same run stored as earlier releases did."""

from __future__ import annotations

import json
import os
import re
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from toolbias.base.database import SCHEMA_VERSION
from toolbias.base.packed import FORMAT_ZLIB, MIN_SAMPLES
from toolbias.cli import cli
from toolbias.errors import StoreError
from toolbias.store import COLUMNS, EpisodeRow, Store, export, merge_stores
from toolbias.study.runner import StudyConfig, run_study

#: the issue's budget: bytes of store file per episode on the oracle grid
BUDGET = 1500


def row(i: int, *, study: str = "s", kind: str = "task", record: dict | None = None) -> EpisodeRow:
    rec = record if record is not None else {
        "task_id": f"t{i}", "messages": [{"role": "user", "content": f"question {i} \u00e9\u4e2d\U0001f600"}],
        "calls": [{"turn": 0, "tool_call": {"name": "f", "arguments": {"x": i, "y": [1.5, None, True]}}}],
        "gold": [{"tool": "f", "arguments": {"x": i}}], "flags": [], "empty": {}, "n": None}
    return EpisodeRow(key=f"k{study}{kind}{i}", study=study, kind=kind, model="m", settings_hash="h",
                      catalog="c", variant=f"v{i % 3}", task_id=f"t{i}", domain="d", control="strict",
                      condition="base", seed=0, status="done" if i % 5 else "infra_error",
                      success=None if i % 5 == 0 else bool(i % 2), failure_mode=None if i % 2 else "wrong_tool",
                      termination="answered", n_gold=1, n_executed=i % 4, n_rejections=i % 2, turns=2,
                      prompt_tokens=10 * i, completion_tokens=i, wall_s=0.25 * i, record=rec,
                      created=1_700_000_000.5 + i)


def raw(path: Path, sql: str) -> list:
    con = sqlite3.connect(path)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_every_field_round_trips_before_and_after_the_dictionary(tmp_path: Path) -> None:
    """One row a batch at first (packed without a dictionary, then repacked once the study has
    its dictionary), then a large batch: every field of every row reads back equal."""
    db = tmp_path / "s.db"
    rows = [row(i) for i in range(3 * MIN_SAMPLES)]
    rows.append(row(999, record={"bad": "\ud83d broken surrogate", "deep": [[[{"a": ""}]]]}))
    rows.append(row(7, kind="live", record={"live": {"calls": []}}))  # not a packed kind: JSON text
    with Store(db) as st:
        for r in rows[:MIN_SAMPLES // 2]:
            st.put_values([r.values()])
        assert st.packer._by_study == {}  # too few records for a dictionary yet
        st.put_values([r.values() for r in rows[MIN_SAMPLES // 2:]])
        got = {r.key: r for r in st.rows(status=None, kind=None)}
    assert set(got) == {r.key for r in rows}
    for r in rows:
        assert got[r.key] == r, r.key
    kinds = dict(raw(db, "SELECT kind, group_concat(DISTINCT typeof(record)) FROM episodes GROUP BY kind"))
    assert kinds == {"task": "blob", "live": "text"}
    # every packed record uses the study's dictionary, the first ones included (repacked)
    [(dict_id,)] = raw(db, "SELECT id FROM record_dicts")
    heads = {bytes(b)[:5] for (b,) in raw(db, "SELECT record FROM episodes WHERE kind='task'")}
    assert heads == {bytes([FORMAT_ZLIB]) + dict_id.to_bytes(4, "big")}


def test_a_missing_dictionary_is_a_clear_error(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with Store(db) as st:
        st.put_values([row(i).values() for i in range(MIN_SAMPLES)])
    con = sqlite3.connect(db)
    con.execute("DELETE FROM record_dicts")
    con.commit()
    con.close()
    with Store(db) as st, pytest.raises(StoreError, match="dictionary"):
        list(st.rows(status=None))


def oracle_grid(path: Path, *, pack: bool = True, tasks: int = 10) -> int:
    st = Store(path)
    st.pack_records = pack
    try:
        run_study(StudyConfig(model="oracle", variants="all", tasks=tasks), st)
        n = st.count(None)
        st.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        st.close()
    return n


@pytest.fixture(scope="module")
def grid(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    path = tmp_path_factory.mktemp("grid") / "packed.db"
    return path, oracle_grid(path)


def test_the_oracle_grid_fits_the_budget(grid: tuple[Path, int], tmp_path: Path) -> None:
    path, n = grid
    per_episode = os.path.getsize(path) / n
    assert n == 64 * 10 and per_episode <= BUDGET, per_episode
    plain = tmp_path / "plain.db"
    assert oracle_grid(plain, pack=False) == n
    assert os.path.getsize(plain) / n > 4 * per_episode  # the earlier layout: JSON text records


def as_previous_layout(src: Path, dst: Path) -> None:
    """``src`` as the previous release wrote it: the same rows with JSON text records, no
    dictionaries table, layout version 2."""
    with Store(src, readonly=True) as st, sqlite3.connect(dst) as out:
        st.db.backup(out)
        out.executemany("UPDATE episodes SET record=? WHERE key=?",
                        [(st.unpack_record(r), k) for k, r in st.db.execute("SELECT key, record FROM episodes")])
        out.execute("DROP TABLE record_dicts")
        out.execute("UPDATE meta SET value='2' WHERE key='schema_version'")
        out.execute("PRAGMA user_version = 2")
    out.close()
    assert raw(dst, "SELECT DISTINCT typeof(record) FROM episodes") == [("text",)]


@pytest.fixture
def previous(grid: tuple[Path, int], tmp_path: Path) -> Path:
    path = tmp_path / "previous.db"
    as_previous_layout(grid[0], path)
    return path


def test_previous_layout_migrates_keeps_its_rows_and_resumes(previous: Path) -> None:
    before = raw(previous, "SELECT * FROM episodes ORDER BY rowid")
    with Store(previous) as st:
        assert st.schema_version() == SCHEMA_VERSION
    assert raw(previous, "SELECT * FROM episodes ORDER BY rowid") == before  # nothing rewritten
    st = Store(previous)
    try:  # a resume replays nothing; another study adds packed rows beside the text ones
        prog = run_study(StudyConfig(model="oracle", variants="all", tasks=10), st)
        assert (prog.skipped, prog.done) == (640, 640)
        prog = run_study(StudyConfig(model="oracle", variants="native,fully_merged", tasks=40, study="more", seed=1), st)
        assert (prog.skipped, prog.done) == (0, 80)
        rows = list(st.rows())
    finally:
        st.close()
    assert len(rows) == 720 and all(r.record["messages"] for r in rows)
    types = dict(raw(previous, "SELECT study, group_concat(DISTINCT typeof(record)) FROM episodes GROUP BY 1"))
    assert types == {"oracle|strict|base": "text", "more": "blob"}


def test_export_equals_the_previous_layout_row_for_row(grid: tuple[Path, int], previous: Path,
                                                       tmp_path: Path) -> None:
    for fmt in ("jsonl", "csv"):
        a, b = tmp_path / f"new.{fmt}", tmp_path / f"old.{fmt}"
        assert export(grid[0], fmt, a) == export(previous, fmt, b) == grid[1]
        new, old = a.read_text(encoding="utf-8").splitlines(), b.read_text(encoding="utf-8").splitlines()
        assert new == old
    first = json.loads(new_line := (tmp_path / "new.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert set(first) == set(COLUMNS) and first["record"]["messages"], new_line[:80]


def report(path: Path, *extra: str) -> dict:
    res = CliRunner().invoke(cli, ["report", "--store", str(path), "--json", *extra], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    out.pop("store")
    return out


def test_report_equals_the_previous_layout(grid: tuple[Path, int], previous: Path, tmp_path: Path) -> None:
    new, old = report(grid[0]), report(previous)
    assert new == old and len(new["cells"]) == 64
    h1, h2 = tmp_path / "a.html", tmp_path / "b.html"
    CliRunner().invoke(cli, ["report", "--store", str(grid[0]), "--html", str(h1)], catch_exceptions=False)
    CliRunner().invoke(cli, ["report", "--store", str(previous), "--html", str(h2)], catch_exceptions=False)
    a = h1.read_text(encoding="utf-8").replace(str(grid[0]), "STORE").replace(grid[0].name, "STORE")
    b = h2.read_text(encoding="utf-8").replace(str(previous), "STORE").replace(previous.name, "STORE")
    # the header's "generated <minute>" may cross a minute between the two reports
    a, b = (re.sub(r"generated \d{4}-\d\d-\d\d \d\d:\d\d UTC", "generated NOW", x) for x in (a, b))
    assert a == b and "ep-" in a  # the drill-down shows (unpacked) records


def test_merge_repacks_shards_against_the_output(tmp_path: Path) -> None:
    parts = []
    for i in range(2):
        p = tmp_path / f"p{i}.db"
        with Store(p) as st:
            run_study(StudyConfig(model="oracle", variants="native,strip_descriptions", tasks=40, shard=(i, 2)), st)
        parts.append(p)
    merge_stores(parts, tmp_path / "all.db")
    with Store(parts[0]) as a, Store(parts[1]) as b:
        want = {r.key: r.record for s in (a, b) for r in s.rows()}
    with Store(tmp_path / "all.db") as m:
        got = {r.key: r.record for r in m.rows()}
    assert got == want and len(got) == 80
    assert raw(tmp_path / "all.db", "SELECT DISTINCT typeof(record) FROM episodes") == [("blob",)]


def row_by_row_dataframe(store, *, with_record: bool = False, kind: str | None = "task"):
    """The report's earlier read: every row through EpisodeRow (what the columnar read replaced)."""
    import pandas as pd

    s = store if isinstance(store, Store) else Store(store)
    rows = [r.__dict__ for r in s.rows(kind=kind, with_record=with_record)]
    df = pd.DataFrame(rows, columns=list(COLUMNS))
    return df if with_record else df.drop(columns=["record"])


@pytest.mark.parametrize("kind", ["task", "probe", None])
def test_the_columnar_dataframe_equals_the_row_by_row_one(grid: tuple[Path, int], kind: str | None) -> None:
    """Values and dtypes, for a kind with rows and for one with none (probes: none here)."""
    import pandas as pd

    from toolbias.store import episodes_dataframe

    with Store(grid[0], readonly=True) as st:
        new, old = episodes_dataframe(st, kind=kind), row_by_row_dataframe(st, kind=kind)
    pd.testing.assert_frame_equal(new, old)
    assert len(new) == (0 if kind == "probe" else grid[1])
