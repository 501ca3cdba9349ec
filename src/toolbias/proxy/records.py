"""Live conversations into the results store, one row per conversation (kind ``live``).

The seam to the store layer: :func:`live_row` builds the row through the store's
public :class:`~toolbias.store.EpisodeRow`; :class:`Recorder` writes the conversations
that changed from one writer thread (SQLite connections belong to their thread, and a write
must not stall the proxy's event loop). Each turn wakes the writer, so at low load every
conversation is stored moments after its turn (a ``kill -9`` loses none that finished);
under load the writer takes whatever changed during its last write, at most once every
``min_gap_s``, so many turns share one transaction.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..store import EpisodeRow, Store
from .conversation import CallLog

LIVE_KIND = "live"


def live_row(log: dict[str, Any], study: str, model: str, control: str = "strict",
             condition: str = "base") -> EpisodeRow:
    """A live conversation (:meth:`CallLog.to_dict`) as a store row: no gold, so ``success``
    is None; the record holds every upstream call and how it decoded (native, protocol reply
    or rejection)."""
    return EpisodeRow(
        key=f"live-{log['conv_id']}", study=study, kind=LIVE_KIND, model=model, settings_hash="",
        catalog=log["catalog"], variant=log["variant"], task_id=log["conv_id"], domain=log["domain"],
        control=control, condition=condition, seed=0, status="done", success=None, failure_mode=None,
        termination=log["termination"], n_gold=0, n_executed=log["native_calls"], n_rejections=log["rejections"],
        turns=log["rounds"], prompt_tokens=log["prompt_tokens"], completion_tokens=log["completion_tokens"],
        wall_s=time.time() - log["started"], record={"live": log},
    )


class Recorder:
    """Collects changed conversations and writes them in batches from one thread.

    A write that fails (the store locked or busy past ``busy_timeout_s``, a full disk) keeps its
    rows pending and is retried with a backoff (doubling from ``interval_s`` to ``max_backoff_s``);
    the failure shows on stderr (once when it starts, once when writes resume), in :meth:`stats`
    (``/health``) and, if rows are still unwritten after the last tries at shutdown, in
    :attr:`unwritten` (the ``proxy`` command then exits non-zero)."""

    def __init__(self, path: str | Path, study: str, model: str, interval_s: float = 1.0,
                 busy_timeout_s: float = 30.0, max_backoff_s: float = 30.0, final_tries: int = 3,
                 control: str = "strict", condition: str = "base", min_gap_s: float = 0.05) -> None:
        self.path, self.study, self.model, self.interval_s = Path(path), study, model, interval_s
        self.min_gap_s = min_gap_s
        self.control, self.condition = control, condition  # the proxy's: stored on every row
        self.busy_timeout_s, self.max_backoff_s, self.final_tries = busy_timeout_s, max_backoff_s, final_tries
        self._dirty: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        #: a conversation's latest history hash (hex) -> its id, and back: a conversation continued
        #: after a restart (or after its state left memory) is found here and continues its row
        self._heads: dict[str, str] = {}
        self._head_of: dict[str, str] = {}
        self._load_heads()  # a bad path fails now, before the server starts
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._stop = False
        self.written = 0
        #: the last write error while writes fail (None while they succeed), and how many failed
        self.error: str | None = None
        self.failures = 0
        #: conversations left unwritten when the writer stopped (0: everything was stored)
        self.unwritten = 0
        self._thread = threading.Thread(target=self._run, name="toolbias-proxy-store", daemon=True)
        self._thread.start()

    def _load_heads(self) -> None:
        store = Store(self.path)
        try:
            rows = store.db.execute("SELECT task_id, json_extract(record, '$.live.head') FROM episodes "
                                    "WHERE study = ? AND kind = ?", (self.study, LIVE_KIND)).fetchall()
        except sqlite3.Error:  # records in another layout: conversations start new rows
            rows = []
        finally:
            store.close()
        for conv_id, head in rows:
            if isinstance(head, str):
                self._heads[head] = conv_id
                self._head_of[conv_id] = head

    def update(self, log: CallLog) -> None:
        """Called on the event loop after each turn: a copy, so the writer never reads a log
        the next turn is changing (entries are never changed once logged)."""
        with self._lock:
            self._dirty[log.conv_id] = log.to_dict()
        if log.head is not None and self._head_of.get(log.conv_id) != log.head:
            self._heads.pop(self._head_of.get(log.conv_id, ""), None)
            self._heads[log.head] = log.conv_id
            self._head_of[log.conv_id] = log.head
        self._wake.set()

    def stored_conversation(self, hashes: Sequence[bytes]) -> tuple[str, int] | None:
        """(conversation id, i): the stored conversation whose latest history is ``messages[:i]``
        (``hashes`` as :func:`~.conversation.history_hashes` gives them), the longest first; or None."""
        for i in range(len(hashes) - 1, 0, -1):
            conv_id = self._heads.get(hashes[i].hex())
            if conv_id is not None:
                return conv_id, i
        return None

    def load(self, conv_id: str) -> dict[str, Any] | None:
        """A conversation's log as last recorded (pending or stored); reads the store (call it in a thread)."""
        with self._lock:
            pending = self._dirty.get(conv_id)
        if pending is not None:
            return dict(pending)
        store = Store(self.path)
        try:
            row = store.db.execute("SELECT record FROM episodes WHERE key = ?", (f"live-{conv_id}",)).fetchone()
            data = json.loads(store.unpack_record(row[0])) if row else None
        except (sqlite3.Error, ValueError):
            return None
        finally:
            store.close()
        live = data.get("live") if isinstance(data, dict) else None
        return live if isinstance(live, dict) else None

    def _take(self) -> list[dict[str, Any]]:
        with self._lock:
            logs, self._dirty = list(self._dirty.values()), {}
        return logs

    def _put_back(self, logs: list[dict[str, Any]]) -> None:
        with self._lock:  # a conversation updated meanwhile keeps its newer copy
            self._dirty = {**{log["conv_id"]: log for log in logs}, **self._dirty}

    def _write(self, store: Store | None, logs: list[dict[str, Any]]) -> Store:
        if store is None:
            store = Store(self.path)
            store.db.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
        try:
            store.put_values([live_row(log, self.study, self.model, self.control, self.condition).values() for log in logs])
        except BaseException:
            try:
                store.db.rollback()
            except Exception:  # noqa: BLE001 - the connection may be gone; it is reopened next time
                pass
            raise
        return store

    def _run(self) -> None:
        store: Store | None = None
        backoff = self.interval_s
        final = 0
        try:
            while True:
                stopping = self._stop
                self._wake.clear()  # before taking: a turn logged from now on wakes the next round
                logs = self._take()
                if logs:
                    try:
                        store = self._write(store, logs)
                    except Exception as exc:  # noqa: BLE001 - any failure keeps the rows and is retried
                        self._put_back(logs)
                        self.failures += 1
                        if self.error is None:
                            _say(f"toolbias proxy: cannot write conversations to the store {self.path}: "
                                 f"{type(exc).__name__}: {exc}; {len(logs)} pending, retrying")
                        self.error = f"{type(exc).__name__}: {exc}"
                        if stopping:
                            final += 1
                            if final >= self.final_tries:
                                self.unwritten = len(self._dirty)
                                return
                        self._stopping.wait(backoff)  # new turns do not hurry a retry; a shutdown does
                        backoff = min(backoff * 2, self.max_backoff_s)
                        continue
                    self.written += len(logs)
                    backoff = self.interval_s
                    if self.error is not None:
                        _say(f"toolbias proxy: store writes resumed ({self.written} conversations stored)")
                        self.error = None
                if stopping:
                    return
                if logs and self.min_gap_s:
                    time.sleep(self.min_gap_s)  # let a busy proxy's turns gather into one transaction
                self._wake.wait(self.interval_s)
        finally:
            if store is not None:
                store.close()

    def flush_and_close(self) -> None:
        """Write what is left and stop the writer (the server's shutdown); after a few failed
        tries the rows left are counted in :attr:`unwritten`."""
        self._stop = True
        self._stopping.set()
        self._wake.set()
        self._thread.join()

    def stats(self) -> dict[str, Any]:
        return {"written": self.written, "pending": len(self._dirty), "error": self.error,
                "failed_writes": self.failures}


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
