"""SQLite tables for selection runs, in the study's results file.

Two tables, prefixed ``selection_`` so they can live in the same SQLite file as the
schema-bias episodes:

- ``selection_records``: one row per (model, benchmark, condition, presentation, run,
  query, rotation), keyed by :func:`~toolbias.selection.records.trial_key`; the full
  model output is kept as JSON;
- ``selection_filter``: one row per filter-model answer of the filter-quality
  evaluation (:mod:`.mitigate`).

Rows with status ``error`` (infrastructure failures) are replaced when the run is
resumed; ``ok`` and ``unparsed`` rows are final.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ..errors import StoreError
from ..store import record_json
from .records import SelectionRecord, Status

SCHEMA = """
CREATE TABLE IF NOT EXISTS selection_records (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    benchmark TEXT NOT NULL,
    condition TEXT NOT NULL,
    presentation TEXT NOT NULL,
    run INTEGER NOT NULL,
    cluster TEXT NOT NULL,
    query_index INTEGER NOT NULL,
    rotation INTEGER NOT NULL,
    k INTEGER NOT NULL,
    api INTEGER,
    position INTEGER,
    status TEXT NOT NULL,
    record TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS selection_records_group
    ON selection_records (model, benchmark, condition, presentation);
CREATE TABLE IF NOT EXISTS selection_filter (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    eval_set TEXT NOT NULL,
    example TEXT NOT NULL,
    k INTEGER NOT NULL,
    status TEXT NOT NULL,
    record TEXT NOT NULL
);
"""


class SelectionStore:
    """Selection records in SQLite (WAL); safe to share between the runner's tasks (one connection, a lock)."""

    def __init__(self, path: str | Path, *, readonly: bool = False) -> None:
        self.path = Path(path)
        try:
            if readonly:
                self._db = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True,
                                           check_same_thread=False)
            else:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._db = sqlite3.connect(self.path, check_same_thread=False)
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.executescript(SCHEMA)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the results store: {exc}", where=str(self.path)) from None
        self._lock = threading.Lock()

    @classmethod
    def open_existing(cls, path: str | Path) -> SelectionStore | None:
        """The store read-only if the file exists and holds selection records, else None (never creates)."""
        p = Path(path)
        if not p.is_file():
            return None
        try:
            st = cls(p, readonly=True)
        except StoreError:
            return None
        if not st.has_table("selection_records"):
            st.close()
            return None
        return st

    def has_table(self, name: str) -> bool:
        with self._lock:
            row = self._db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (name,)).fetchone()
        return row is not None

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> SelectionStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- selection records ---

    def done_keys(self) -> set[str]:
        """Keys of final rows (ok or unparsed); error rows are retried."""
        with self._lock:
            rows = self._db.execute("SELECT key FROM selection_records WHERE status != ?", (Status.ERROR.value,))
            return {r[0] for r in rows}

    def put(self, records: Iterable[SelectionRecord]) -> None:
        rows = [(r.key, r.model, r.benchmark, r.condition, r.presentation, r.run, r.cluster, r.query_index,
                 r.rotation, r.k, r.api, r.position, r.status.value, record_json(r.to_dict())) for r in records]
        if not rows:
            return
        with self._lock:
            self._db.executemany("INSERT OR REPLACE INTO selection_records VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                                 rows)
            self._db.commit()

    def records(self, *, model: str | None = None, benchmark: str | None = None, condition: str | None = None,
                presentation: str | None = None, keys: Sequence[str] | None = None) -> list[SelectionRecord]:
        where, args = self._where(model=model, benchmark=benchmark, condition=condition, presentation=presentation)
        with self._lock:
            rows = self._db.execute(f"SELECT record, key FROM selection_records{where} "  # noqa: S608
                                    "ORDER BY run, cluster, query_index, rotation", args).fetchall()
        wanted = set(keys) if keys is not None else None
        return [SelectionRecord.from_dict(json.loads(r[0])) for r in rows if wanted is None or r[1] in wanted]

    def groups(self) -> list[dict[str, Any]]:
        """Distinct (model, benchmark, condition, presentation) with counts by status."""
        with self._lock:
            rows = self._db.execute(
                "SELECT model, benchmark, condition, presentation, status, COUNT(*) FROM selection_records "
                "GROUP BY model, benchmark, condition, presentation, status ORDER BY model, benchmark, condition, "
                "presentation").fetchall()
        out: dict[tuple[str, str, str, str], dict[str, Any]] = {}
        for model, bench, cond, pres, status, n in rows:
            g = out.setdefault((model, bench, cond, pres), {"model": model, "benchmark": bench, "condition": cond,
                                                            "presentation": pres, "ok": 0, "unparsed": 0,
                                                            "error": 0})
            g[status] = n
        return list(out.values())

    @staticmethod
    def _where(**filters: str | None) -> tuple[str, list[Any]]:
        parts, args = [], []
        for col, val in filters.items():
            if val is not None:
                parts.append(f"{col} = ?")
                args.append(val)
        return (" WHERE " + " AND ".join(parts) if parts else ""), args

    # --- filter evaluation ---

    def filter_done(self) -> set[str]:
        with self._lock:
            rows = self._db.execute("SELECT key FROM selection_filter WHERE status != ?", (Status.ERROR.value,))
            return {r[0] for r in rows}

    def put_filter(self, rows: Iterable[dict[str, Any]]) -> None:
        data = [(r["key"], r["model"], r["eval_set"], r["example"], r["k"], r["status"], record_json(r))
                for r in rows]
        if not data:
            return
        with self._lock:
            self._db.executemany("INSERT OR REPLACE INTO selection_filter VALUES (?,?,?,?,?,?,?)", data)
            self._db.commit()

    def filter_rows(self, *, model: str | None = None, eval_set: str | None = None) -> list[dict[str, Any]]:
        if not self.has_table("selection_filter"):
            return []
        where, args = self._where(model=model, eval_set=eval_set)
        with self._lock:
            rows = self._db.execute(f"SELECT record FROM selection_filter{where} ORDER BY rowid",  # noqa: S608
                                    args).fetchall()
        return [json.loads(r[0]) for r in rows]
