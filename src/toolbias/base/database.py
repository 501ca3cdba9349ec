"""The one SQLite layer under every toolbias results file: its schema, its version, and the
connection every reader and writer of the file goes through.

One file holds everything a study produces, in tables that never collide:

- ``studies``, ``episodes``: schema-bias studies and their episodes (task and probe kinds);
- ``study_catalogs``, ``study_variants``, ``study_domains``: what a study's catalog and variants
  were when it ran (classes, function counts, variant steps, each played domain's function
  counts), so reports read them instead of rebuilding codecs from the registry;
- ``selection_records``, ``selection_filter``: tool-selection trials and filter answers;
- ``record_dicts``: the per-study dictionaries that packed episode records are compressed
  against (:mod:`toolbias.base.packed`; a record stored as TEXT is plain JSON, as before).

The file's layout version is SQLite's ``user_version`` (mirrored in ``meta.schema_version``).
Files written before the version existed (``user_version`` 0, ``meta.schema_version`` "1"
or no meta table at all: a selection-only file) are migrated on open: every change so far
only adds tables, so migrating is creating what is missing, and old rows are read as they
are. A file written by a newer toolbias is refused with a clear error. Read-only opens
never migrate: readers treat a missing table as empty.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ..errors import StoreError
from .packed import DICT_SCHEMA

#: the layout this toolbias writes (SQLite ``user_version``); 1: episodes only, no user_version set;
#: 3: records of task and probe episodes may be packed (:mod:`toolbias.base.packed`, table ``record_dicts``);
#: 4: each played domain's function counts per study (table ``study_domains``)
SCHEMA_VERSION = 4

EPISODE_COLUMNS = ("key", "study", "kind", "model", "settings_hash", "catalog", "variant", "task_id", "domain",
                   "control", "condition", "seed", "status", "success", "failure_mode", "termination", "n_gold",
                   "n_executed", "n_rejections", "turns", "prompt_tokens", "completion_tokens", "wall_s", "record",
                   "created")
SELECTION_COLUMNS = ("key", "model", "benchmark", "condition", "presentation", "run", "cluster", "query_index",
                     "rotation", "k", "api", "position", "status", "record")
FILTER_COLUMNS = ("key", "model", "eval_set", "example", "k", "status", "record")

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS studies (
    name TEXT PRIMARY KEY, config TEXT NOT NULL, config_hash TEXT NOT NULL, created REAL, updated REAL);
CREATE TABLE IF NOT EXISTS episodes (
    key TEXT PRIMARY KEY, study TEXT NOT NULL, kind TEXT NOT NULL DEFAULT 'task',
    model TEXT NOT NULL, settings_hash TEXT NOT NULL, catalog TEXT NOT NULL, variant TEXT NOT NULL,
    task_id TEXT NOT NULL, domain TEXT NOT NULL, control TEXT NOT NULL, condition TEXT NOT NULL,
    seed INTEGER NOT NULL, status TEXT NOT NULL, success INTEGER, failure_mode TEXT, termination TEXT,
    n_gold INTEGER, n_executed INTEGER, n_rejections INTEGER, turns INTEGER,
    prompt_tokens INTEGER, completion_tokens INTEGER, wall_s REAL, record TEXT NOT NULL, created REAL);
CREATE INDEX IF NOT EXISTS episodes_cell ON episodes (model, variant, control, condition);
CREATE INDEX IF NOT EXISTS episodes_study ON episodes (study, status);
CREATE TABLE IF NOT EXISTS study_catalogs (
    study TEXT PRIMARY KEY, catalog TEXT NOT NULL, fingerprint TEXT NOT NULL,
    native_function_count INTEGER NOT NULL, classes TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS study_variants (
    study TEXT NOT NULL, variant TEXT NOT NULL, steps TEXT NOT NULL, steps_hash TEXT NOT NULL,
    function_count INTEGER NOT NULL, PRIMARY KEY (study, variant));
CREATE TABLE IF NOT EXISTS study_domains (
    study TEXT NOT NULL, domain TEXT NOT NULL, native_function_count INTEGER NOT NULL,
    function_counts TEXT NOT NULL, PRIMARY KEY (study, domain));
CREATE TABLE IF NOT EXISTS selection_records (
    key TEXT PRIMARY KEY, model TEXT NOT NULL, benchmark TEXT NOT NULL, condition TEXT NOT NULL,
    presentation TEXT NOT NULL, run INTEGER NOT NULL, cluster TEXT NOT NULL, query_index INTEGER NOT NULL,
    rotation INTEGER NOT NULL, k INTEGER NOT NULL, api INTEGER, position INTEGER, status TEXT NOT NULL,
    record TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS selection_records_group
    ON selection_records (model, benchmark, condition, presentation);
CREATE TABLE IF NOT EXISTS selection_filter (
    key TEXT PRIMARY KEY, model TEXT NOT NULL, eval_set TEXT NOT NULL, example TEXT NOT NULL,
    k INTEGER NOT NULL, status TEXT NOT NULL, record TEXT NOT NULL);
""" + DICT_SCHEMA

