"""A results file written by the release before the shared store layer (tests/store/data/
release_store.db, made by make_release_store.py) opens, migrates, reports exactly as that
release reported it, and resumes without replaying anything."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from toolbias.base.database import SCHEMA_VERSION
from toolbias.cli import cli
from toolbias.errors import StoreError
from toolbias.selection import SelectionStore
from toolbias.store import Store
from toolbias.study.runner import StudyConfig, run_study

DATA = Path(__file__).parent / "data"
EXPECTED = json.loads((DATA / "release_store.json").read_text())


@pytest.fixture
def old_store(tmp_path: Path) -> Path:
    path = tmp_path / "old.db"
    shutil.copy(DATA / "release_store.db", path)
    return path


def invoke(*args: str) -> dict:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def report(path: Path) -> dict:
    out = invoke("report", "--store", str(path), "--json", *EXPECTED["report_args"])
    out.pop("store")
    return out


def layout(path: Path) -> tuple[int, str | None, set[str]]:
    con = sqlite3.connect(path)
    try:
        version = con.execute("PRAGMA user_version").fetchone()[0]
        meta = con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        tables = {n for (n,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    finally:
        con.close()
    return version, meta[0] if meta else None, tables


def test_the_fixture_is_in_the_previous_layout(old_store: Path) -> None:
    version, meta, tables = layout(old_store)
    assert (version, meta) == (0, "1")
    assert {"episodes", "studies", "selection_records", "selection_filter"} <= tables
    assert "study_variants" not in tables


def test_opening_migrates_and_keeps_every_row(old_store: Path) -> None:
    con = sqlite3.connect(old_store)
    before = {t: con.execute(f"SELECT * FROM {t} ORDER BY rowid").fetchall()  # noqa: S608
              for t in ("studies", "episodes", "selection_records", "selection_filter")}
    con.close()
    with Store(old_store) as st:
        assert st.schema_version() == SCHEMA_VERSION
        assert st.study_meta() == {}  # written before studies stored their metadata
    version, meta, tables = layout(old_store)
    assert (version, meta) == (SCHEMA_VERSION, str(SCHEMA_VERSION))
    assert {"study_catalogs", "study_variants"} <= tables
    con = sqlite3.connect(old_store)
    after = {t: con.execute(f"SELECT * FROM {t} ORDER BY rowid").fetchall() for t in before}  # noqa: S608
    con.close()
    assert after == before and all(before.values())
    with Store(old_store) as st:  # a second open finds nothing to do
        assert st.schema_version() == SCHEMA_VERSION


def test_reports_equal_the_release_reports(old_store: Path) -> None:
    expected = dict(EXPECTED["report"])
    expected.pop("store")
    got = report(old_store)
    assert got.pop("variant_steps") == {}  # (added since: what the studies stored; these stored nothing)
    for table in ("merge_encodings", "convention_mixture", "class_controls", "tau2_bench"):  # (added since: Tables 6-9)
        assert got.pop(table) == []  # the release's studies ran none of their arms
    assert got.pop("live") == []  # (added since: live conversations through toolbias proxy; the release had none)
    # Figure 3's x-axis is now the paper's query-weighted mean of per-domain ratios (issue 13), not the
    # whole-catalog count ratio the release printed: same variants, native still 1
    ratios, then = got.pop("function_ratios"), expected.pop("function_ratios")
    assert set(ratios) == set(then) and ratios["native"] == 1.0 and 0 < ratios["fully_merged"] < 1
    # (issue 24: a variant without a ratio is one that cannot be rebuilt on the catalog, the registry's included)
    assert got.pop("notes") == [n.replace("is not in the registry", "cannot be rebuilt on this catalog")
                                for n in expected.pop("notes")]
    assert got == expected


def test_selection_metrics_equal_the_release_metrics(old_store: Path) -> None:
    """The same numbers for every group; labels (and keys) that tool selection added since (its
    groups now name sampling and prompt settings) may extend what the release printed."""
    now = invoke("select", "metrics", "--store", str(old_store), "--json")["groups"]
    then = EXPECTED["select_metrics"]["groups"]
    assert len(now) == len(then)
    for label, old in then.items():
        [new] = [g for lab, g in now.items() if lab == label or lab.startswith(label + " | ")]
        assert extends(new, {k: v for k, v in old.items() if k != "label"}), label


def extends(new: object, old: object) -> bool:
    """``new`` holds every key of ``old`` (recursively) with the same value; it may hold more."""
    if isinstance(old, dict):
        return isinstance(new, dict) and all(k in new and extends(new[k], v) for k, v in old.items())
    return new == old


def test_read_only_open_of_an_unmigrated_file(old_store: Path) -> None:
    st = SelectionStore.open_existing(old_store)
    assert st is not None
    with st:
        assert len(st.records()) == 40 and len(st.filter_rows()) == 2
    assert layout(old_store)[:2] == (0, "1")  # never written


def test_resume_replays_nothing_and_then_stores_metadata(old_store: Path, tmp_path: Path) -> None:
    """Episode keys are unchanged: the release's oracle study resumes with every episode
    skipped. The resumed run stores the study's metadata, so the spec-file variant, for which
    the release could not compute a function-count ratio, now has one."""
    spec = tmp_path / "my_merge.json"
    spec.write_text(json.dumps({"name": "my_merge", "steps": [{"op": "merge"}],
                                "description": "a merge given as a spec file"}))
    cfg = StudyConfig(model="oracle", variants=f"native,strip_descriptions,fully_merged,{spec}", tasks=3,
                      workers=1)
    prog = run_study(cfg, old_store)
    assert (prog.total, prog.skipped, prog.done) == (12, 12, 12)
    with Store(old_store) as st:
        meta = st.study_meta()["oracle|strict|base"]
    assert set(meta.variants) == {"native", "strip_descriptions", "fully_merged", "my_merge"}
    assert meta.variants["my_merge"].steps == [["merge", {}]]
    ratios = report(old_store)["function_ratios"]
    old = EXPECTED["report"]["function_ratios"]
    # (Figure 3's x-axis is the paper's query-weighted per-domain ratio since the release: compared as sets)
    assert "my_merge" not in old and ratios["my_merge"] == pytest.approx(ratios["fully_merged"])
    assert set(ratios) == set(old) | {"my_merge"} and ratios["native"] == 1.0
    assert report(old_store)["variant_steps"] == {"native": [], "strip_descriptions": [["strip", {}]],
                                                  "fully_merged": [["merge", {}]], "my_merge": [["merge", {}]]}


def test_a_file_from_a_newer_toolbias_is_refused(old_store: Path) -> None:
    con = sqlite3.connect(old_store)
    con.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    con.commit()
    con.close()
    with pytest.raises(StoreError, match="schema version"):
        Store(old_store)


def test_a_selection_only_file_migrates(old_store: Path) -> None:
    """A file the previous selection store wrote on its own (no meta table, no episodes)."""
    con = sqlite3.connect(old_store)
    for table in ("meta", "studies", "episodes"):
        con.execute(f"DROP TABLE {table}")
    con.commit()
    con.close()
    with SelectionStore(old_store) as st:
        assert st.schema_version() == SCHEMA_VERSION and len(st.records()) == 40
    assert layout(old_store)[:2] == (SCHEMA_VERSION, str(SCHEMA_VERSION))
    assert len(invoke("select", "metrics", "--store", str(old_store), "--json")["groups"]) == 3
