"""The results store: schema-bias studies and their episodes, in a toolbias results file
(:mod:`toolbias.base.database`: one SQLite layer, versioned, shared with tool-selection records).

Episode key (documented contract): SHA-256 over the canonical JSON of
``[model spec, provider settings hash, catalog fingerprint, variant name + steps hash,
task id, schema control, condition, seed]``. Re-running the same study skips keys
whose status is ``done`` and re-runs ``infra_error`` ones; a study name whose stored
configuration differs from the new one is refused with the differences listed.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

from .base.canonical import canonical_json, sha256_of, sha256_text
from .base.database import EPISODE_COLUMNS, Database, insert_sql
from .base.packed import RecordPacker
from .errors import StoreError

COLUMNS = EPISODE_COLUMNS
_INSERT = insert_sql("episodes", COLUMNS)
_KEY, _STUDY, _KIND, _VARIANT, _RECORD = (COLUMNS.index(c) for c in ("key", "study", "kind", "variant", "record"))
#: kinds whose records are stored packed (:mod:`toolbias.base.packed`): the grid's episodes. Rows
#: other writers keep rewriting (the proxy's live conversations) or import stay JSON text
PACKED_KINDS = frozenset({"task", "probe"})
#: the narrow columns (everything but the record): what reports aggregate over
NARROW_COLUMNS = tuple(c for c in COLUMNS if c != "record")
#: what :meth:`Store.tallies` counts episodes by
TALLY_KEYS = ("study", "catalog", "domain", "model", "variant", "control", "condition", "task_id", "failure_mode")
#: narrow columns with few distinct values: one string object per value when read (a million rows
#: of the same model name cost one string, not a million)
_SHARED_VALUES = frozenset({"study", "kind", "model", "settings_hash", "catalog", "variant", "task_id", "domain",
                            "control", "condition", "status", "failure_mode", "termination"})


class Tally(NamedTuple):
    """Finished episodes sharing every :data:`TALLY_KEYS` value, counted: ``episodes`` in all,
    ``scored`` with a success value, ``successes``; ``first`` and ``last`` the rowids of the first
    and the last of them (the order they were stored in)."""

    study: str
    catalog: str
    domain: str
    model: str
    variant: str
    control: str
    condition: str
    task_id: str
    failure_mode: str | None
    episodes: int
    scored: int
    successes: int
    first: int
    last: int


def stable_hash(value: Any, n: int = 16) -> str:
    return sha256_of(value, n)


def _flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"settings": {"generate": {"temperature": 0}}}`` -> ``{"settings.generate.temperature": 0}``,
    so a changed configuration is explained setting by setting."""
    out: dict[str, Any] = {}
    for k, v in config.items():
        if isinstance(v, Mapping) and v:
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


_RECORD_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def record_json(value: Any) -> str:
    """JSON text for a stored record. Model output may hold lone surrogates (a broken ``\\ud83d``
    escape), which SQLite and UTF-8 files refuse: such records are written with ASCII escapes,
    which read back to the same value."""
    text = _RECORD_ENCODER.encode(value)
    if text.isascii():  # the usual case: nothing to check (a lone surrogate is not ASCII)
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(value, ensure_ascii=True, separators=(",", ":"))
    return text


def episode_key(*, model: str, settings_hash: str, catalog: str, variant: str, task_id: str, control: str,
                condition: str, seed: int, kind: str = "task") -> str:
    return episode_keys(model=model, settings_hash=settings_hash, catalog=catalog, variant=variant,
                        control=control, condition=condition, seed=seed, kind=kind)(task_id)


