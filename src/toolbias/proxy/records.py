"""Live conversations into the results store, one row per conversation (kind ``live``).

The seam to the store layer: :func:`live_row` builds the row through the store's
public :class:`~toolbias.store.EpisodeRow`; :class:`Recorder` writes the conversations
that changed, at most once a second, from one writer thread (SQLite connections belong
to their thread, and a write must not stall the proxy's event loop).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from ..store import EpisodeRow, Store
from .conversation import CallLog

LIVE_KIND = "live"


def live_row(log: dict[str, Any], study: str, model: str) -> EpisodeRow:
    """A live conversation (:meth:`CallLog.to_dict`) as a store row: no gold, so ``success``
    is None; the record holds every upstream call and how it decoded (native, protocol reply
    or rejection)."""
    return EpisodeRow(
        key=f"live-{log['conv_id']}", study=study, kind=LIVE_KIND, model=model, settings_hash="",
        catalog=log["catalog"], variant=log["variant"], task_id=log["conv_id"], domain=log["domain"],
        control="strict", condition="base", seed=0, status="done", success=None, failure_mode=None,
        termination=log["termination"], n_gold=0, n_executed=log["native_calls"], n_rejections=log["rejections"],
        turns=log["rounds"], prompt_tokens=log["prompt_tokens"], completion_tokens=log["completion_tokens"],
        wall_s=time.time() - log["started"], record={"live": log},
    )


class Recorder:
    """Collects changed conversations and writes them in batches from one thread."""

    def __init__(self, path: str | Path, study: str, model: str, interval_s: float = 1.0) -> None:
        self.path, self.study, self.model, self.interval_s = Path(path), study, model, interval_s
        Store(self.path).close()  # a bad path fails now, before the server starts
        self._dirty: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="toolbias-proxy-store", daemon=True)
        self._thread.start()
        self.written = 0

    def update(self, log: CallLog) -> None:
        """Called on the event loop after each turn: a copy, so the writer never reads a log
        the next turn is changing (entries are never changed once logged)."""
        with self._lock:
            self._dirty[log.conv_id] = log.to_dict()

    def _take(self) -> list[dict[str, Any]]:
        with self._lock:
            logs, self._dirty = list(self._dirty.values()), {}
        return logs

    def _run(self) -> None:
        store = Store(self.path)
        try:
            while True:
                stopping = self._stop
                logs = self._take()
                if logs:
                    store.put_values([live_row(log, self.study, self.model).values() for log in logs])
                    self.written += len(logs)
                if stopping:
                    return
                self._wake.wait(self.interval_s)
                self._wake.clear()
        finally:
            store.close()

    def flush_and_close(self) -> None:
        """Write what is left and stop the writer (the server's shutdown)."""
        self._stop = True
        self._wake.set()
        self._thread.join()

    def stats(self) -> dict[str, Any]:
        return {"written": self.written, "pending": len(self._dirty)}
