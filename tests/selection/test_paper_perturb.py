"""Perturbations as the authors ran them (PROTOCOL.md 3), replayed under --paper: per-run mapping files, the
five fixed targeted renames, the authors' cluster subsets, their blurb spacing and their cut names."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from tests.support.selection import SHARED, SHARED_REASON
from toolbias.cli import cli
from toolbias.selection import paper_perturb as pp
from toolbias.selection import perturb
from toolbias.selection.benchmark import load_benchmark
from toolbias.selection.runner import SelectionRunner, plan_trials
from toolbias.selection.selector import SelectorModel
from toolbias.selection.store import SelectionStore
from toolbias.selection.toolbench import standardize

pytestmark = pytest.mark.skipif(not SHARED.is_dir(), reason=SHARED_REASON)
EXP = SHARED / "experiments"


@pytest.fixture(scope="module")
def bench():
    return load_benchmark(f"biasbusters:{SHARED}")


def prompt(shown, cluster: str) -> str:
    b = shown.select_clusters([cluster])
    runner = SelectionRunner(SelectorModel("first"), benchmark_name=b.name, presentation="toolbench",
                             condition="x", benchmark=b, prompt="base")
    return runner.request(plan_trials(b, 1)[0]).messages[1]["content"]


def test_each_run_replays_its_own_mapping_file(bench) -> None:
    runs = pp.paper_runs(bench, "random_names", 3)
    seen = []
    for run, shown in runs:
        mapping = json.loads((EXP / f"tool_to_id_{run + 1}.json").read_text())
        text = prompt(shown, "8")
        for orig, t in zip(bench.cluster("8").tools, shown.cluster("8").tools, strict=True):
            new = standardize(mapping[perturb.tool_label(orig)])
            assert t.name.endswith(f"_for_{new}")                                 # the _for_<tool> suffix
            assert f'This is the subfunction for tool "{new}"' in text            # the subfunction sentence
            assert re.search(rf"^\d\.{re.escape(new)}: ", text, re.M)              # the blurb label
        seen.append(shown.cluster("8").names)
    assert len(set(seen)) == 3                                                    # three files, three namings


def test_cut_names_keep_the_cut_api_part(bench) -> None:
    shown = pp.paper_runs(bench, "random_names", 1)[0][1]
    mapping = json.loads((EXP / "tool_to_id_1.json").read_text())
    cut2 = shown.cluster("2").tools[3]
    cut4 = shown.cluster("4").tools[0]
    assert cut2.name == "tude_longitude_to_address_for_" + standardize(mapping["Address From To Latitude Longitude"])
    assert cut4.name.startswith("t_ip_geolocation_for_")
    # a longer shuffled name makes the kept cut pass 64 characters, as in the authors' (text-mode) prompts
    shuffled = pp.paper_runs(bench, "shuffled_names", 1)[0][1].cluster("4").tools[0]
    assert shuffled.name == "t_ip_geolocation_for_ip_geo_location_find_ip_location_and_details"
    # toolbias's own rename recomputes the cut from the full name instead
    own = perturb.rename(bench.cluster("2").tools[3], mapping["Address From To Latitude Longitude"])
    assert own.name != cut2.name


def test_targeted_names_rename_the_five_fixed_tools(bench) -> None:
    shown = pp.paper_runs(bench, "random_names_top", 1)[0][1]
    renamed = {perturb.tool_label(o) for c0, c1 in zip(bench.clusters, shown.clusters, strict=True)
               for o, t in zip(c0.tools, c1.tools, strict=True) if o.name != t.name}
    assert renamed == {"Geocode - Forward and Reverse", "Real-Time News Data", "Email Validator",
                       "Easy QR Code Generator", "WeatherAPI.com"}
    touched = {c1.id for c0, c1 in zip(bench.clusters, shown.clusters, strict=True) if c0.names != c1.names}
    assert len(touched) == 6                                                       # Geocode serves clusters 1, 2


def test_description_conditions_run_on_the_authors_clusters_with_their_spacing(bench) -> None:
    for cond in ("targeted_desc_scramble", "desc_swap"):
        shown = pp.paper_runs(bench, cond, 2)[1][1]
        assert [c.id for c in shown.clusters] == ["6", "8", "9", "10"]
    desc = prompt(pp.paper_runs(bench, "desc_scramble", 1)[0][1], "8")
    full = prompt(pp.paper_runs(bench, "full_scramble", 1)[0][1], "8")
    assert len(re.findall(r"^\d\.[a-z0-9_]+: [A-Za-z0-9]{20}$", desc, re.M)) == 5     # `1.tool: R20`
    assert len(re.findall(r"^\d\.[a-z0-9_]+:  [A-Za-z0-9]{20}$", full, re.M)) == 5    # `1.tool:  R20`
    targeted = prompt(pp.paper_runs(bench, "targeted_desc_scramble", 1)[0][1], "8")
    assert len(re.findall(r"^\d\.[a-z0-9_]+: [A-Za-z0-9]{20}$", targeted, re.M)) == 1  # What's Language only
    with pytest.raises(Exception, match="run 4"):
        pp.paper_runs(bench, "random_names", 4)


def test_paper_run_replays_the_files_and_keeps_its_own_condition_name(tmp_path) -> None:
    db = str(tmp_path / "p.db")
    common = ["select", "run", "--model", "chooser:first", "--benchmark", f"biasbusters:{SHARED}", "--clusters", "8",
              "--queries", "1", "--store", db, "--json", "--condition", "random_names"]
    result = CliRunner().invoke(cli, [*common, "--paper"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert CliRunner().invoke(cli, common, catch_exceptions=False).exit_code == 0   # toolbias's seeded variant
    with SelectionStore(db) as st:
        paper = st.records(condition="random_names[paper]")
        own = st.records(condition="random_names")
    assert len(paper) == 15 and {r.run for r in paper} == {0, 1, 2} and len(own) == 5
    for r in paper:
        mapping = json.loads((EXP / f"tool_to_id_{r.run + 1}.json").read_text())
        first_tool = load_benchmark(f"biasbusters:{SHARED}").cluster("8").tools[r.order[0]]
        assert r.output["content"].split("Action: ")[1].split("\n")[0].endswith(
            "_for_" + standardize(mapping[perturb.tool_label(first_tool)]))


@pytest.mark.parametrize(("condition", "pattern", "runs"), [
    ("random_names", "tool_to_id_{r}.json", 3), ("shuffled_names", "tool_to_shuffled_tool_{r}.json", 3),
    ("random_names_top", "tool_to_id_prom_{r}.json", 3), ("full_scramble", "tool_to_id_{r}.json", 3),
    ("all_but_one", "tool_to_id_abo_1.json", 1)])
def test_every_shipped_mapping_file_renders_cluster_8_as_the_authors(bench, condition, pattern, runs) -> None:
    for run, shown in pp.paper_runs(bench, condition, runs):
        mapping = json.loads((EXP / pattern.format(r=run + 1)).read_text())
        text = prompt(shown, "8")
        listed = json.loads(json.dumps(re.findall(r"'name': '([^']+)'", text)))
        for orig, t in zip(bench.cluster("8").tools, shown.cluster("8").tools, strict=True):
            new = mapping.get(perturb.tool_label(orig))
            tool = standardize(new) if new else standardize(perturb.tool_label(orig))
            assert t.name in listed and t.name.endswith(f"_for_{tool}")
            assert t.name.split("_for_")[0] == orig.name.split("_for_")[0]          # the API part stays
            assert f'This is the subfunction for tool "{tool}"' in text
            assert re.search(rf"^\d\.{re.escape(tool)}:", text, re.M)               # the blurb label
