"""Checks on where a command will write, made before the command does any work.

A command that writes a file or a folder calls :func:`output_file` or :func:`output_dir` on
each output path first, naming the inputs it reads: a path that is a folder (or a file), whose
folder is missing or read-only, that is one of the command's inputs, or that holds a SQLite
store is refused with a :class:`~toolbias.errors.ToolbiasError` (exit 2) before any model call,
never found out after the work as a raw ``IsADirectoryError`` or an overwritten store.
:func:`lasting_store` refuses ``--store :memory:`` where the results are meant to last.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from ..errors import ToolbiasError

_SQLITE_HEADER = b"SQLite format 3\x00"
_MEMORY = (":memory:", "")


def _is_store(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(len(_SQLITE_HEADER)) == _SQLITE_HEADER
    except OSError:
        return False


def _same(a: Path, b: Path) -> bool:
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def _input_paths(inputs: Iterable[str | Path | None]) -> list[Path]:
    return [Path(p) for p in inputs if p is not None and str(p) not in _MEMORY]


def _writable_folder(folder: Path, where: str, what: str) -> None:
    """The nearest existing ancestor of ``folder`` must be a folder one can write into."""
    probe = folder
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if not probe.is_dir():
        raise ToolbiasError(f"{what}: '{probe}' is a file, not a folder", where=where,
                            fix="choose a path whose folders are folders")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise ToolbiasError(f"{what}: the folder '{probe}' is not writable", where=where,
                            fix="choose a folder you can write to")


def output_file(path: str | Path, *, option: str, inputs: Iterable[str | Path | None] = (),
                create_parents: bool = False) -> Path:
    """Check that ``path`` can be written as a file by the option ``option`` (e.g. ``--html``)
    without destroying anything: not a folder, its folder exists (or, with ``create_parents``,
    can be made) and is writable, not one of ``inputs``, not a SQLite store. Returns the path."""
    p = Path(path)
    where = f"{option} {path}"
    if str(path) in _MEMORY:
        raise ToolbiasError("no output file named", where=where, fix=f"give {option} a file path")
    if p.is_dir():
        raise ToolbiasError("this is a folder; a file is written here", where=where,
                            fix=f"name a file, e.g. {option} {p / ('report.html' if 'html' in option else 'out')}")
    for inp in _input_paths(inputs):
        if _same(p, inp):
            raise ToolbiasError(f"this is also an input of the command ('{inp}'); writing it would destroy it",
                                where=where, fix=f"choose another file for {option}")
    if _is_store(p):
        raise ToolbiasError("this file is a toolbias store (SQLite); writing here would destroy its results",
                            where=where, fix=f"choose another file for {option}")
    parent = p.parent
    if not parent.exists() and not create_parents:
        raise ToolbiasError(f"the folder '{parent}' does not exist", where=where,
                            fix=f"create it first (mkdir -p {parent}) or choose an existing folder")
    _writable_folder(parent, where, "cannot write the file")
    if p.exists() and not os.access(p, os.W_OK):
        raise ToolbiasError("the file exists and is not writable", where=where, fix="choose another file")
    return p


def output_dir(path: str | Path, *, option: str, inputs: Iterable[str | Path | None] = ()) -> Path:
    """Check that ``path`` can be a folder of outputs for ``option`` (e.g. ``--figures``): a
    folder already, or absent under a writable folder (it is created), never a file or an input."""
    p = Path(path)
    where = f"{option} {path}"
    if str(path) in _MEMORY:
        raise ToolbiasError("no output folder named", where=where, fix=f"give {option} a folder path")
    for inp in _input_paths(inputs):
        if _same(p, inp):
            raise ToolbiasError(f"this is also an input of the command ('{inp}')", where=where,
                                fix=f"choose another folder for {option}")
    if p.exists() and not p.is_dir():
        raise ToolbiasError("this is a file; a folder of files is written here", where=where,
                            fix=f"name a folder (it is created if missing), e.g. {option} {p.with_suffix('')}-out")
    _writable_folder(p, where, "cannot write into the folder")
    return p


def lasting_store(store: str, *, option: str = "--store", command: str) -> str:
    """Refuse an in-memory store (``:memory:`` or an empty name) for ``command``, whose results
    should outlive it. Returns ``store``."""
    if store.strip() in _MEMORY:
        raise ToolbiasError(f"an in-memory store loses every result of `toolbias {command}` when it ends",
                            where=f"{option} {store!r}", fix=f"give {option} a file, e.g. {option} toolbias.db")
    return store


__all__ = ["lasting_store", "output_dir", "output_file"]