def episode_keys(*, model: str, settings_hash: str, catalog: str, variant: str, control: str, condition: str,
                 seed: int, kind: str = "task") -> Callable[[str], str]:
    """``task_id -> episode key`` for one cell: :func:`stable_hash` of the list
    ``[model, settings_hash, catalog, variant, task_id, control, condition, seed, kind]``, with
    the canonical JSON of the fields that do not change built once (a grid plans one key per
    episode)."""
    head = "[" + ",".join(map(canonical_json, [model, settings_hash, catalog, variant])) + ","
    tail = "," + ",".join(map(canonical_json, [control, condition, seed, kind])) + "]"

    def key(task_id: str) -> str:
        return sha256_text(f"{head}{canonical_json(task_id)}{tail}", 32)
    return key


@dataclass
class EpisodeRow:
    """One stored episode: the key fields, the scores, and the full record (JSON)."""

    key: str
    study: str
    kind: str
    model: str
    settings_hash: str
    catalog: str
    variant: str
    task_id: str
    domain: str
    control: str
    condition: str
    seed: int
    status: str  # "done" | "infra_error"
    success: bool | None
    failure_mode: str | None
    termination: str
    n_gold: int
    n_executed: int
    n_rejections: int
    turns: int
    prompt_tokens: int
    completion_tokens: int
    wall_s: float
    record: dict[str, Any]
    created: float = 0.0

    def values(self) -> tuple[Any, ...]:
        d = self.__dict__.copy()
        d["record"] = record_json(self.record)
        d["success"] = None if self.success is None else int(self.success)
        d["created"] = self.created or time.time()
        return tuple(d[c] for c in COLUMNS)

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> EpisodeRow:
        d = dict(zip(COLUMNS, row, strict=True))
        d["record"] = json.loads(d["record"])
        d["success"] = None if d["success"] is None else bool(d["success"])
        return cls(**d)


@dataclass(frozen=True)
class VariantMeta:
    """What one variant of a study was when the study ran: its steps and its function count (on a
    catalog of isolated domains, BFCL's entries, the count over the entries the study plays)."""

    variant: str
    steps: list[Any]
    steps_hash: str
    function_count: int


@dataclass(frozen=True)
class DomainMeta:
    """One domain a study plays: its native functions, and the functions an episode there sees
    under each variant (the per-domain ratios of Figure 3's query-weighted x-axis)."""

    native_function_count: int
    function_counts: dict[str, int]


@dataclass(frozen=True)
class StudyMeta:
    """What a study's catalog and variants were when it ran, stored with it so a report needs
    neither the catalog file nor the variant registry (a variant given as a spec file included).
    ``domains``: the domains it plays (studies stored before toolbias kept them have none)."""

    study: str
    catalog: str
    fingerprint: str
    native_function_count: int
    classes: dict[str, str]
    variants: dict[str, VariantMeta]
    domains: dict[str, DomainMeta] = field(default_factory=dict)


