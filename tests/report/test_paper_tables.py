"""Tables 6, 7 and 8 of the schema-bias paper from a study's episodes (issue 13)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toolbias.report import build_report
from toolbias.report.html import render_html
from toolbias.report.paper_tables import paper_tables
from toolbias.study.runner import StudyConfig, build_study, run_study

TASKS = [f"t{i}" for i in range(20)]


def rows(variant: str, successes: list[int], model: str = "m", control: str = "strict") -> list[dict[str, Any]]:
    return [{"model": model, "variant": variant, "control": control, "condition": "base", "task_id": t,
             "success": bool(s)} for t, s in zip(TASKS, successes, strict=True)]


def pattern(k: int) -> list[int]:
    """The first k tasks succeed."""
    return [1] * k + [0] * (len(TASKS) - k)


def test_table6_merge_encodings() -> None:
    df = rows("native", pattern(18)) + rows("fully_merged", pattern(12)) + rows("merge_domain_nested", pattern(8)) \
        + rows("merge_full_union", pattern(10))
    [row] = paper_tables(df)["merge_encodings"]
    assert (row["native"], row["flat"], row["nested"], row["union"]) == (0.9, 0.6, 0.4, 0.5)
    assert row["lowest"] == "nested" and row["union_variant"] == "merge_full_union"
    assert paper_tables(rows("native", pattern(3)))["merge_encodings"] == []  # arms not run: no row


def test_table7_convention_mixture_delta_and_interval() -> None:
    df = (rows("convention_mixture_0_3x_flat", pattern(10)) + rows("convention_mixture_0_3x_nested", pattern(14))
          + rows("convention_mixture_0_3x_union", pattern(6)) + rows("convention_mixture_0_3x_mixed_rot0", pattern(8))
          + rows("convention_mixture_0_3x_mixed_rot1", pattern(9)) + rows("mix_r03_rot2", pattern(7)))
    [row] = paper_tables(df, n_resamples=500)["convention_mixture"]
    assert row["target"] == 0.3 and row["mixed"] == pytest.approx(0.4)  # mean of .40, .45, .35
    assert row["delta"] == pytest.approx(0.4 - 0.5)  # mixed minus mean of .50, .70, .30
    iv = row["interval"]
    assert iv["low"] <= iv["estimate"] <= iv["high"] and iv["n"] == len(TASKS) and iv["low"] < iv["high"]
    assert row["variants"]["rot2"] == "mix_r03_rot2"
    # one rotation missing: no row at that target
    assert paper_tables(df[: -len(TASKS)])["convention_mixture"] == []


def test_table8_class_controls_deltas() -> None:
    df = rows("class_dispatch", pattern(15)) + rows("class_neutral", pattern(13))
    randoms = [5, 6, 7, 4, 3]
    for r, k in enumerate(randoms):
        df += rows("merge_catalog_random_classes" if r == 0 else f"merge_catalog_random_classes_r{r}", pattern(k))
    df += rows("anti_class_neutral_r0", pattern(2)) + rows("anti_class_neutral_r1", pattern(4))
    df += rows("class_dispatch", pattern(1), model="other")  # no neutral arm for this model: no row
    [row] = paper_tables(df, n_resamples=500)["class_controls"]
    assert row["model"] == "m" and row["random_realizations"] == 5 and row["anti_class_realizations"] == 2
    assert row["class_semantic"] == 0.75 and row["class_neutral"] == 0.65
    assert row["random"] == pytest.approx(sum(randoms) / 5 / 20) and row["anti_class"] == pytest.approx(0.15)
    assert row["delta_membership"] == pytest.approx(0.65 - sum(randoms) / 5 / 20)
    assert row["delta_naming"] == pytest.approx(0.10)
    m = row["membership_interval"]
    assert m["low"] <= m["estimate"] <= m["high"] and m["low"] > 0


def test_report_json_and_html_carry_the_tables(tmp_path: Path) -> None:
    names = ["native", "fully_merged", "merge_domain_nested", "merge_domain_union", "class_dispatch",
             "merge_catalog_neutral_names", "merge_catalog_random_classes", "merge_catalog_random_classes_r1"]
    cfg = StudyConfig(model="oracle", variants=",".join(names), sample=12, workers=1, study="s")
    run_study(build_study(cfg), str(tmp_path / "s.db"))
    data = build_report(tmp_path / "s.db", study="s")
    out = data.to_json()
    assert set(out) >= {"merge_encodings", "convention_mixture", "class_controls"}
    [t8] = out["class_controls"]
    assert t8["class_neutral"] == 1.0 and t8["delta_naming"] == 0.0 and t8["random_realizations"] == 2
    json.dumps(out, allow_nan=False)
    from toolbias.report.figures import all_figures

    figs = all_figures(data)  # Figure 2 (representative rows) and Figure 4 (the remaining methods)
    assert {"grid_strict_base", "remaining_strict_base"} <= set(figs)
    rows_of = {name: [t.get_text() for t in fig.axes[0].get_yticklabels()] for name, fig in figs.items()
               if name.startswith(("grid", "remaining"))}
    assert set(rows_of["grid_strict_base"]) == {"native", "fully_merged", "class_dispatch"}
    assert "merge_catalog_neutral_names" in rows_of["remaining_strict_base"]
    html = render_html(data, figures=False)
    assert 'id="paper-tables"' in html and "Table 6" in html and "Table 8" in html and "Table 7" not in html


def test_figure3_ratio_is_the_query_weighted_mean_over_domains(tmp_path: Path) -> None:
    from toolbias.catalog import load_catalog

    cfg = StudyConfig(model="oracle", variants="native,fully_merged,class_dispatch", sample=30, workers=1, study="r")
    study = build_study(cfg)
    run_study(study, str(tmp_path / "r.db"))
    ratios = build_report(tmp_path / "r.db", study="r").function_ratios
    cat = load_catalog("builtin")
    counts: dict[str, int] = {}
    for t in study.tasks:
        counts[t.domain] = counts.get(t.domain, 0) + 1
    sizes = {d: len(cat.domain(d).tools) for d in counts}
    n = sum(counts.values())
    assert ratios["native"] == pytest.approx(1.0)
    assert ratios["fully_merged"] == pytest.approx(sum(counts[d] / sizes[d] for d in counts) / n)
    # class dispatch shows every class's dispatcher in each domain: 12 functions per episode
    assert ratios["class_dispatch"] == pytest.approx(sum(counts[d] * 12 / sizes[d] for d in counts) / n)