_D = TypeVar("_D", bound="Database")

#: the meta.schema_version values this toolbias can read (and migrate)
_KNOWN_META = {"1", "2", "3", str(SCHEMA_VERSION)}


def insert_sql(table: str, columns: Sequence[str], *, replace: bool = True) -> str:
    """An INSERT of every column (``OR REPLACE``: a re-run replaces a retried row)."""
    verb = "INSERT OR REPLACE" if replace else "INSERT"
    return f"{verb} INTO {table} ({','.join(columns)}) VALUES ({','.join('?' * len(columns))})"


class Database:
    """A toolbias results file: one connection, one lock (so async tasks and threads may share
    it), WAL journal, the schema created or migrated on open.

    ``readonly`` opens an existing file without writing to it (no migration): reports of a
    file on a read-only disk, or of a file another process is writing."""

    def __init__(self, path: str | Path, *, readonly: bool = False) -> None:
        self.path = Path(path)
        self.readonly = readonly
        self.lock = threading.RLock()
        try:
            if readonly:
                self.db = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True, timeout=30,
                                          check_same_thread=False)
            else:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self.db = sqlite3.connect(self.path, timeout=30, check_same_thread=False)
                self.db.execute("PRAGMA journal_mode=WAL")
                self.db.execute("PRAGMA synchronous=NORMAL")
            self._check_and_migrate()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"cannot open store: {exc}", where=str(self.path),
                             fix="point --store at a toolbias SQLite file or a new path") from None

    # -- version ----------------------------------------------------------------
    def schema_version(self) -> int:
        return int(self.db.execute("PRAGMA user_version").fetchone()[0])

    def _check_and_migrate(self) -> None:
        version = self.schema_version()
        meta = None
        if self.has_table("meta"):
            row = self.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            meta = row[0] if row else None
        if version > SCHEMA_VERSION or (meta is not None and meta not in _KNOWN_META):
            found = version if version > SCHEMA_VERSION else meta
            raise StoreError(f"store schema version {found}, this toolbias reads up to {SCHEMA_VERSION}",
                             where=str(self.path), fix="upgrade toolbias to read it, or use a new --store file")
        if self.readonly or (version == SCHEMA_VERSION and meta == str(SCHEMA_VERSION)):
            return
        # version 0 (episodes with meta "1", selection tables only, or an empty file), 2 or 3 -> 4: add tables
        with self.lock:
            self.db.executescript(SCHEMA)
            self.db.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            self.db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            self.db.commit()

    # -- access -------------------------------------------------------------------
    def has_table(self, name: str) -> bool:
        with self.lock:
            row = self.db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (name,)).fetchone()
        return row is not None

    def query(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        """All rows of one SELECT (under the lock)."""
        with self.lock:
            return self.db.execute(sql, args).fetchall()

    def iterate(self, sql: str, args: Sequence[Any] = (), batch: int = 1000) -> Iterator[Any]:
        """The rows of one SELECT, fetched ``batch`` at a time (a large table never sits in memory)."""
        for rows in self.batches(sql, args, batch):
            yield from rows

    def batches(self, sql: str, args: Sequence[Any] = (), batch: int = 5000) -> Iterator[list[Any]]:
        """The rows of one SELECT as lists of up to ``batch`` rows."""
        with self.lock:
            cursor = self.db.execute(sql, args)
        while True:
            with self.lock:
                rows = cursor.fetchmany(batch)
            if not rows:
                return
            yield rows

    def write(self, sql: str, rows: Sequence[Sequence[Any]]) -> int:
        """``sql`` once per row, in one transaction."""
        if not rows:
            return 0
        with self.lock:
            self.db.executemany(sql, rows)
            self.db.commit()
        return len(rows)

    def close(self) -> None:
        self.db.close()

    def __enter__(self: _D) -> _D:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["EPISODE_COLUMNS", "FILTER_COLUMNS", "SCHEMA", "SCHEMA_VERSION", "SELECTION_COLUMNS", "Database",
           "insert_sql"]
