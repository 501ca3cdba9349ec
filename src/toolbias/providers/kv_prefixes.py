"""Evaluated prompt prefixes kept on disk, so a later run skips evaluating them again.

On two CPU cores the embedded model evaluates about 80 prompt tokens a second, and every
study begins by evaluating each variant's system prompt and tool list (the default job: two
prefixes of 1,704 and 1,923 tokens; the artifact's catalog: one of about 2,000 per domain and variant). Those tokens are the same in every run of
the same study, so the batched decoder (:mod:`.llama_batch`) saves the KV state of a prefix's
sequence once it is evaluated (``llama_state_seq_get_data``) and a later run loads it into a
sequence (``llama_state_seq_set_data``) instead of evaluating it.

A saved prefix is found by its tokens and by what made its KV values: the model file, the
llama.cpp build and the attention kernel (:func:`prefix_key`); anything else misses. Files are
written whole (a temporary file renamed into place) and pruned, least recently used first, to
:data:`DEFAULT_MAX_MB`. A load that llama.cpp refuses is an ordinary miss: the prefix is then
evaluated. The answers are those of evaluating the prefix, up to the floating-point
differences batching already allows (the saved values were computed by the same kernels).

Where: ``$TOOLBIAS_KV_CACHE`` (a folder, or ``off``), else ``kv/`` beside the model weights'
cache (``$TOOLBIAS_CACHE/kv``, else ``~/.cache/toolbias/kv``).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from array import array
from collections.abc import Sequence
from pathlib import Path

from .weights import cache_dir

#: the environment variable naming the folder, or ``off``
KV_CACHE_ENV = "TOOLBIAS_KV_CACHE"
#: the folder's size limit in MB (``$TOOLBIAS_KV_CACHE_MB``); least recently used files go first
DEFAULT_MAX_MB = 2048
MAX_MB_ENV = "TOOLBIAS_KV_CACHE_MB"
#: prefixes shorter than this are evaluated, not saved (a few seconds of work at most)
MIN_TOKENS = 256
_OFF = {"off", "0", "no", "false", "none"}


def prefix_key(model_sha256: str, engine: str, flash_attn: bool) -> str:
    """What the KV values of a prefix depend on besides its tokens."""
    return hashlib.sha256(f"{model_sha256}|{engine}|fa={int(flash_attn)}".encode()).hexdigest()[:24]


def default_folder() -> Path | None:
    """The folder :data:`KV_CACHE_ENV` names, else the default; None when it says ``off``."""
    value = os.environ.get(KV_CACHE_ENV, "").strip()
    return folder_for(value) if value else cache_dir().parent / "kv"


def folder_for(option: str | None) -> Path | None:
    """The folder a ``kv_cache`` option names: None (not given) the default, an empty value or
    ``off`` none."""
    if option is None:
        return default_folder()
    value = option.strip()
    return None if not value or value.lower() in _OFF else Path(value).expanduser()


class PrefixStore:
    """Saved KV states of prompt prefixes under ``folder/key/``, at most ``max_mb`` in all."""

    def __init__(self, folder: Path, key: str, max_mb: int | None = None) -> None:
        self.folder = folder / key
        if max_mb is None:
            raw = os.environ.get(MAX_MB_ENV, "").strip()
            max_mb = int(raw) if raw.isdigit() else DEFAULT_MAX_MB
        self.max_bytes = max(0, max_mb) << 20
        #: prefixes loaded, saved, and looked for in vain (this process)
        self.loaded = self.saved = self.missed = 0

    def _path(self, tokens: Sequence[int]) -> Path:
        digest = hashlib.sha256(array("i", tokens).tobytes()).hexdigest()[:40]
        return self.folder / f"{len(tokens)}-{digest}.kv"

    def has(self, tokens: Sequence[int]) -> bool:
        return self._path(tokens).is_file()

    def load(self, tokens: Sequence[int]) -> bytes | None:
        """The saved state of exactly ``tokens``, or None."""
        path = self._path(tokens)
        try:
            data = path.read_bytes()
            os.utime(path)  # recently used: pruned last
        except OSError:
            self.missed += 1
            return None
        self.loaded += 1
        return data

    def discard(self, tokens: Sequence[int]) -> None:
        """Forget a saved state llama.cpp refused (a later run saves a good one)."""
        self._path(tokens).unlink(missing_ok=True)

    def save(self, tokens: Sequence[int], data: bytes) -> None:
        """Keep ``data`` as the state of ``tokens`` (best effort: a full disk only costs the saving)."""
        if not data or len(data) > self.max_bytes:
            return
        path = self._path(tokens)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.folder, suffix=".part")
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)
        except OSError:
            return
        self.saved += 1
        self._prune()

    def _prune(self) -> None:
        files = []
        for p in self.folder.glob("*.kv"):
            try:
                st = p.stat()
            except OSError:
                continue
            files.append((st.st_mtime, st.st_size, p))
        total = sum(size for _, size, _ in files)
        for _, size, p in sorted(files, key=lambda f: f[0]):
            if total <= self.max_bytes:
                break
            p.unlink(missing_ok=True)
            total -= size


__all__ = ["DEFAULT_MAX_MB", "KV_CACHE_ENV", "MAX_MB_ENV", "MIN_TOKENS", "PrefixStore", "default_folder",
           "folder_for", "prefix_key"]
