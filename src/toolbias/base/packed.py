"""Compressed episode records: a study's records are stored as raw DEFLATE streams (the
standard library's :mod:`zlib`) against a preset dictionary built from that study's own first
records and kept in the file (table ``record_dicts``), so the repeated system prompt, tool
names, JSON keys and tool results of a study cost a few bytes per record instead of kilobytes.

A packed record is a BLOB: one format byte (:data:`FORMAT_ZLIB`), the dictionary's id (4 bytes,
big-endian; 0: no dictionary), then the DEFLATE stream of the record's JSON text (UTF-8). A
record stored as TEXT is JSON as every earlier release wrote it and is read as it is, so files
of earlier releases need no rewrite.

Why zlib and not zstd: zlib ships with Python, so every toolbias can read every store with no
extra dependency (a store is an archive: it must open wherever toolbias installs), and with a
32 KB preset dictionary it reaches about 730 bytes per oracle-grid record (zstd with a trained
64 KB dictionary: about 490, behind a compiled dependency). The format byte leaves room for a
second codec later.

Dictionaries: until a study has :data:`MIN_SAMPLES` packed records they are packed without one;
the batch that reaches it builds the study's dictionary (records of as many variants as the
samples hold, up to :data:`DICT_BYTES`) and repacks the study's earlier records with it.
"""

from __future__ import annotations

import sqlite3
import struct
import threading
import time
import zlib
from collections.abc import Sequence

from ..errors import StoreError

FORMAT_ZLIB = 1
_HEADER = struct.Struct(">BI")
#: DEFLATE's window: a preset dictionary longer than this is never referenced
DICT_BYTES = 32768
#: a study's records packed without a dictionary before its dictionary is built
MIN_SAMPLES = 32
LEVEL = 6

DICT_SCHEMA = """
CREATE TABLE IF NOT EXISTS record_dicts (
    id INTEGER PRIMARY KEY, study TEXT NOT NULL, format INTEGER NOT NULL, data BLOB NOT NULL, created REAL);
CREATE INDEX IF NOT EXISTS record_dicts_study ON record_dicts (study);
"""


def build_dictionary(samples: Sequence[tuple[str, str]]) -> bytes:
    """A preset dictionary from ``(variant, record JSON)`` samples: one record of each variant
    first (so every variant's tool names are in it), then others, cut to :data:`DICT_BYTES`.
    The end of a DEFLATE dictionary is the cheapest to reference: the most shared text (the
    first records' system prompts and keys, present in all) goes last."""
    firsts: dict[str, int] = {}
    for i, (variant, _) in enumerate(samples):
        firsts.setdefault(variant, i)
    rest = [i for i in range(len(samples)) if i not in set(firsts.values())]
    chosen = [samples[i][1] for i in firsts.values()] + [samples[i][1] for i in rest[::max(1, len(rest) // 8)]]
    out = b""
    for text in chosen:
        if len(out) >= DICT_BYTES:
            break
        out = text.encode("utf-8") + out
    return out[:DICT_BYTES]


def compress(text: str, zdict: bytes | None, dict_id: int) -> bytes:
    co = (zlib.compressobj(LEVEL, zlib.DEFLATED, -15, 9, zlib.Z_DEFAULT_STRATEGY, zdict=zdict) if zdict
          else zlib.compressobj(LEVEL, zlib.DEFLATED, -15, 9))
    return _HEADER.pack(FORMAT_ZLIB, dict_id) + co.compress(text.encode("utf-8")) + co.flush()


class RecordPacker:
    """Packs and unpacks one file's records; its dictionaries are read once and kept."""

    def __init__(self, db: sqlite3.Connection, lock: threading.RLock, path: str) -> None:
        self.db, self.lock, self.path = db, lock, path
        self._dicts: dict[int, bytes] | None = None
        self._by_study: dict[str, int] = {}

    def _load(self) -> dict[int, bytes]:
        if self._dicts is None:
            with self.lock:
                has = self.db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='record_dicts'"
                                      ).fetchone()
                rows = self.db.execute("SELECT id, study, data FROM record_dicts ORDER BY id").fetchall() if has \
                    else []
            self._dicts = {i: bytes(d) for i, _, d in rows}
            for i, study, _ in rows:
                self._by_study.setdefault(study, i)
        return self._dicts

    def unpack(self, value: str | bytes) -> str:
        """The JSON text of a stored record (TEXT rows are returned as they are)."""
        if isinstance(value, str):
            return value
        return self.unpack_utf8(value).decode("utf-8")

    def unpack_utf8(self, value: str | bytes) -> bytes:
        """The JSON text of a stored record as UTF-8 bytes (for writers of files: a packed record
        is never decoded to a string and encoded again)."""
        if isinstance(value, str):
            return value.encode("utf-8")
        fmt, dict_id = _HEADER.unpack_from(value)
        if fmt != FORMAT_ZLIB:
            raise StoreError(f"record in an unknown packed format {fmt}", where=self.path,
                             fix="upgrade toolbias to read this store")
        zdict = self._load().get(dict_id) if dict_id else None
        if dict_id and zdict is None:
            raise StoreError(f"record dictionary {dict_id} is missing", where=self.path,
                             fix="the file is damaged: restore it, or re-run the study into a new --store")
        do = zlib.decompressobj(-15, zdict=zdict) if zdict else zlib.decompressobj(-15)
        return do.decompress(value[_HEADER.size:]) + do.flush()

    def pack_rows(self, study: str, items: Sequence[tuple[str, str]]) -> list[bytes]:
        """Pack one study's ``(variant, record JSON)`` items, building the study's dictionary
        (and repacking its earlier records with it) once enough records exist. Call under the
        store's lock, inside the transaction that writes the rows."""
        self._load()
        dict_id = self._by_study.get(study)
        if dict_id is None:
            earlier = self.db.execute(
                "SELECT key, variant, record FROM episodes WHERE study=? AND typeof(record)='blob' LIMIT ?",
                (study, MIN_SAMPLES)).fetchall()
            if len(earlier) + len(items) >= MIN_SAMPLES:
                old = [(k, v, self.unpack(r)) for k, v, r in earlier]
                zdict = build_dictionary([(v, t) for _, v, t in old] + list(items))
                cur = self.db.execute("INSERT INTO record_dicts (study, format, data, created) VALUES (?, ?, ?, ?)",
                                      (study, FORMAT_ZLIB, zdict, time.time()))
                dict_id = int(cur.lastrowid or 0)
                assert self._dicts is not None
                self._dicts[dict_id] = zdict
                self._by_study[study] = dict_id
                self.db.executemany("UPDATE episodes SET record=? WHERE key=?",
                                    [(compress(t, zdict, dict_id), k) for k, _, t in old])
        zdict_or_none = self._dicts.get(dict_id) if (self._dicts is not None and dict_id) else None
        return [compress(text, zdict_or_none, dict_id or 0) for _, text in items]


__all__ = ["DICT_BYTES", "DICT_SCHEMA", "FORMAT_ZLIB", "MIN_SAMPLES", "RecordPacker", "build_dictionary", "compress"]
