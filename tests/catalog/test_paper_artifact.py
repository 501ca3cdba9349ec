"""The paper's artifact as a researcher uses it (issue 13): its representative variants have
the paper's function counts, every ``specs/*.json`` file runs as ``--variants FILE`` with the
oracle at 100%, and its queries come in four more phrasings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import run_cli
from tests.support.paths import needs_shared, shared_path
from toolbias import VariantError, build_codec, load_catalog
from toolbias.catalog.phrasing import with_phrasing
from toolbias.store import Store
from toolbias.study.runner import StudyConfig, build_study, run_study
from toolbias.variants import resolve_variants

pytestmark = needs_shared("toolschemaspace", "tools.json")

#: the paper's rendered schemas (issue 13; Figure 2's rows)
PAPER_COUNTS = {"native": 168, "fully_merged": 12, "class_dispatch": 12, "fully_split": 1824, "interval_split": 267,
                "nested_args": 168, "namespaced_names": 168, "strip_descriptions": 168, "reorder_arguments": 168,
                "transaction": 727, "reference_resolution": 211, "schema_discovery": 2, "composed": 1303}
ASSIGNMENT_FILES = {"class_grouping_assignments.json", "mixture_assignments.json"}




def _root() -> Path:
    return shared_path("toolschemaspace")


def _spec_files() -> list[Path]:
    return sorted(p for p in (_root() / "specs").glob("*.json") if p.name not in ASSIGNMENT_FILES)


def test_representative_variants_have_the_papers_function_counts(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "variants", "--catalog", f"toolschemaspace:{_root()}", "--variants",
                        "representative", "--json")
    rows = {r["name"]: r for r in json.loads(out)}
    assert code == 0 and {n: r["functions"] for n, r in rows.items()} == PAPER_COUNTS
    assert all(r["construction"] for r in rows.values())
    assert rows["composed"]["operators"] == ["merge", "split", "reference"]


def test_every_spec_file_reports_its_count_and_ratio(capsys: pytest.CaptureFixture[str]) -> None:
    files = _spec_files()
    code, out, _ = run_cli(capsys, "variants", "--catalog", f"toolschemaspace:{_root()}", "--variants",
                        ",".join(map(str, files)), "--json")
    rows = {r["name"]: r for r in json.loads(out)}
    assert code == 0 and set(rows) == {f.stem for f in files}
    assert not [r for r in rows.values() if r.get("error")]
    # a file builds as the artifact builds it: one paper step
    assert rows["class_semantic"]["functions"] == 12 and rows["class_semantic"]["operators"] == ["paper"]
    assert rows["indirect"]["functions"] == 211 and rows["curry"]["functions"] == 727
    assert rows["mixed"]["functions"] == 1303 and rows["pred"]["functions"] == 267
    assert rows["curryind"]["functions"] == 727 + 42  # references inside transactions
    assert rows["mixed"]["ratio"] == round(1303 / 168, 3)


def test_every_spec_file_runs_with_the_oracle_at_100_percent(tmp_path: Path) -> None:
    files = ",".join(str(f) for f in _spec_files())
    cfg = StudyConfig(model="oracle", catalog=f"toolschemaspace:{_root()}", variants=files, sample=24, workers=1,
                      study="specs")
    study = build_study(cfg)
    assert len(study.codecs) == len(_spec_files())
    run_study(study, str(tmp_path / "s.db"))
    with Store(tmp_path / "s.db") as st:
        rows = list(st.rows(study="specs"))
    assert len(rows) == 24 * len(_spec_files())
    failed = sorted({r.variant for r in rows if not r.success})
    assert not failed


def test_a_construct_toolbias_cannot_build_is_an_error_naming_it(tmp_path: Path) -> None:
    ops = json.loads((_root() / "specs" / "curry.json").read_text())["ops"]
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps({"ops": ops + [{"op": "teleport", "tool": "set_window", "group": "car_cabin"}]}))
    cat = load_catalog(f"toolschemaspace:{_root()}")
    [spec] = resolve_variants(str(odd))
    with pytest.raises(VariantError, match="unknown artifact op 'teleport'"):
        build_codec(cat, spec)


def test_phrasings() -> None:
    cat = load_catalog(f"toolschemaspace:{_root()}")
    hard = with_phrasing(cat, "query_hard")
    base = with_phrasing(cat, "query_base")
    assert [t.id for t in hard.tasks] == [t.id for t in cat.tasks]
    assert sum(a.query != b.query for a, b in zip(base.tasks, cat.tasks, strict=True)) > len(cat.tasks) // 2
    assert base.fingerprint() != cat.fingerprint() and with_phrasing(cat, "query") is cat
    assert StudyConfig(model="oracle", phrasing="query_easy").study_name.endswith("|query_easy")
    with pytest.raises(Exception, match="unknown phrasing"):
        with_phrasing(cat, "query_rude")
    with pytest.raises(Exception, match="no 'query_llm' phrasing"):
        with_phrasing(load_catalog("builtin"), "query_llm")


def test_spec_files_in_probe_and_recommend(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    specs = _root() / "specs"
    files = f"{specs / 'pack.json'},{specs / 's_obf.json'},native"
    code, out, err = run_cli(capsys, "recommend", "--model", "oracle", "--catalog", f"toolschemaspace:{_root()}",
                          "--variants", files, "--sample", "8", "--store", str(tmp_path / "r.db"))
    assert code == 0 and "recommended:" in out + err and "s_obf" in out + err  # rounds name the files again
    code, out, err = run_cli(capsys, "probe", "--model", "oracle", "--catalog", f"toolschemaspace:{_root()}",
                          "--variants", str(specs / "indirect.json"), "--store", str(tmp_path / "p.db"))
    assert code == 0 and "indirect" in out
