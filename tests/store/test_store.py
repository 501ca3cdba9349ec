"""The SQLite store and the runner: resume, config change, shards and merge, export."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace

import pandas as pd
import pytest

from tests.support.catalogs import mini_catalog
from toolbias.errors import StoreError
from toolbias.providers.scripted import ScriptedProvider
from toolbias.report import ReportSettings, build_report, dumps
from toolbias.store import (
    COLUMNS,
    Store,
    episode_key,
    episodes_dataframe,
    export,
    merge_stores,
    record_json,
    stable_hash,
)
from toolbias.study.runner import StudyConfig, build_study, run_study, sample_tasks

CAT = mini_catalog()


def study(cfg=None, model=None, **kw):
    cfg = cfg or StudyConfig(model="oracle", variants="native,strip_descriptions", concurrency=2, **kw)
    return build_study(cfg, model=model, catalog=CAT)


def test_run_then_resume_skips_finished(tmp_path):
    db = tmp_path / "s.db"
    p1 = run_study(study(), db)
    assert p1.total == 16 and p1.done == 16 and p1.successes == 16 and p1.skipped == 0
    p2 = run_study(study(), db)
    assert p2.skipped == 16 and p2.successes == 16  # a resume counts the stored successes (issue 24 item 5)
    with Store(db) as s:
        assert s.count() == 16
        assert sqlite3.connect(db).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_infra_errors_are_stored_apart_and_rerun(tmp_path):
    db = tmp_path / "s.db"
    flaky = ScriptedProvider(script=lambda *a: {"infra_error": "HTTP 500"}, name="m")
    cfg = StudyConfig(model="m", variants="native", concurrency=1)
    from toolbias.providers.wrapper import ProviderWrapper, RetryPolicy

    wrapped = ProviderWrapper(flaky, retry=RetryPolicy(attempts=2, initial_wait=0, max_wait=0))
    p = run_study(build_study(cfg, model=wrapped, catalog=CAT), db)
    assert p.infra_errors == 8
    with Store(db) as s:
        assert {r.status for r in s.rows(status=None)} == {"infra_error"}
        assert all(r.success is None for r in s.rows(status=None))
    ok = ScriptedProvider(script={"default": []}, name="m")
    p = run_study(build_study(cfg, model=ok, catalog=CAT), db)
    assert p.skipped == 0 and p.infra_errors == 0
    with Store(db) as s:
        assert {r.status for r in s.rows(status=None)} == {"done"} and s.count() == 8


def test_changed_configuration_is_refused(tmp_path):
    db = tmp_path / "s.db"
    run_study(study(), db)
    cfg = StudyConfig(model="oracle", variants="native", concurrency=2)
    with pytest.raises(StoreError, match="variants"):
        run_study(build_study(cfg, catalog=CAT), db)
    cfg = StudyConfig(model="oracle", variants="native,strip_descriptions", turn_limit=4)
    with pytest.raises(StoreError, match="settings_hash|turn_limit"):
        run_study(build_study(cfg, catalog=CAT), db)


def test_shards_merge_to_the_full_study(tmp_path):
    full = tmp_path / "full.db"
    run_study(study(), full)
    parts = []
    for i in range(3):
        p = tmp_path / f"p{i}.db"
        run_study(study(StudyConfig(model="oracle", variants="native,strip_descriptions", shard=(i, 3))), p)
        parts.append(p)
    counts = merge_stores(parts, tmp_path / "all.db")
    assert counts["episodes"] == 16
    with Store(full) as a, Store(tmp_path / "all.db") as b:
        assert {r.key for r in a.rows()} == {r.key for r in b.rows()}
        # every field of every episode, but the times it took, equals the unsharded run's
        assert untimed(a) == untimed(b) and len(untimed(a)) == 16
        assert a.studies() == b.studies() and a.study_meta() == b.study_meta()
        reports = [json.loads(dumps(build_report(s, settings=ReportSettings(n_resamples=200)))) for s in (a, b)]
    assert [{k: v for k, v in r.items() if k != "store"} for r in reports] == [
        {k: v for k, v in reports[0].items() if k != "store"}] * 2 and reports[0]["cells"]
    with pytest.raises(StoreError, match="in both"):
        merge_stores([parts[0], parts[0]], tmp_path / "dup.db")


def untimed(store: Store) -> dict[str, dict]:
    """Key -> every column and record field of the episode but wall-clock times."""
    out = {}
    for r in store.rows():
        d = {k: v for k, v in r.__dict__.items() if k not in ("wall_s", "created", "record")}
        d["record"] = {k: v for k, v in r.record.items() if k not in ("wall_s", "model_latency_s")}
        out[r.key] = d
    return out


def test_episode_key_covers_every_field():
    base = dict(model="m", settings_hash="h", catalog="c", variant="v", task_id="t", control="strict",
                condition="base", seed=0)
    keys = {episode_key(**base)}
    for field, other in [("model", "m2"), ("settings_hash", "h2"), ("catalog", "c2"), ("variant", "v2"),
                         ("task_id", "t2"), ("control", "lenient"), ("condition", "instruction"), ("seed", 1)]:
        keys.add(episode_key(**{**base, field: other}))
    assert len(keys) == 9


def test_export_formats_and_dataframe(tmp_path):
    db = tmp_path / "s.db"
    run_study(study(), db)
    assert export(db, "jsonl", tmp_path / "e.jsonl") == 16
    first = json.loads((tmp_path / "e.jsonl").read_text().splitlines()[0])
    assert first["record"]["messages"][0]["role"] == "system" and first["success"] is True
    export(db, "csv", tmp_path / "e.csv")
    assert len(pd.read_csv(tmp_path / "e.csv")) == 16
    export(db, "parquet", tmp_path / "e.parquet")
    assert set(pd.read_parquet(tmp_path / "e.parquet").variant) == {"native", "strip_descriptions"}
    df = episodes_dataframe(db)
    assert df.success.all() and len(df) == 16


def _export_as_before(db, out):
    """``export(db, "jsonl", out)`` as toolbias wrote it before records were written through:
    every record parsed, then each line encoded whole with ``record_json``."""
    n = 0
    with Store(db) as s, out.open("w", encoding="utf-8") as fh:
        for r in s.rows(kind=None):
            d = {c: getattr(r, c) for c in COLUMNS if c != "record"}
            d["record"] = r.record
            fh.write(record_json(d) + "\n")
            n += 1
    return n


def test_jsonl_export_writes_the_same_bytes_as_encoding_every_record_again(tmp_path):
    """Packed and text records, before and after the study's dictionary, a lone surrogate (its
    line escaped whole), escapes that only look like one, non-ASCII text and unscored and
    infra-error rows: the written-through export equals the previous one byte for byte."""
    db = tmp_path / "s.db"
    run_study(study(), db)
    odd = [{"text": "caf\u00e9 \u4e2d \U0001f600", "n": [1.5, -0.0, 1e300, None, True], "empty": {}},
           {"bad": "\ud83d broken surrogate", "fine": "\u00e9"},
           {"looks": "\\ud83d is text, not an escape", "nested": [[{"a": "\n\t\"q\""}]]}]
    with Store(db) as s:
        played = list(s.rows())
    # more episodes of the study: its dictionary is built, and its first records repacked with it
    again = [replace(r, key=f"again{i}", seed=1) for i, r in enumerate(played + played)]
    extra = [replace(played[0], key=f"x{i}{kind}", kind=kind, record=rec, task_id=f"t\u00e9{i}",
                     success=[True, False, None][i], status="infra_error" if i == 2 and kind == "live" else "done")
             for i, rec in enumerate(odd) for kind in ("task", "live")]
    with Store(db) as s:
        s.put_values([r.values() for r in again + extra])
        # both layouts in one file: packed (task) and JSON text (live) records
        kinds = dict(s.query("SELECT kind, group_concat(DISTINCT typeof(record)) FROM episodes GROUP BY kind"))
        assert kinds == {"task": "blob", "live": "text"} and s.query("SELECT COUNT(*) FROM record_dicts") == [(1,)]
    new, old = tmp_path / "new.jsonl", tmp_path / "old.jsonl"
    assert export(db, "jsonl", new) == _export_as_before(db, old) == 3 * 16 + 5
    assert new.read_bytes() == old.read_bytes()
    lines = new.read_text(encoding="utf-8").splitlines()
    assert "\\ud83d broken" in lines[-3] and lines[-3].isascii()  # the surrogate's line: escaped whole
    assert json.loads(lines[-1])["record"] == odd[2]


def test_stratified_sample_is_deterministic_and_covers_strata():
    a = sample_tasks(CAT.tasks, 4, seed=1)
    assert a == sample_tasks(CAT.tasks, 4, seed=1) and len(a) == 4
    assert {t.domain for t in a} == {"home", "car"}


def test_merge_copies_other_tables(tmp_path):
    parts = []
    for i in range(2):
        p = tmp_path / f"p{i}.db"
        run_study(study(StudyConfig(model="oracle", variants="native", shard=(i, 2))), p)
        with Store(p) as s:
            s.db.execute("CREATE TABLE IF NOT EXISTS extra (key TEXT PRIMARY KEY, v INTEGER)")
            s.db.executemany("INSERT INTO extra VALUES (?, ?)", [(f"k{i}", i), ("shared", 9)])
            s.db.commit()
        parts.append(p)
    counts = merge_stores(parts, tmp_path / "all.db")
    with Store(tmp_path / "all.db") as s:
        assert sorted(s.db.execute("SELECT key FROM extra")) == [("k0",), ("k1",), ("shared",)]
    assert counts["other_rows"] == 3


def test_base_urls_are_not_part_of_the_study_identity(tmp_path):
    class Served(ScriptedProvider):
        def __init__(self, urls):
            super().__init__(script={"default": []}, name="served")
            self.urls = urls

        def settings(self):
            return {"spec": self.spec, "model": "m", "base_urls": self.urls}

    cfg = StudyConfig(model="served", variants="native", concurrency=2)
    db = tmp_path / "s.db"
    run_study(build_study(cfg, model=Served(["http://a:8000/v1"]), catalog=CAT), db)
    again = run_study(build_study(cfg, model=Served(["http://b:9000/v1", "http://c:9000/v1"]), catalog=CAT), db)
    assert again.skipped == again.total == 8


def test_provider_cap_on_episodes_in_flight(tmp_path):
    import asyncio

    from toolbias.providers.base import ModelAPI, ModelOutput

    class Slow(ModelAPI):
        """Answers each episode's first turn after a pause, so episodes can overlap."""

        def __init__(self, cap):
            self.spec, self.max_concurrency = "slow", cap
            self.in_flight = self.peak = 0

        async def generate(self, messages, tools, tool_choice, config):
            if len(messages) == 2:  # first turn of an episode
                self.in_flight += 1
                self.peak = max(self.peak, self.in_flight)
                await asyncio.sleep(0.01)
                return ModelOutput(content="", tool_calls=())
            return ModelOutput(content="done")

        def for_episode(self, task, codec):
            return self

    for cap, expected in ((1, 1), (None, 8)):
        model = Slow(cap)
        cfg = StudyConfig(model="slow", variants="native", concurrency=8)
        orig = model.generate

        async def counted(*a, _orig=orig, _m=model):
            out = await _orig(*a)
            if out.content == "":
                _m.in_flight -= 1
            return out

        model.generate = counted  # type: ignore[method-assign]
        run_study(build_study(cfg, model=model, catalog=CAT), tmp_path / f"s{cap}.db")
        assert model.peak == expected


