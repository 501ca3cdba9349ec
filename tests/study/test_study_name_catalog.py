"""A default study name names its catalog (issue 24, item 12): a run on another catalog, or under
another match rule, is its own study, so tau2:airline and tau2:retail (here: two artifact folders,
no third-party package needed) share one store, as Table 9 wants; the built-in catalog's studies
keep their names, so stores written before resume as they did."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from toolbias.cli import main
from toolbias.study.runner import StudyConfig
from toolbias.study.success import MatchRule

TOOL = {"uid": "home::set_light", "group": "home", "name": "set_light", "description": "d",
        "parameters": {"type": "object", "properties": {"room": {"type": "string", "enum": ["a", "b"]},
                                                        "on": {"type": "boolean"}}, "required": ["room", "on"]}}


def _catalog(d: Path, room: str) -> Path:
    d.mkdir()
    (d / "tools.json").write_text(json.dumps([TOOL]))
    (d / "queries.jsonl").write_text(json.dumps({
        "id": "q1", "domain": "home", "query": f"light {room} on",
        "gold_calls": [{"name": "set_light", "arguments": {"room": room, "on": True}}]}) + "\n")
    return d


def test_two_catalogs_share_a_store(tmp_path: Path) -> None:
    a, b, store = _catalog(tmp_path / "a", "a"), _catalog(tmp_path / "b", "b"), tmp_path / "s.db"
    for d in (a, b):  # today's code refuses the second: "this study was run with a different configuration"
        main(["run", "--model", "oracle", "--catalog", f"toolschemaspace:{d}", "--variants", "native",
              "--store", str(store)])
    with sqlite3.connect(store) as db:
        studies = dict(db.execute("SELECT study, COUNT(*) FROM episodes GROUP BY study").fetchall())
    assert studies == {f"oracle|strict|base|toolschemaspace:{a}": 1, f"oracle|strict|base|toolschemaspace:{b}": 1}


def test_the_name_tells_catalogs_and_match_rules_apart() -> None:
    names = {StudyConfig(model="oracle", catalog=c, match=m).study_name
             for c in ("builtin", "tau2:airline", "tau2:retail") for m in (None, MatchRule.NORMALISED)}
    assert len(names) == 6
    assert StudyConfig(model="oracle").study_name == "oracle|strict|base"  # the built-in catalog: as before
    assert StudyConfig(model="oracle", catalog="tau2:retail").study_name == "oracle|strict|base|tau2:retail"
    assert StudyConfig(model="m", catalog="tau2:retail", study="mine").study_name == "mine"
