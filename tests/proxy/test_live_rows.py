"""One row per conversation, as the client lived it (issue 24, item 6): a turn the client sends
again (a retry, a regeneration) is its own row that names its parent, and leaves the first
conversation's row as it was (today both share one call log: the retry's calls are merged into
the first row); a finished turn reaches the store moments after it is served, not at the next
one-second tick, so a ``kill -9`` right after loses nothing. Real SQLite files."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("uvicorn", reason="toolbias proxy needs uvicorn (pip install 'toolbias[proxy]')")

from tests.support.agents import MODEL, proxy_server  # noqa: E402
from tests.support.servers import FakeOpenAIServer, Reply  # noqa: E402
from toolbias.proxy.records import Recorder  # noqa: E402

HANG_S = 30.0
TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {
    "type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}}]


def _rows(db: Path) -> list[tuple[str, dict[str, Any]]]:
    with sqlite3.connect(db) as c:
        return [(key, json.loads(rec)["live"]) for key, rec in
                c.execute("SELECT key, record FROM episodes WHERE kind='live' ORDER BY key")]


def test_a_retried_turn_is_a_branch_not_merged_into_the_first_row(tmp_path: Path) -> None:
    db = tmp_path / "live.db"
    first = [{"role": "user", "content": "look up a"}]
    with FakeOpenAIServer(models=(MODEL,)) as upstream:
        upstream.queue(Reply.calls(("lookup", {"q": "a"})), Reply.text("a is 1"),  # the conversation
                       Reply.text("a is one"))                                      # the client regenerates
        with proxy_server(upstream, "native", store=str(db)) as proxy:
            url = f"{proxy.base_url}/chat/completions"
            r1 = httpx.post(url, json={"model": MODEL, "messages": first, "tools": TOOLS}, timeout=30).json()
            message = r1["choices"][0]["message"]
            history = [*first, message, {"role": "tool", "tool_call_id": message["tool_calls"][0]["id"],
                                         "content": "1"}]
            r2 = httpx.post(url, json={"model": MODEL, "messages": history, "tools": TOOLS}, timeout=30).json()
            r3 = httpx.post(url, json={"model": MODEL, "messages": history, "tools": TOOLS}, timeout=30).json()
    assert r2["choices"][0]["message"]["content"] == "a is 1"
    assert r3["choices"][0]["message"]["content"] == "a is one"
    conv = r1["toolbias"]["conversation"]
    assert r2["toolbias"]["conversation"] == conv and r3["toolbias"]["conversation"] != conv
    rows = dict(_rows(db))
    assert len(rows) == 2
    original, branch = rows[f"live-{conv}"], rows[f"live-{r3['toolbias']['conversation']}"]
    assert (original["turns"], original["rounds"], original["last_answer"]) == (2, 2, "a is 1")
    assert original["branch_of"] is None
    assert (branch["turns"], branch["rounds"], branch["last_answer"]) == (2, 2, "a is one")
    assert branch["branch_of"] == conv


def test_a_retry_after_an_upstream_error_continues_the_same_row(tmp_path: Path) -> None:
    """A turn that failed upstream is not a branch: the client's retry of it continues the row."""
    db = tmp_path / "live.db"
    first = [{"role": "user", "content": "look up b"}]
    with FakeOpenAIServer(models=(MODEL,)) as upstream:
        upstream.queue(Reply.calls(("lookup", {"q": "b"})))
        with proxy_server(upstream, "native", store=str(db), retries=1) as proxy:
            url = f"{proxy.base_url}/chat/completions"
            r1 = httpx.post(url, json={"model": MODEL, "messages": first, "tools": TOOLS}, timeout=30).json()
            message = r1["choices"][0]["message"]
            history = [*first, message, {"role": "tool", "tool_call_id": message["tool_calls"][0]["id"],
                                         "content": "2"}]
            upstream.inject("http500", times=1)
            failed = httpx.post(url, json={"model": MODEL, "messages": history, "tools": TOOLS}, timeout=30)
            assert failed.status_code == 502
            upstream.queue(Reply.text("b is 2"))
            again = httpx.post(url, json={"model": MODEL, "messages": history, "tools": TOOLS}, timeout=30).json()
    assert again["toolbias"]["conversation"] == r1["toolbias"]["conversation"]
    rows = _rows(db)
    assert len(rows) == 1 and rows[0][1]["termination"] == "live" and rows[0][1]["last_answer"] == "b is 2"


def test_a_conversation_continued_after_a_restart_continues_its_row(tmp_path: Path) -> None:
    """The proxy is stopped after a turn and started again on the same store: the agent's next
    turn continues the same row (today: a second row, the conversation counted twice)."""
    db = tmp_path / "live.db"
    first = [{"role": "user", "content": "look up c"}]
    with FakeOpenAIServer(models=(MODEL,)) as upstream:
        upstream.queue(Reply.calls(("lookup", {"q": "c"})), Reply.text("c is 3"))
        with proxy_server(upstream, "native", store=str(db)) as proxy:
            r1 = httpx.post(f"{proxy.base_url}/chat/completions",
                            json={"model": MODEL, "messages": first, "tools": TOOLS}, timeout=30).json()
        message = r1["choices"][0]["message"]
        history = [*first, message, {"role": "tool", "tool_call_id": message["tool_calls"][0]["id"], "content": "3"}]
        with proxy_server(upstream, "native", store=str(db)) as proxy:  # a new process would do the same
            r2 = httpx.post(f"{proxy.base_url}/chat/completions",
                            json={"model": MODEL, "messages": history, "tools": TOOLS}, timeout=30).json()
    assert r2["choices"][0]["message"]["content"] == "c is 3"
    assert r2["toolbias"]["conversation"] == r1["toolbias"]["conversation"]
    rows = _rows(db)
    assert len(rows) == 1
    row = rows[0][1]
    assert (row["turns"], row["rounds"], row["native_calls"], row["last_answer"]) == (2, 2, 1, "c is 3")
    assert row["rebuilt"] == 1  # the first turn's call was encoded again from the history


class _Log:
    conv_id = "c1"
    head = None

    def to_dict(self) -> dict[str, Any]:
        return {"conv_id": self.conv_id, "catalog": "live", "variant": "native", "domain": "live",
                "termination": "live", "native_calls": 0, "rejections": 0, "rounds": 1, "prompt_tokens": 1,
                "completion_tokens": 1, "started": time.time()}


def test_a_finished_turn_is_stored_without_waiting_for_the_next_tick(tmp_path: Path) -> None:
    """The writer wakes on each turn: the row is in the store while the proxy still runs (a
    ``kill -9`` now loses nothing), even with an hour between scheduled writes."""
    db = tmp_path / "live.db"
    rec = Recorder(db, "proxy|native", "m", interval_s=3600)
    try:
        time.sleep(0.01)  # the writer is asleep in its wait (no timing is asserted)
        rec.update(_Log())  # type: ignore[arg-type]
        give_up = time.monotonic() + HANG_S
        while not _rows(db):
            assert time.monotonic() < give_up, "the turn was not stored"
            time.sleep(0.02)
    finally:
        rec.flush_and_close()
    assert [k for k, _ in _rows(db)] == ["live-c1"]
