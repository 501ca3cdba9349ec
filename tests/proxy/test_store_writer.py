"""The proxy's store writer survives a locked store (issue 24, item 1): rows written while another
connection holds ``BEGIN EXCLUSIVE`` stay pending and are stored once the lock goes (today the
writer thread dies on the first "database is locked" and nothing more is stored); while it cannot
write, stderr and ``/health`` (503) say so; rows still unwritten at shutdown are counted, so the
``proxy`` command exits non-zero. Real SQLite files; waits are for conditions, with a hang guard."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from toolbias.proxy.app import _health
from toolbias.proxy.records import Recorder

HANG_S = 60.0


class _Log:
    head = None

    def __init__(self, n: int) -> None:
        self.conv_id = f"c{n}"

    def to_dict(self) -> dict[str, Any]:
        return {"conv_id": self.conv_id, "catalog": "live", "variant": "native", "domain": "live",
                "termination": "answered", "native_calls": 1, "rejections": 0, "rounds": 1,
                "prompt_tokens": 1, "completion_tokens": 1, "started": time.time()}


def _until(cond: Any) -> None:
    give_up = time.monotonic() + HANG_S
    while not cond():
        assert time.monotonic() < give_up, "condition not reached"
        time.sleep(0.02)


def _rows(db: Path) -> int:
    with sqlite3.connect(db) as c:
        return int(c.execute("SELECT COUNT(*) FROM episodes WHERE kind='live'").fetchone()[0])


def _lock(db: Path) -> sqlite3.Connection:
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    return holder


class _Proxy:
    class variant:  # noqa: N801 - the attribute _health reads
        name = "native"

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder


def test_rows_survive_a_locked_store_and_the_failure_is_seen(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "live.db"
    rec = Recorder(db, "proxy|native", "m", interval_s=0.02, busy_timeout_s=0.05, max_backoff_s=0.2)
    holder = _lock(db)
    for i in range(100):
        rec.update(_Log(i))  # type: ignore[arg-type]
    _until(lambda: rec.failures >= 2)  # tried, failed, retried: the thread is alive
    status, body = _health(_Proxy(rec))
    assert status == 503 and body["status"] == "store_failing" and "locked" in body["store"]["error"]
    assert body["store"]["pending"] == 100
    holder.rollback()
    holder.close()
    _until(lambda: rec.written == 100)
    rec.update(_Log(100))  # type: ignore[arg-type]
    rec.flush_and_close()
    assert _rows(db) == 101 and rec.unwritten == 0
    assert _health(_Proxy(rec))[0] == 200
    err = capsys.readouterr().err
    assert "cannot write conversations to the store" in err and "store writes resumed" in err


def test_rows_unwritten_at_shutdown_are_counted(tmp_path: Path) -> None:
    db = tmp_path / "live.db"
    rec = Recorder(db, "proxy|native", "m", interval_s=0.02, busy_timeout_s=0.05, max_backoff_s=0.1,
                   final_tries=2)
    holder = _lock(db)
    try:
        for i in range(5):
            rec.update(_Log(i))  # type: ignore[arg-type]
        rec.flush_and_close()
    finally:
        holder.rollback()
        holder.close()
    assert rec.unwritten == 5 and rec.error is not None and _rows(db) == 0


@pytest.mark.parametrize(("control", "instructions", "condition"),
                         [("lenient", False, "base"), ("strict", True, "instruction")])
def test_live_rows_carry_the_proxys_control_and_condition(tmp_path: Path, control: str, instructions: bool,
                                                           condition: str) -> None:
    """Issue 24 item 6, last part: rows are stored under the proxy's --control and --instructions
    (today every live row says strict/base)."""
    from toolbias.proxy import ProxyConfig, build_app
    from toolbias.variants.codec import Control

    db = tmp_path / "live.db"
    app = build_app(ProxyConfig(upstream=("http://127.0.0.1:9/v1",), variant="native", control=Control(control),
                                instructions=instructions), store=str(db))
    rec = app.proxy.recorder
    rec.update(_Log(0))  # type: ignore[arg-type]
    rec.flush_and_close()
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT control, condition FROM episodes").fetchall() == [(control, condition)]