def test_episode_keys_of_a_cell_are_episode_key():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from toolbias.store import episode_keys

    text = st.text(max_size=12)

    @settings(max_examples=200, deadline=None)
    @given(model=text, settings_hash=text, catalog=text, variant=text, task_id=text, control=text,
           condition=text, seed=st.integers(-(2**40), 2**40), kind=text)
    def same(**f):
        task_id = f.pop("task_id")
        fixed = [f["model"], f["settings_hash"], f["catalog"], f["variant"]]
        listed = fixed + [task_id, f["control"], f["condition"], f["seed"], f["kind"]]
        assert episode_keys(**f)(task_id) == episode_key(task_id=task_id, **f) == stable_hash(listed, 32)

    same()


def test_record_json_keeps_lone_surrogates_readable():
    from toolbias.store import record_json

    value = {"text": "caf\u00e9 \ud83d broken", "n": 1}
    text = record_json(value)
    text.encode("utf-8")
    assert json.loads(text) == value
    assert record_json({"text": "café"}) == '{"text":"café"}'


def test_small_samples_reach_every_domain_across_seeds() -> None:
    from toolbias.catalog import load_catalog

    tasks = load_catalog("builtin").tasks
    domains = {t.domain for t in tasks}
    seen: set[str] = set()
    for seed in range(30):
        s = sample_tasks(tasks, 3, seed)
        assert len(s) == 3 and s == sample_tasks(tasks, 3, seed)
        seen |= {t.domain for t in s}
    assert seen == domains  # name-ordered tie-breaks gave the same few domains for every seed
    assert len({t.domain for t in sample_tasks(tasks, 36, 0)}) == len(domains)
