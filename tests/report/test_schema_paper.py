"""The schema-bias paper's published values and ``toolbias reproduce schema`` (a model set among them)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from tests.support.cli import run_cli
from tests.support.paths import SHARED, needs_shared
from toolbias.report.grid import ReportData, ReportSettings
from toolbias.report.schema_paper import paper_variants, place_model, published, render_html, variant_of_label
from toolbias.study.defaults import study_config
from toolbias.study.runner import build_study
from toolbias.study.stats import CellStats, Difference

GENERATOR = Path(__file__).resolve().parents[2] / "tools" / "gen_schema_paper_values.py"


def test_every_published_block_names_its_source_and_figure2_is_the_full_grid():
    pub = published()
    for key in ("figure2", "figure4", "table3", "table6", "table10"):
        assert pub[key]["source"].split(":")[0] in {"Figure 2", "Figure 4", "Table 3", "Table 6", "Table 10"}
    fig2 = pub["figure2"]
    assert len(fig2["models"]) == 11 and len(fig2["variants"]) == 13
    assert len(fig2["rows"]) == 11 * 13
    for r in fig2["rows"] + pub["figure4"]["rows"]:
        # success and the failure modes are fractions of the same episodes: they add up to one
        assert abs(r["success"] + sum(r["failure_modes"].values()) - 1) < 0.003, r
        assert r["n"] == 2748


@pytest.mark.skipif(not (SHARED / "reference" / "ToolSchemaSpace" / "results").is_dir(),
                    reason="../shared/reference (the artifact's results) is not beside the checkout")
def test_the_shipped_values_are_what_the_generator_reads_from_the_papers_sources():
    spec = importlib.util.spec_from_file_location("gen_schema_paper_values", GENERATOR)
    assert spec and spec.loader
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert gen.main(SHARED) == published()


def test_every_figure_row_maps_to_a_registered_variant():
    pub = published()
    for label in pub["figure2"]["variants"] + pub["figure4"]["variants"]:
        assert variant_of_label(label) is not None, label
    assert paper_variants()[0] == "native" and len(paper_variants()) == 13
    assert len(paper_variants(appendix=True)) > len(paper_variants())


def _report(cells: list[CellStats], diffs: list[Difference]) -> ReportData:
    return ReportData(store="x.db", settings=ReportSettings(), cells=cells, variant_diffs=diffs, model_diffs=[],
                      gap=[], probes=[], difficulty=[], prediction=[], function_ratios={},
                      models=sorted({c.model for c in cells}), variants=[c.variant for c in cells], catalogs=[])


def test_rank_counts_the_paper_models_that_did_better():
    paper = {r["model"]: r["success"] for r in published()["figure2"]["rows"] if r["variant"] == "fully merged"}
    cells = [CellStats("m", "native", "strict", "base", 10, 10, 0.8, 0.6, 0.9, {"wrong_arguments": 2}),
             CellStats("m", "fully_merged", "strict", "base", 10, 10, 0.5, 0.2, 0.8, {"livelock": 5})]
    diff = Difference("variant_vs_native", {"model": "m", "variant": "fully_merged", "control": "strict",
                                            "condition": "base"}, {}, 10, 0.5, 0.8, -0.3, -0.6, -0.1)
    placement = place_model(_report(cells, [diff]), "m")
    row = next(r for r in placement.rows if r.variant == "fully_merged")
    assert row.rank == 1 + sum(s > 0.5 for s in paper.values())
    assert row.of == 12 and row.delta == pytest.approx(-0.3) and row.delta_ci == (-0.6, -0.1)
    assert row.failure_modes == {"livelock": 0.5}
    assert abs(row.nearest.success - 0.5) == min(abs(s - 0.5) for s in paper.values())
    # variants the model did not play are named, not invented
    assert any("not run for m" in n and "class dispatch" in n for n in placement.notes)


def test_a_model_missing_from_the_store_is_a_clear_error():
    from toolbias.errors import ToolbiasError

    with pytest.raises(ToolbiasError, match="no episodes of model 'other'"):
        place_model(_report([CellStats("m", "native", "strict", "base", 1, 1, 1.0, 1.0, 1.0)], []), "other")


def test_reproduce_schema_runs_the_variants_and_places_the_model(tmp_path, capsys):
    store, html = tmp_path / "r.db", tmp_path / "r.html"
    code, out, err = run_cli(capsys, "reproduce", "schema", "--model", "oracle", "--protocol", "toolbias",
                             "--sample", "12", "--store", str(store), "--html", str(html), "--json")
    assert code == 0, err
    data = json.loads(out)
    assert [r["variant"] for r in data["rows"]] == paper_variants()
    for r in data["rows"]:  # the oracle is exact on every variant: first among all twelve
        assert r["success"] == 1.0 and r["n"] == 12 and r["rank"] == 1 and r["of"] == 12
    assert "not comparable" in data["notes"][0]
    page = html.read_text()
    assert page.count("<tr>") == 14 and "Qwen3-4B" in page and "Figure 2" in page
    # a second run resumes: nothing is played again and the placement is the same
    code, out2, _ = run_cli(capsys, "reproduce", "schema", "--model", "oracle", "--protocol", "toolbias",
                            "--sample", "12", "--store", str(store), "--json")
    assert code == 0 and json.loads(out2)["rows"] == data["rows"]


def test_html_escapes_the_model_name():
    cells = [CellStats("<b>m</b>", "native", "strict", "base", 1, 1, 1.0, 1.0, 1.0)]
    page = render_html(place_model(_report(cells, []), "<b>m</b>"))
    assert "<b>m</b>" not in page and "&lt;b&gt;m&lt;/b&gt;" in page


def test_reproduce_schema_tables_sets_your_rows_beside_tables_6_to_10(tmp_path, capsys):
    code, out, err = run_cli(capsys, "reproduce", "schema", "--model", "oracle", "--protocol", "toolbias",
                             "--sample", "6", "--tables", "--store", str(tmp_path / "t.db"), "--json")
    assert code == 0, err
    data = json.loads(out)
    yours = data["tables"]["yours"]
    assert [r["flat"] for r in yours["table6"]] == [1.0] and yours["table6"][0]["union"] == 1.0
    assert sorted(r["target"] for r in yours["table7"]) == [0.3, 0.5]
    assert yours["table8"][0]["random_realizations"] == 5 and yours["table8"][0]["anti_class"] == 1.0
    # Table 10: compliance from the probes, exact from the task runs, for all four of its variants
    assert set(yours["table10"]) == {"transaction", "schema discovery", "opaque names", "fully merged"}
    assert all(c["compliance"] == 1.0 and c["exact"] == 1.0 for c in yours["table10"].values())
    assert len(data["tables"]["table10"]["rows"]) == 6  # the paper's six models beside yours


@needs_shared("toolschemaspace", "specs")
def test_reproduce_schema_under_the_papers_protocol_plays_the_artifacts_renderings(tmp_path, capsys):
    catalog = f"toolschemaspace:{SHARED / 'data' / 'toolschemaspace'}"
    code, out, err = run_cli(capsys, "reproduce", "schema", "--model", "oracle", "--catalog", catalog,
                             "--sample", "12", "--store", str(tmp_path / "p.db"), "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["condition"].endswith("@paper") and not data["notes"]
    assert [r["variant"] for r in data["rows"]] == [f"paper.{v}" for v in paper_variants()]
    for r in data["rows"][1:]:  # each rendering paired with the rendering of native
        assert r["success"] == 1.0 and r["delta"] == 0.0 and r["rank"] == 1


def test_reproduce_schema_under_the_papers_protocol_needs_the_artifacts_catalog(tmp_path, capsys, monkeypatch):
    code, _, err = run_cli(capsys, "reproduce", "schema", "--model", "oracle", "--sample", "6", "--catalog", "builtin",
                           "--store", str(tmp_path / "p.db"))
    assert code == 2 and "specs/" in err and "toolschemaspace:" in err and "Traceback" not in err
    # no --catalog: the artifact's catalog from TOOLBIAS_TOOLSCHEMASPACE, else ../shared/data/toolschemaspace
    monkeypatch.delenv("TOOLBIAS_TOOLSCHEMASPACE", raising=False)
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(capsys, "reproduce", "schema", "--model", "oracle", "--sample", "6",
                           "--store", str(tmp_path / "p.db"))
    assert code == 2 and "which catalog" in err and "TOOLBIAS_TOOLSCHEMASPACE" in err and "Traceback" not in err


@needs_shared("toolschemaspace", "specs")
def test_reproduce_schema_prints_the_layout_end_to_end_on_the_default_catalog(tmp_path, capsys, monkeypatch):
    """The embedded model's command (``reproduce schema --model local --sample 24``) with the oracle and two
    tasks: the artifact's catalog found without --catalog, every Figure 2 row printed beside the paper's."""
    monkeypatch.setenv("TOOLBIAS_TOOLSCHEMASPACE", str(SHARED / "data" / "toolschemaspace"))
    code, out, err = run_cli(capsys, "reproduce", "schema", "--model", "oracle", "--sample", "2",
                             "--store", str(tmp_path / "p.db"))
    assert code == 0, err
    assert "13 variants x 2 tasks on oracle (paper protocol)" in err
    text = " ".join(out.split())
    assert "oracle beside the schema-bias paper's models: exact success on 2 tasks" in text
    for label in published()["figure2"]["variants"]:
        assert label in out, label
    assert "note:" not in out  # every row ran, none is not comparable
    assert out.count("100.0 [100, 100]") == 13 and out.count("1/12") == 13  # first among the paper's 11


@needs_shared("toolschemaspace", "specs")
def test_reproduce_schema_tables_under_the_papers_protocol_plays_the_artifacts_arms(tmp_path, capsys):
    catalog = f"toolschemaspace:{SHARED / 'data' / 'toolschemaspace'}"
    code, out, err = run_cli(capsys, "reproduce", "schema", "--model", "oracle", "--catalog", catalog, "--sample",
                             "2", "--tables", "--store", str(tmp_path / "t.db"), "--json")
    assert code == 0, err
    yours = json.loads(out)["tables"]["yours"]
    [t6], [t8] = yours["table6"], yours["table8"]
    assert t6["arms"] == "paper" and t6["flat_variant"] == "paper.merge_domain_flat"
    assert t8["arms"] == "paper" and t8["variants"]["class_semantic"] == "paper.merge_catalog_class_names"
    assert t8["random_realizations"] == 5 and t8["random"] == 1.0 and t8["delta_membership"] == 0.0
    assert sorted(r["target"] for r in yours["table7"]) == [0.3, 0.5]
    assert all(r["arms"] == "paper" for r in yours["table7"])


@needs_shared("toolschemaspace", "specs")
def test_reproduce_schema_says_which_tasks_an_infrastructure_error_left_out(tmp_path, capsys):
    """A prompt longer than the embedded model's window fails its episodes (as class dispatch does on the
    embedded model): the layout still prints, and says which variant lost how many tasks, and why."""
    catalog = f"toolschemaspace:{SHARED / 'data' / 'toolschemaspace'}"
    tasks = build_study(study_config(model="oracle", catalog=catalog, variants="native", sample=2, seed=0)).tasks
    script = tmp_path / "s.json"
    reason = "the prompt has 19000 tokens, more than the local model's context window n_ctx=8192"
    script.write_text(json.dumps({"default": [], "tasks": {tasks[0].id: [{"infra_error": reason,
                                                                         "retryable": False}]}}))
    code, out, err = run_cli(capsys, "reproduce", "schema", "--model", f"scripted:{script}", "--catalog", catalog,
                             "--sample", "2", "--store", str(tmp_path / "i.db"))
    assert code == 0, err
    text = " ".join(out.split())
    assert "composed" in out and f"paper.class_dispatch: 1 of 2 tasks left out by an infrastructure error ({reason})" \
        in text
