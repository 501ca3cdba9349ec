"""A schema nested a few hundred levels deep (issue 24, item 8) is refused with a clear error,
never a RecursionError: by the loaders (``catalog stats`` exits 2), by ``inline_refs`` and by the
proxy (a 400 naming the request's tools, not a 500 with a 3,000-line traceback). Schemas of
ordinary depth still load."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from toolbias.catalog.openai_format import parse_tools
from toolbias.catalog.refs import MAX_NESTING, check_nesting, inline_refs
from toolbias.cli import main
from toolbias.errors import CatalogError


def _deep(levels: int) -> dict[str, Any]:
    s: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        s = {"type": "object", "properties": {"x": s}}
    return s


def _tools(levels: int) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": "f", "description": "d", "parameters": _deep(levels)}}]


def test_catalog_stats_refuses_a_deep_schema(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "deep.json"
    f.write_text(json.dumps(_tools(250)))
    with pytest.raises(SystemExit) as exc:
        main(["catalog", "stats", "--catalog", f"tools:{f}"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "deep.json" in err and "deeper than" in err and "fix:" in err and "Recursion" not in err


def test_inline_refs_and_parse_tools_refuse_it() -> None:
    with pytest.raises(CatalogError, match="deeper than"):
        inline_refs(_deep(2000))
    with pytest.raises(CatalogError, match="deeper than"):
        parse_tools(_tools(250), domain="d", source="request 'tools'")
    check_nesting(_deep(MAX_NESTING // 2 - 1))  # 2 containers a level: just under the limit
    with pytest.raises(CatalogError):
        check_nesting(_deep(MAX_NESTING // 2))


def test_an_ordinary_schema_still_loads() -> None:
    tools = parse_tools(_tools(12), domain="d", source="t")
    assert tools[0].name == "f"


def test_the_proxy_answers_400_not_500() -> None:
    pytest.importorskip("uvicorn", reason="toolbias proxy needs uvicorn (pip install 'toolbias[proxy]')")
    from tests.support.agents import MODEL, proxy_server
    from tests.support.servers import FakeOpenAIServer

    with FakeOpenAIServer(models=(MODEL,)) as upstream, proxy_server(upstream, "fully_merged") as proxy:
        r = httpx.post(f"{proxy.base_url}/chat/completions", timeout=30,
                       json={"model": MODEL, "messages": [{"role": "user", "content": "x"}], "tools": _tools(250)})
    assert r.status_code == 400, r.text[:500]
    assert "deeper than" in r.json()["error"]["message"] and not upstream.requests
