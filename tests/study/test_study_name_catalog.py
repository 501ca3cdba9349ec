"""A default study name names its catalog (issue 24, item 12): a run on another catalog, or under
another match rule, is its own study, so tau2:airline and tau2:retail (here: two artifact folders,
no third-party package needed) share one store, as Table 9 wants; the built-in catalog's studies
keep their names, so stores written before resume as they did."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

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


def _bfcl_folder(d: Path, n: int) -> Path:
    """A BFCL folder of ``n`` entries, each with two functions of its own."""
    d.mkdir()
    entries, answers = [], []
    for i in range(n):
        fns = [{"name": f"geo.area_{i}", "description": "area", "parameters": {
                    "type": "dict", "properties": {"r": {"type": "float"}, "unit": {"type": "string"}},
                    "required": ["r"]}},
               {"name": f"geo.perimeter_{i}", "description": "perimeter", "parameters": {
                    "type": "dict", "properties": {"r": {"type": "float"}}, "required": ["r"]}}]
        entries.append({"id": f"simple_{i}", "question": [[{"role": "user", "content": f"area of {i}"}]],
                        "function": fns})
        answers.append({"id": f"simple_{i}", "ground_truth": [{f"geo.area_{i}": {"r": [float(i + 1)]}}]})
    (d / "BFCL_v4_simple.json").write_text("\n".join(json.dumps(e) for e in entries) + "\n")
    (d / "possible_answer").mkdir()
    (d / "possible_answer" / "BFCL_v4_simple.json").write_text("\n".join(json.dumps(a) for a in answers) + "\n")
    return d


def test_a_sample_of_isolated_entries_builds_only_the_entries_it_plays(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """On a catalog of isolated domains (BFCL entries), building, describing (the stored metadata)
    and playing a sample builds each variant once on each entry it plays (and on the first entry,
    which checks the spec builds), never on the others; the stored function counts are those of
    the played entries, as each entry's variant counts them."""
    from toolbias.catalog import load_catalog
    from toolbias.store import Store
    from toolbias.study.runner import build_study, run_study
    from toolbias.variants import build_codec, resolve
    from toolbias.variants.isolated import domain_catalog

    spec = f"bfcl:{_bfcl_folder(tmp_path / 'bfcl', 12)}"
    built: list[tuple[str, str]] = []
    real = resolve._build_codec

    def spy(catalog, variant):
        built.append((variant.name, catalog.domains[0].name))
        return real(catalog, variant)

    monkeypatch.setattr(resolve, "_build_codec", spy)
    variants = "native,fully_merged,fully_split,schema_discovery"
    study = build_study(StudyConfig(model="oracle", catalog=spec, variants=variants, sample=3, seed=1))
    played = sorted({t.domain for t in study.tasks})
    assert len(played) == 3
    prog = run_study(study, tmp_path / "s.db")
    assert prog.done == 12 and prog.successes == 12
    first = study.catalog.domains[0].name
    assert len(built) == len(set(built))  # memoised: never twice
    assert {d for _, d in built} <= {*played, first}
    assert {(v, d) for v in variants.split(",") for d in played} <= set(built)
    monkeypatch.undo()
    catalog = load_catalog(spec)
    with Store(tmp_path / "s.db") as st:
        [meta] = st.study_meta().values()
    assert meta.native_function_count == 2 * len(played)
    for name, vm in meta.variants.items():
        spec_ = resolve.get_variant(name)
        assert vm.function_count == sum(build_codec(domain_catalog(catalog, d), spec_).function_count()
                                        for d in played), name
