"""User files read as JSON: every failure names the file (and line) and comes as the caller's error."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolbias.base.jsonfile import read_json, read_jsonl
from toolbias.errors import ProviderError, VariantError


def test_values_read_back(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text('{"é": [1, 2.5]}', encoding="utf-8")
    (tmp_path / "a.jsonl").write_text('{"n": 1}\n\n[2]\n', encoding="utf-8")
    assert read_json(tmp_path / "a.json") == {"é": [1, 2.5]}
    assert read_jsonl(str(tmp_path / "a.jsonl")) == [{"n": 1}, [2]]


def test_failures_are_the_callers_error_naming_file_and_line(tmp_path: Path) -> None:
    with pytest.raises(VariantError) as missing:
        read_json(tmp_path / "none.json", error=VariantError, missing_fix="name a registered variant")
    assert (missing.value.what, missing.value.fix) == ("file not found", "name a registered variant")
    assert missing.value.where == str(tmp_path / "none.json")

    (tmp_path / "bad.json").write_text('{"a":\n  }', encoding="utf-8")
    with pytest.raises(ProviderError) as syntax:
        read_json(tmp_path / "bad.json", error=ProviderError)
    assert syntax.value.where == f"{tmp_path / 'bad.json'}:2:3"

    (tmp_path / "bin.json").write_bytes(b"\xff\xfe\x00\x81")
    with pytest.raises(ProviderError, match="cannot read file"):
        read_json(tmp_path / "bin.json", error=ProviderError)

    (tmp_path / "rows.jsonl").write_text('{"ok": 1}\n{"broken"\n', encoding="utf-8")
    with pytest.raises(VariantError) as row:
        read_jsonl(tmp_path / "rows.jsonl", error=VariantError)
    assert row.value.where is not None and row.value.where.startswith(f"{tmp_path / 'rows.jsonl'}:2:")