class Store(Database):
    """A study's SQLite file (:class:`~toolbias.base.database.Database`): studies and their
    episodes. Safe to reopen; writes are batched by the caller (:mod:`toolbias.base.engine`).

    Records of :data:`PACKED_KINDS` are stored compressed (:mod:`toolbias.base.packed`) unless
    ``pack_records`` is false (the layout earlier releases wrote: JSON text); both read alike."""

    pack_records: bool = True

    @property
    def packer(self) -> RecordPacker:
        p = self.__dict__.get("_packer")
        if p is None:
            p = self.__dict__["_packer"] = RecordPacker(self.db, self.lock, str(self.path))
        return p

    def unpack_record(self, value: str | bytes) -> str:
        """The JSON text of a stored ``record`` value (packed or not)."""
        return self.packer.unpack(value)

    # -- studies --------------------------------------------------------------
    def begin_study(self, name: str, config: Mapping[str, Any]) -> None:
        """Record a study's configuration, or check it matches the stored one."""
        config_json = json.dumps(config, sort_keys=True, default=str)
        h = stable_hash(config)
        with self.lock:
            row = self.db.execute("SELECT config, config_hash FROM studies WHERE name=?", (name,)).fetchone()
            now = time.time()
            if row is None:
                self.db.execute("INSERT INTO studies VALUES (?, ?, ?, ?, ?)", (name, config_json, h, now, now))
                self.db.commit()
                return
            if row[1] == h:
                self.db.execute("UPDATE studies SET updated=? WHERE name=?", (now, name))
                self.db.commit()
                return
        old, new = _flatten(json.loads(row[0])), _flatten(json.loads(config_json))
        diffs = [f"{k}: stored {old.get(k)!r} != now {new.get(k)!r}"
                 for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
        raise StoreError(
            "this study was run with a different configuration:\n  " + "\n  ".join(diffs[:10]),
            where=f"{self.path} (study '{name}')",
            fix="re-run with the original options to resume, or use --study NEW_NAME / a new --store",
        )

    def studies(self) -> dict[str, dict[str, Any]]:
        return {n: json.loads(c) for n, c in self.query("SELECT name, config FROM studies")}

    def put_study_meta(self, meta: StudyMeta) -> None:
        """Record (or refresh) what a study's catalog and variants are."""
        with self.lock:
            self.db.execute("INSERT OR REPLACE INTO study_catalogs VALUES (?, ?, ?, ?, ?)",
                            (meta.study, meta.catalog, meta.fingerprint, meta.native_function_count,
                             canonical_json(meta.classes)))
            self.db.executemany("INSERT OR REPLACE INTO study_variants VALUES (?, ?, ?, ?, ?)",
                                [(meta.study, v.variant, canonical_json(v.steps), v.steps_hash, v.function_count)
                                 for v in meta.variants.values()])
            self.db.executemany("INSERT OR REPLACE INTO study_domains VALUES (?, ?, ?, ?)",
                                [(meta.study, d, dm.native_function_count, canonical_json(dm.function_counts))
                                 for d, dm in meta.domains.items()])
            self.db.commit()

    def study_meta(self) -> dict[str, StudyMeta]:
        """Study name -> its stored catalog and variant metadata (studies run before toolbias
        stored it have none: callers fall back to rebuilding it)."""
        if not self.has_table("study_catalogs"):  # an old file opened read-only
            return {}
        variants: dict[str, dict[str, VariantMeta]] = {}
        for study, variant, steps, steps_hash, count in self.query(
                "SELECT study, variant, steps, steps_hash, function_count FROM study_variants ORDER BY rowid"):
            variants.setdefault(study, {})[variant] = VariantMeta(variant, json.loads(steps), steps_hash, count)
        domains: dict[str, dict[str, DomainMeta]] = {}
        if self.has_table("study_domains"):  # (an older file opened read-only has none)
            for study, domain, native, counts in self.query(
                    "SELECT study, domain, native_function_count, function_counts FROM study_domains ORDER BY rowid"):
                domains.setdefault(study, {})[domain] = DomainMeta(native, json.loads(counts))
        return {study: StudyMeta(study, catalog, fp, native, json.loads(classes), variants.get(study, {}),
                                 domains.get(study, {}))
                for study, catalog, fp, native, classes in self.query(
                    "SELECT study, catalog, fingerprint, native_function_count, classes FROM study_catalogs")}

    # -- episodes -------------------------------------------------------------
    def done_keys(self, study: str | None = None) -> set[str]:
        q = "SELECT key FROM episodes WHERE status='done'" + (" AND study=?" if study else "")
        return {k for (k,) in self.query(q, (study,) if study else ())}

    def put_values(self, values: Sequence[tuple[Any, ...]]) -> int:
        """Store rows already in column form (:meth:`EpisodeRow.values`), in one transaction;
        records of :data:`PACKED_KINDS` are packed here."""
        if not values:
            return 0
        with self.lock:
            rows = self._packed(values) if self.pack_records else values
            self.db.executemany(_INSERT, rows)
            self.db.commit()
        return len(rows)

    def _packed(self, values: Sequence[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        by_study: dict[str, list[int]] = {}
        for i, v in enumerate(values):
            if v[_KIND] in PACKED_KINDS and isinstance(v[_RECORD], str):
                by_study.setdefault(v[_STUDY], []).append(i)
        out = list(values)
        for study, idx in by_study.items():
            blobs = self.packer.pack_rows(study, [(values[i][_VARIANT], values[i][_RECORD]) for i in idx])
            for i, blob in zip(idx, blobs, strict=True):
                out[i] = (*values[i][:_RECORD], blob, *values[i][_RECORD + 1:])
        return out

    def rows(self, *, study: str | None = None, kind: str | None = None, status: str | None = "done",
             with_record: bool = True) -> Iterator[EpisodeRow]:
        where, args = [], []
        for col, val in (("study", study), ("kind", kind), ("status", status)):
            if val is not None:
                where.append(f"{col}=?")
                args.append(val)
        cols = ",".join(c if (with_record or c != "record") else "'{}'" for c in COLUMNS)
        q = f"SELECT {cols} FROM episodes" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY rowid"
        unpack = self.packer.unpack
        for row in self.iterate(q, args):
            if with_record and not isinstance(row[_RECORD], str):
                row = (*row[:_RECORD], unpack(row[_RECORD]), *row[_RECORD + 1:])
            yield EpisodeRow.from_row(row)

    def narrow_columns(self, *, kind: str | None = None, status: str | None = "done",
                       catalog_prefix: str | None = None) -> dict[str, list[Any]]:
        """Every column but the record, as lists (a columnar read for reports: no record is
        read or decoded), in row order, with ``success`` as bool or None; ``catalog_prefix``:
        only episodes whose catalog starts with it."""
        where: list[str] = []
        args: list[Any] = []
        for col, val in (("kind", kind), ("status", status)):
            if val is not None:
                where.append(f"{col}=?")
                args.append(val)
        if catalog_prefix is not None:
            where.append("substr(catalog, 1, ?)=?")
            args += [len(catalog_prefix), catalog_prefix]
        q = f"SELECT {','.join(NARROW_COLUMNS)} FROM episodes" + (
            " WHERE " + " AND ".join(where) if where else "") + " ORDER BY rowid"
        cols: dict[str, list[Any]] = {c: [] for c in NARROW_COLUMNS}
        columns: list[tuple[list[Any], Callable[[Any, Any], Any] | None]] = [
            (cols[c], {}.setdefault if c in _SHARED_VALUES else None) for c in NARROW_COLUMNS]
        for batch in self.batches(q, args):  # column by column, a batch at a time: no list of row tuples
            for (out, shared), values in zip(columns, zip(*batch, strict=True), strict=True):
                out.extend(values if shared is None else [shared(v, v) for v in values])
        cols["success"] = [None if x is None else bool(x) for x in cols["success"]]
        return cols

    def tallies(self, *, kind: str = "task", status: str = "done") -> list[Tally]:
        """Episodes of ``kind`` counted per :data:`TALLY_KEYS` in SQL (no record and no row is
        read into Python: a million episodes of one model's grid are a few hundred thousand
        tallies), in the order their first episodes were stored. The last answer is kept until
        the file changes (a report and its mitigation table count once)."""
        with self.lock:
            stamp = (kind, status, self.db.total_changes, self.db.execute("PRAGMA data_version").fetchone()[0])
        kept = self.__dict__.get("_tallies")
        if kept is not None and kept[0] == stamp:
            return list(kept[1])
        keys = ",".join(TALLY_KEYS)
        q = (f"SELECT {keys}, COUNT(*), COUNT(success), COALESCE(SUM(success != 0), 0), MIN(rowid), MAX(rowid) "
             f"FROM episodes WHERE kind=? AND status=? GROUP BY {keys} ORDER BY MIN(rowid)")
        shared: dict[Any, Any] = {}
        keep = shared.setdefault
        n = len(TALLY_KEYS)
        out = [Tally(*[keep(v, v) for v in row[:n]], *row[n:])
               for batch in self.batches(q, (kind, status)) for row in batch]
        self.__dict__["_tallies"] = (stamp, out)
        return list(out)

    def count(self, status: str | None = None) -> int:
        q = "SELECT COUNT(*) FROM episodes" + (" WHERE status=?" if status else "")
        return int(self.query(q, (status,) if status else ())[0][0])


def merge_stores(inputs: Sequence[str | Path], output: str | Path) -> dict[str, int]:
    """Merge shard stores into ``output``. The same episode key in two inputs is refused;
    a study name with different configurations in two inputs is reported as a conflict."""
    out_path = Path(output)
    if out_path.exists():
        raise StoreError("output store already exists", where=str(out_path), fix="choose a new -o path")
    seen: dict[str, str] = {}
    configs: dict[str, tuple[str, str]] = {}
    problems: list[str] = []
    for path in inputs:
        if not Path(path).exists():
            raise StoreError("store not found", where=str(path))
        with Store(path) as s:
            for name, h in s.db.execute("SELECT name, config_hash FROM studies"):
                if name in configs and configs[name][1] != h:
                    problems.append(f"study '{name}' has different configurations in {configs[name][0]} and {path}")
                configs.setdefault(name, (str(path), h))
            for (key,) in s.db.execute("SELECT key FROM episodes WHERE status='done'"):
                if key in seen:
                    problems.append(f"episode {key[:12]} is in both {seen[key]} and {path}")
                seen[key] = str(path)
    if problems:
        raise StoreError("cannot merge:\n  " + "\n  ".join(problems[:20]) +
                         (f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""),
                         fix="merge shards of one study run with --shard i/n (each key in exactly one shard)")
    counts = {"episodes": 0, "studies": 0}
    with Store(out_path) as out:
        for path in inputs:
            with Store(path) as s:
                for row in s.db.execute("SELECT name, config, config_hash, created, updated FROM studies"):
                    out.db.execute("INSERT OR IGNORE INTO studies VALUES (?, ?, ?, ?, ?)", row)
                for meta in s.study_meta().values():  # shards of one study: the same metadata
                    if meta.study not in out.study_meta():
                        out.put_study_meta(meta)
                rows = s.db.execute(f"SELECT {','.join(COLUMNS)} FROM episodes WHERE status='done'").fetchall()
                # packed records are repacked against the output's dictionaries (ids differ per file)
                rows = [r if isinstance(r[_RECORD], str) else (*r[:_RECORD], s.unpack_record(r[_RECORD]),
                                                               *r[_RECORD + 1:]) for r in rows]
                out.db.executemany(f"INSERT INTO episodes ({','.join(COLUMNS)}) VALUES ({','.join('?' * len(COLUMNS))})",
                                   out._packed(rows))
                counts["episodes"] += len(rows)
                counts["other_rows"] = counts.get("other_rows", 0) + _copy_other_tables(s.db, out.db)
        out.db.commit()
        counts["studies"] = len(out.studies())
    return counts


_CORE_TABLES = frozenset({"meta", "studies", "episodes", "study_catalogs", "study_variants", "study_domains",
                          "record_dicts"})


def _copy_other_tables(src: sqlite3.Connection, dst: sqlite3.Connection) -> int:
    """Copy tables other modules keep in the study file (tool-selection records ...):
    created as in the source, rows inserted unless their primary key is already there."""
    n = 0
    tables = src.execute("SELECT name, sql FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'")
    for name, sql in tables.fetchall():
        if name in _CORE_TABLES or not sql:
            continue
        dst.execute(sql.replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS", 1))
        for idx_sql, in src.execute("SELECT sql FROM sqlite_master WHERE type='index' AND tbl_name=? AND sql IS NOT NULL",
                                    (name,)).fetchall():
            dst.execute(idx_sql.replace("CREATE INDEX", "CREATE INDEX IF NOT EXISTS", 1)
                        .replace("CREATE UNIQUE INDEX", "CREATE UNIQUE INDEX IF NOT EXISTS", 1))
        rows = src.execute(f'SELECT * FROM "{name}"').fetchall()
        if rows:
            marks = ",".join("?" * len(rows[0]))
            cur = dst.executemany(f'INSERT OR IGNORE INTO "{name}" VALUES ({marks})', rows)
            n += max(cur.rowcount, 0)
    return n


def episodes_dataframe(store: str | Path | Store, *, with_record: bool = False, kind: str | None = "task",
                       catalog_prefix: str | None = None) -> Any:
    """A pandas DataFrame of finished episodes (one row each; ``record`` holds the full trace);
    ``catalog_prefix``: only episodes whose catalog starts with it."""
    import pandas as pd

    s = store if isinstance(store, Store) else Store(store)
    try:
        if not with_record:  # a columnar read of the narrow columns (no record read)
            cols = s.narrow_columns(kind=kind, catalog_prefix=catalog_prefix)
            # (no rows: object columns, as a frame of no records has, not float ones)
            return pd.DataFrame(cols if cols["key"] else [], columns=list(NARROW_COLUMNS))
        rows = [r.__dict__ for r in s.rows(kind=kind, with_record=with_record)
                if catalog_prefix is None or r.catalog.startswith(catalog_prefix)]
    finally:
        if not isinstance(store, Store):
            s.close()
    df = pd.DataFrame(rows, columns=list(COLUMNS))
    if not with_record:
        df = df.drop(columns=["record"])
    return df


_NARROW_SUCCESS = NARROW_COLUMNS.index("success")
#: the end of an exported line as a text-mode file writes ``"\n"`` on this platform
_EOL = os.linesep.encode()


def _export_jsonl(store: Store, fh: BinaryIO) -> int:
    """Write every finished episode to ``fh`` as one JSON object a line: the narrow columns in
    :data:`COLUMNS` order, then ``record``. The line is :func:`record_json` of that object; the
    stored record is written through as it is stored (every writer stored it as
    :func:`record_json` text, so parsing and encoding it again gives the same bytes), except a
    record holding a lone surrogate (stored ASCII-escaped: its line is escaped whole), which is
    encoded again as before. Returns the episodes written."""
    q = f"SELECT {','.join(NARROW_COLUMNS)}, record FROM episodes WHERE status='done' ORDER BY rowid"
    utf8 = store.packer.unpack_utf8
    encode = _RECORD_ENCODER.encode
    n = 0
    tail = b"}" + _EOL
    for batch in store.batches(q, (), 1000):
        parts: list[bytes] = []  # joined once per batch: a record's bytes are copied once
        for row in batch:
            values = list(row[:-1])
            if values[_NARROW_SUCCESS] is not None:
                values[_NARROW_SUCCESS] = bool(values[_NARROW_SUCCESS])
            head = dict(zip(NARROW_COLUMNS, values, strict=True))
            text = utf8(row[-1])
            if b"\\ud" in text:  # a surrogate escape (rare): the record and its line as record_json words them
                head["record"] = json.loads(text)
                parts += (record_json(head).encode("utf-8"), _EOL)
            else:
                parts += (encode(head)[:-1].encode("utf-8"), b',"record":', text, tail)
        fh.write(b"".join(parts))
        n += len(batch)
    return n


def export(store: str | Path, fmt: str, output: str | Path) -> int:
    """Write finished episodes as ``jsonl`` (full records), ``csv`` or ``parquet`` (flat columns)."""
    out = Path(output)
    if fmt == "jsonl":
        with Store(store) as s, out.open("wb") as fh:
            return _export_jsonl(s, fh)
    df = episodes_dataframe(store, kind=None)
    if fmt == "csv":
        df.to_csv(out, index=False)
    elif fmt == "parquet":
        try:
            df.to_parquet(out, index=False)
        except ImportError:
            from .errors import MissingExtraError

            raise MissingExtraError("pyarrow", "parquet", "Parquet export") from None
    else:
        raise StoreError(f"unknown export format '{fmt}'", fix="use jsonl, csv or parquet")
    return len(df)
