"""A real store with the shapes a report meets: built by the oracle through ``toolbias run``,
then varied in SQL (failures, repeats, a second model), since the oracle alone always succeeds."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from toolbias.cli import main

#: failure modes given to the episodes made to fail (what scoring writes)
MODES = ("wrong_arguments", "under_execution", "rejected_and_stuck", "livelock", "wrong_class")


def run(*argv: str) -> None:
    """``toolbias ARGV...`` in process (exit status 0 expected)."""
    try:
        main(list(argv))
    except SystemExit as exc:
        assert not exc.code, f"toolbias {' '.join(argv)} exited {exc.code}"


def oracle_store(path: Path, *, sample: int = 12, variants: str = "representative") -> Path:
    """The oracle on ``variants`` x a stratified ``sample`` of the built-in tasks, under
    strict/base, lenient/base and strict/instruction."""
    for extra in ((), ("--control", "lenient"), ("--condition", "instruction")):
        run("run", "--model", "oracle", "--variants", variants, "--sample", str(sample), "--store", str(path),
            *extra)
    return path


def vary(path: Path) -> Path:
    """Give the store's task episodes what the oracle never has: about a third fail (with a
    failure mode, some with none), a few have no success value, every episode has a repeat
    under another seed, and a second model holds copies of them all; repeats and copies have
    other outcomes and are stored in reverse order (so tasks and cells interleave)."""
    con = sqlite3.connect(path)
    try:
        cols = [r[1] for r in con.execute("PRAGMA table_info(episodes)")]

        def copy(tag: str, change: dict[str, str], flip_digit: int) -> None:
            change = {"key": f"'{tag}' || key", **change,
                      "success": f"CASE WHEN {draw(flip_digit)} % 2 = 0 THEN 1 - COALESCE(success, 0) ELSE success END"}
            con.execute(f"INSERT INTO episodes ({', '.join(cols)}) SELECT {', '.join(change.get(c, c) for c in cols)} "
                        "FROM episodes WHERE kind='task' ORDER BY rowid DESC")

        con.execute("UPDATE episodes SET success=0, failure_mode=CASE " + f"{draw(2)} % 6 "
                    + " ".join(f"WHEN {j} THEN '{m}'" for j, m in enumerate(MODES)) +
                    f" ELSE NULL END WHERE kind='task' AND {draw(1)} % 3 = 0")
        con.execute(f"UPDATE episodes SET success=NULL WHERE kind='task' AND {draw(3)} = 0 AND {draw(4)} < 4")
        copy("r", {"seed": "seed + 1"}, 5)
        copy("m", {"model": "'oracle-b'"}, 6)
        con.commit()
    finally:
        con.close()
    return path


def draw(i: int) -> str:
    """SQL for the ``i``-th hex digit of an episode's key, 0-15: the key is a SHA-256 prefix, so
    this is a fixed, well-spread draw per episode."""
    return f"(instr('0123456789abcdef', substr(key, {i}, 1)) - 1)"
