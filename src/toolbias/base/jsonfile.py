"""Reading JSON and JSON Lines files given by a user: every failure is an error that names
the file (and line), raised as the caller's kind of error (a catalog, a variant spec, a script)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import ToolbiasError


def _read_text(path: Path, error: type[ToolbiasError], missing_fix: str, form: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error("file not found", where=str(path), fix=missing_fix) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"cannot read file: {exc}", where=str(path), fix=f"point at a UTF-8 {form}") from None


def read_json(path: str | Path, *, error: type[ToolbiasError] = ToolbiasError,
              missing_fix: str = "check the path") -> Any:
    """The JSON value in ``path``; a missing, unreadable or malformed file raises ``error``."""
    p = Path(path)
    text = _read_text(p, error, missing_fix, "JSON file")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(f"invalid JSON: {exc.msg}", where=f"{p}:{exc.lineno}:{exc.colno}",
                    fix="fix the JSON syntax at that line") from None


def read_jsonl(path: str | Path, *, error: type[ToolbiasError] = ToolbiasError,
               missing_fix: str = "check the path") -> list[Any]:
    """One JSON value per non-blank line of ``path``; errors name the line."""
    p = Path(path)
    rows = []
    for lineno, line in enumerate(_read_text(p, error, missing_fix,
                                             "JSON Lines file (one JSON object per line)").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise error(f"invalid JSON: {exc.msg}", where=f"{p}:{lineno}:{exc.colno}",
                        fix="each line must be one JSON object") from None
    return rows


__all__ = ["read_json", "read_jsonl"]
