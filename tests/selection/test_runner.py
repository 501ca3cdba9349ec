"""The selection runner: rotations in requests, seeds per run, unparsed answers, store and resume."""

from __future__ import annotations

import pytest

from tests.support.selection import ChooserModel, always_first, always_tool
from toolbias.providers.wrapper import ResponseCache, cache_key, wrap
from toolbias.selection import SelectionStore, Status, builtin_benchmark, report_of, run_selection
from toolbias.selection.runner import build_request

BENCH = builtin_benchmark().limit_queries(2).select_clusters(["forward_geocoding", "translation"])


def test_requests_present_every_rotation() -> None:
    model = ChooserModel(always_first)
    records, _ = run_selection(model, BENCH, runs=1)
    assert len(model.calls) == 2 * 2 * 5
    orders = {tuple(t["function"]["name"] for t in c["tools"]) for c in model.calls}
    assert len(orders) == 2 * 5                      # 5 rotations per cluster, the same for both queries
    first = BENCH.clusters[0]
    assert first.names in orders and first.names[1:] + first.names[:1] in orders
    assert all(c["tool_choice"] == "required" for c in model.calls)
    assert {r.rotation for r in records} == set(range(5))
    for r in records:
        assert r.api == r.order[r.position]


def test_runs_use_distinct_seeds_and_keys() -> None:
    model = ChooserModel(always_first)
    records, _ = run_selection(model, BENCH, runs=3)
    assert {c["config"].seed for c in model.calls} == {0, 1, 2}
    assert len({r.key for r in records}) == len(records) == 3 * 20
    assert report_of(records).n_runs == 3


def test_text_presentation_prompt() -> None:
    messages, tools, choice = build_request("Where is X?", BENCH.clusters[0].tools, "text")
    assert tools == [] and choice is None
    user = messages[-1]["content"]
    assert user.startswith("Request: Where is X?")
    for i, t in enumerate(BENCH.clusters[0].tools, 1):
        assert f"{i}. {t.name}: " in user


def test_unparsed_answers_are_recorded_and_excluded() -> None:
    calls = {"n": 0}

    def flaky(names, query):
        calls["n"] += 1
        return "I'd rather not say" if calls["n"] % 4 == 0 else 0

    records, summary = run_selection(ChooserModel(flaky), BENCH, concurrency=1)
    unparsed = [r for r in records if r.status is Status.UNPARSED]
    assert summary.unparsed == len(unparsed) == 5 and summary.ok == 15
    assert all(r.reason and r.api is None and r.output for r in unparsed)
    rep = report_of(records)
    assert rep.n_unparsed == 5 and rep.n_selections == 15
    assert rep.delta_pos == pytest.approx(0.8)


def test_store_resume_and_infra_retry(tmp_path) -> None:
    path = tmp_path / "sel.db"
    failing = ChooserModel(always_tool("geocode"), fail_first=3)
    with SelectionStore(path) as st:
        records, summary = run_selection(failing, BENCH, store=st, concurrency=1)
    assert summary.errors == 3 and sum(r.status is Status.ERROR for r in records) == 3
    again = ChooserModel(always_tool("geocode"))
    with SelectionStore(path) as st:
        records, summary = run_selection(again, BENCH, store=st)
        assert summary.skipped == 17 and len(again.calls) == 3 and summary.errors == 0
        assert len(records) == 20 and all(r.status is not Status.ERROR for r in records)
        stored = st.records(model="test:chooser", condition="base", presentation="tools")
        assert len(stored) == 20
        groups = st.groups()
        assert groups == [{"model": "test:chooser", "benchmark": "builtin", "condition": "base",
                           "presentation": "tools", "ok": 20, "unparsed": 0, "error": 0}]
    # a finished run is not repeated
    third = ChooserModel(always_first)
    with SelectionStore(path) as st:
        _, summary = run_selection(third, BENCH, store=st)
    assert third.calls == [] and summary.skipped == 20


class CacheableChooser(ChooserModel):
    cacheable = True


def test_wrapper_cache_key_covers_tool_order(tmp_path) -> None:
    cache = ResponseCache(tmp_path / "cache.db")
    inner = CacheableChooser(always_first)
    model = wrap(inner, concurrency=4, cache=cache)
    run_selection(model, BENCH)
    assert len(inner.calls) == 20
    keys = {cache_key(inner, c["messages"], c["tools"], c["tool_choice"], c["config"]) for c in inner.calls}
    assert len(keys) == 20                         # same query, other rotation: another key
    records, _ = run_selection(wrap(CacheableChooser(always_first), cache=cache), BENCH)
    assert all(r.output and r.output["cached"] for r in records)
    assert report_of(records).delta_pos == pytest.approx(0.8)


def test_odd_model_text_is_stored(tmp_path) -> None:
    broken = "\ud83d not valid UTF-8 on its own"
    with SelectionStore(tmp_path / "s.db") as st:
        records, summary = run_selection(ChooserModel(lambda names, q: broken), BENCH, store=st)
        assert summary.unparsed == 20
        stored = st.records()
    assert len(stored) == 20 and stored[0].output["content"] == broken
