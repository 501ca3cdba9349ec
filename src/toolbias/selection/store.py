"""Selection records in a toolbias results file: the queries over the two selection tables
of the shared store layer (:mod:`toolbias.base.database`, where their schema and version live).

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
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..base.database import FILTER_COLUMNS, SELECTION_COLUMNS, Database, insert_sql
from ..errors import StoreError
from ..store import record_json
from .records import SelectionRecord, Status

_INSERT_RECORD = insert_sql("selection_records", SELECTION_COLUMNS)
_INSERT_FILTER = insert_sql("selection_filter", FILTER_COLUMNS)
#: the status column of a stored row (:func:`record_row`, :func:`filter_row`)
STATUS = SELECTION_COLUMNS.index("status")
FILTER_STATUS = FILTER_COLUMNS.index("status")


def record_row(r: SelectionRecord) -> tuple[Any, ...]:
    """A record as the column values of ``selection_records`` (its JSON encoded once)."""
    return (r.key, r.model, r.benchmark, r.condition, r.presentation, r.run, r.cluster, r.query_index,
            r.rotation, r.k, r.api, r.position, r.status.value, record_json(r.to_dict()))


def record_of_row(row: Sequence[Any]) -> SelectionRecord:
    return SelectionRecord.from_dict(json.loads(row[-1]))


def filter_row(r: Mapping[str, Any]) -> tuple[Any, ...]:
    """A filter answer (a dict, see :func:`~toolbias.selection.mitigate.aevaluate_filter`) as column values."""
    return (r["key"], r["model"], r["eval_set"], r["example"], r["k"], r["status"], record_json(r))


class SelectionStore(Database):
    """Selection records in a results file (:class:`~toolbias.base.database.Database`: one
    connection and lock, safe to share between the runner's tasks)."""

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

    # --- selection records ---

    def done_keys(self) -> set[str]:
        """Keys of final rows (ok or unparsed); error rows are retried."""
        rows = self.query("SELECT key FROM selection_records WHERE status != ?", (Status.ERROR.value,))
        return {r[0] for r in rows}

    def put(self, records: Iterable[SelectionRecord]) -> None:
        self.put_rows([record_row(r) for r in records])

    def put_rows(self, rows: Sequence[tuple[Any, ...]]) -> int:
        """Store rows already in column form (:func:`record_row`), in one transaction."""
        return self.write(_INSERT_RECORD, rows)

    def records(self, *, model: str | None = None, benchmark: str | None = None, condition: str | None = None,
                presentation: str | None = None, keys: Sequence[str] | None = None) -> list[SelectionRecord]:
        where, args = self._where(model=model, benchmark=benchmark, condition=condition, presentation=presentation)
        rows = self.query(f"SELECT key, record FROM selection_records{where} "  # noqa: S608
                          "ORDER BY run, cluster, query_index, rotation", args)
        wanted = set(keys) if keys is not None else None
        return [record_of_row(r) for r in rows if wanted is None or r[0] in wanted]

    def groups(self) -> list[dict[str, Any]]:
        """Distinct (model, benchmark, condition, presentation) with counts by status."""
        rows = self.query(
            "SELECT model, benchmark, condition, presentation, status, COUNT(*) FROM selection_records "
            "GROUP BY model, benchmark, condition, presentation, status ORDER BY model, benchmark, condition, "
            "presentation")
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

    def put_filter(self, rows: Iterable[Mapping[str, Any]]) -> None:
        self.put_filter_rows([filter_row(r) for r in rows])

    def put_filter_rows(self, rows: Sequence[tuple[Any, ...]]) -> int:
        return self.write(_INSERT_FILTER, rows)

    def filter_rows(self, *, model: str | None = None, eval_set: str | None = None) -> list[dict[str, Any]]:
        if not self.has_table("selection_filter"):
            return []
        where, args = self._where(model=model, eval_set=eval_set)
        rows = self.query(f"SELECT record FROM selection_filter{where} ORDER BY rowid", args)  # noqa: S608
        return [json.loads(r[0]) for r in rows]
