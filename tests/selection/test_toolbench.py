"""The paper's presentation (PROTOCOL.md 1), checked against the authors' files and the protocol's literal strings."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tests.support.selection import SHARED, SHARED_REASON
from toolbias.cli import cli
from toolbias.providers.base import ModelOutput, ToolCall
from toolbias.selection import study, toolbench
from toolbias.selection.benchmark import load_benchmark
from toolbias.selection.paper_parse import paper_action, paper_record, slug
from toolbias.selection.present import parse
from toolbias.selection.settings import PAPER, RunSettings
from toolbias.selection.types import rotations

pytestmark = pytest.mark.skipif(not SHARED.is_dir(), reason=SHARED_REASON)


@pytest.fixture(scope="module")
def bench():
    return load_benchmark(f"biasbusters:{SHARED}")


def test_cycle_file_instances_match_rotations_and_rendering(bench) -> None:
    """Every entry of the authors' cluster-6 slice: same query and presented order as cluster 6, query i, rotation
    r (query_id = 2500 + 5i + r + 1), and the same function dicts rendered from the file's own api_list."""
    entries = json.loads((SHARED / "toolbench_bias_queries_cycle_test.json").read_text())
    cluster = bench.cluster("6")
    assert len(entries) == 500
    for e in entries:
        i, r = divmod(e["query_id"] - 2501, 5)
        assert cluster.queries[i] == e["query"]
        tools = cluster.presented(rotations(cluster.k)[r])
        assert [[t.metadata["tool"], t.metadata["api_name"]] for t in tools] == e["relevant APIs"]
        ours = [toolbench.function_dict(toolbench.api_of(t)) for t in tools]
        theirs = [toolbench.function_dict(toolbench.ToolbenchAPI.from_dict(d)) for d in e["api_list"]]
        assert ours == theirs


def test_toolbench_prompt_literal_parts(bench) -> None:
    prompt = study.trial_request(bench, "8", 0, 0, PAPER).messages[1]["content"]
    query = bench.cluster("8").queries[0]
    assert prompt.startswith("System: You are AutoGPT, you can use many tools(functions) to do the following task.\n"
                             "First I will give you the task description, and your task start.\n")
    assert ("with a function call to actually excute your step. Your output should follow this format:\nThought:\n"
            "Action\nAction Input:\n\nAfter the call") in prompt
    assert "\nRemember: \n1.the state change is irreversible" in prompt
    assert ("Let's Begin!\nTask description: You should use functions to help handle the real time user querys. "
            "Remember:\n1.ALWAYS call \"Finish\" function") in prompt
    assert ("2.Do not use origin tool names, use only subfunctions' names.\nYou have access of the following tools:\n"
            "1.what_s_language: Detect the language of a given text\n2.quick_language_detector: ") in prompt
    assert ("our API will detect the language of the original request.  telegram DM: @justapi1\n\nSpecifically, you "
            "have access to the following APIs: [{'name': 'languagedetection_for_what_s_language', 'description': "
            "'This is the subfunction for tool \"what_s_language\", you can use this tool.The description of this "
            "function is: \"Detect the language of a given text and return the detected language code\"', "
            "'parameters': {'type': 'object', 'properties': {'text': {'type': 'string', 'description': '', "
            "'example_value': 'How to Identify the Language of any Text'}}, 'required': ['text'], 'optional': []}}, "
            ) in prompt
    assert "The description of this function is: \"detect_for_translate_all_languagess the language" in prompt
    assert "{'name': 'Finish', 'description': 'If you believe" in prompt
    assert prompt.endswith(f"'required': ['return_type']}}}}]\nUser: \n{query}\nBegin!\n\nAssistant:\n")
    # rotation 2 puts API 3 first: the blurbs follow the presented order
    rotated = study.trial_request(bench, "8", 0, 2, PAPER).messages[1]["content"]
    assert "You have access of the following tools:\n1.text_language_by_api_ninjas: Detect the language" in rotated


def test_toolbench_names_descriptions_and_optional_parameters(bench) -> None:
    names = {t.name for c in bench for t in c.tools}
    assert "tude_longitude_to_address_for_address_from_to_latitude_longitude" in names
    assert "t_ip_geolocation_for_ip_geolocation_find_ip_location_and_ip_info" in names
    news = next(t for t in bench.cluster("3").tools if t.metadata["tool"] == "NewsData")
    assert "The latest news_for_newsdata endpoint" in toolbench.function_dict(toolbench.api_of(news))["description"]
    geolocate = bench.cluster("1").tools[1]
    fixed = toolbench.function_dict(toolbench.api_of(geolocate))
    assert fixed["parameters"]["required"] == [] and len(fixed["parameters"]["optional"]) == 1
    assert toolbench.function_dict(toolbench.api_of(geolocate), optional_fix=False)["parameters"]["properties"] == {}
    # full definitions where the authors have them; the partial ones are labelled
    for c in bench:
        for t in c.tools:
            full = t.metadata["definition"] == "api_definitions.json"
            assert full == (c.id not in ("2", "5", "10"))
            if full:
                assert t.metadata["parameters_known"] == t.metadata["parameters_total"]
    assert toolbench.standardize("From") == "from" and toolbench.change_name("from") == "is_from"
    assert toolbench.function_name("Weather", "16 Day Forecast") == "get_16_day_forecast_for_weather"


def test_function_calling_mode_and_options(bench) -> None:
    req = study.trial_request(bench, "6", 1, 2, RunSettings.resolve(paper=True, presentation="toolbench-functions"))
    assert req.tool_choice is None and [t["function"]["name"] for t in req.tools][-1] == "Finish"
    assert req.messages[1]["content"] == f"\n{bench.cluster('6').queries[1]}\nBegin!\n"
    assert "Specifically" not in req.messages[0]["content"] and "Your output should" not in req.messages[0]["content"]
    assert req.tools[0]["function"]["parameters"]["optional"] == []
    similar = study.trial_request(bench, "6", 0, 0, RunSettings.resolve(paper=True, prompt="similar"))
    assert "1. State changes are irreversible\u2014if you need to restart" in similar.messages[1]["content"]
    with pytest.raises(Exception, match="excute your step"):
        study.trial_request(bench, "6", 0, 0, RunSettings.resolve(paper=True, prompt="adj"))
    assert PAPER.temperature == 0.5 and PAPER.top_p == 1.0 and PAPER.runs == 3 and PAPER.tool_choice is None


def test_prompt_command_prints_the_exact_text(bench) -> None:
    result = CliRunner().invoke(cli, ["select", "prompt", "--benchmark", f"biasbusters:{SHARED}", "--cluster", "8",
                                      "--query", "3", "--rotation", "4", "--presentation", "toolbench"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert result.stdout == study.trial_request(bench, "8", 3, 4, PAPER).messages[1]["content"]


def test_exact_and_paper_parsing_of_react_answers(bench) -> None:
    c = bench.cluster("5")
    tools = c.presented(rotations(c.k)[0])
    shown = [toolbench.api_of(t).function_name for t in tools]
    answer = ModelOutput(content="Thought: look it up.\nAction: whois_for_whois\nAction Input: {\"q\": \"a.com\"}")
    exact = parse(answer, shown, "toolbench")
    assert exact.index == 4 and exact.via == "action"
    # the paper credits whois_for_whois to Whois by API-Ninjas (substring 'whois' in 'v1_whois', 'whois_by_api_ninjas')
    reading = paper_record(paper_action(answer, shown, function_calling=False), tools, bench.clusters)
    assert (reading.cluster, reading.api) == ("5", 1)
    # "action" inside a word counts, and the earliest-listed name wins over the first written
    odd = ModelOutput(content="The transaction: use v1_whois_for_whois_by_api_ninjas or domain_name_for_domain_whois_lookup_api")
    assert paper_action(odd, shown, function_calling=False) == "domain_name_for_domain_whois_lookup_api"
    assert parse(ModelOutput(content="Action: Finish"), shown, "toolbench").reason == "action is Finish"
    called = ModelOutput(content=None, tool_calls=(ToolCall("c", "functions.whois_for_whois", {}),))
    assert paper_action(called, shown, function_calling=True) == "whois_for_whois"
    assert slug("Whois ") == "whois" and slug("16 Day") == "get_16_day"


def _prompt(bench, cluster: str, query: int, rotation: int, condition: str) -> str:
    """The toolbench prompt of one trial under a condition, as the runner builds it (no model is called)."""
    from toolbias.selection.perturb import apply_condition
    from toolbias.selection.runner import SelectionRunner, Trial

    perturbed = apply_condition(bench, condition)
    runner = SelectionRunner(_NoModel(), benchmark_name="b", presentation="toolbench", condition=condition,
                             prompt="base", benchmark=perturbed)
    c = perturbed.cluster(cluster)
    return runner.request(Trial(0, c, query, rotation, rotations(c.k)[rotation])).messages[1]["content"]


class _NoModel:
    spec = "none"

    def settings(self) -> dict:
        return {"spec": self.spec}


def test_perturbations_as_the_paper_renders_them(bench) -> None:
    import re

    ids = json.loads((SHARED / "experiments" / "tool_to_id_1.json").read_text())
    renamed = _prompt(bench, "3", 0, 0, f"names:{SHARED / 'experiments' / 'tool_to_id_1.json'}")
    nid = toolbench.standardize(ids["NewsData"])
    assert f"news_for_{nid}" in renamed and f"tool \"{nid}\", you can use" in renamed
    assert f"\n4.{nid}: " in renamed and "_for_newsdata'" not in renamed
    assert "The latest news_for_newsdata endpoint" in renamed  # names inside descriptions stay (PROTOCOL.md 3)
    scrambled = [_prompt(bench, "8", q, 0, "desc_scramble") for q in (0, 1)]
    for p in scrambled:
        assert len(re.findall(r"The description of this function is: \"[A-Za-z0-9]{20}\"'", p)) == 5
        assert re.search(r"\n1\.what_s_language:[A-Za-z0-9]{20}\n", p)
        assert "'description': '', 'example_value'" in p  # parameter descriptions untouched
    assert scrambled[0].split("APIs:")[1][:400] != scrambled[1].split("APIs:")[1][:400]  # fresh per prompt
    params = _prompt(bench, "8", 0, 0, "param_desc_scramble")
    assert len(re.findall(r"'text': \{'type': 'string', 'description': '[A-Za-z0-9]{20}'", params)) == 5
    full = _prompt(bench, "8", 0, 0, "full_scramble")
    assert re.search(r"\n1\.[a-z0-9_]+: [A-Za-z0-9]{20}\n", full)
    swapped = _prompt(bench, "6", 0, 0, f"desc_swap:{SHARED / 'experiments' / 'desc_swap_1.json'}")
    validate = next(t for t in bench.cluster("6").tools if t.metadata["tool"] == "Validate Email")
    rest = toolbench.api_of(validate).description_rest()
    assert ("'This is the subfunction for tool \"email_validator\", you can use this tool." + rest)[:120] in swapped
    held = _prompt(bench, "6", 0, 0, f"all_but_one:{SHARED / 'experiments' / 'tool_to_id_abo_1.json'}")
    assert "tool \"email_validator\", you can use this tool.The description of this function is: \"Validate" in held
    assert "tool \"validate_email\"" not in held


def test_conditions_combine_and_paper_parse_maps_names_back(bench) -> None:
    from toolbias.selection.paper_parse import paper_reading
    from toolbias.selection.perturb import CONDITIONS, apply_condition

    assert study.expand_conditions("all,names:x.json") == [*CONDITIONS, "names:x.json"]
    mapped = apply_condition(bench, f"names:{SHARED / 'experiments' / 'tool_to_id_1.json'}")
    c = mapped.cluster("5")
    tools = c.presented(rotations(c.k)[0])
    shown = [toolbench.api_of(t).function_name for t in tools]
    answer = ModelOutput(content=f"Action: {shown[2]}")
    reading = paper_reading(answer, shown, tools, mapped, function_calling=False)
    assert reading.action == "whois_for_newly_registered_domains" and (reading.cluster, reading.api) == ("5", 2)
    assert parse(answer, shown, "toolbench").index == 2


def test_authors_filter_predictions_score_as_reported() -> None:
    from toolbias.selection.importers import score_biasbusters_predictions

    s = score_biasbusters_predictions(SHARED / "subset_preds.jsonl")
    assert (round(s.micro_precision, 4), round(s.micro_recall, 4), round(s.exact_match, 3)) == (0.9964, 0.8856, 0.69)
    assert {k: (round(v["micro_precision"], 4), round(v["micro_recall"], 4), round(v["exact_match"], 4))
            for k, v in s.by_k.items()} == {2: (1.0, 0.7717, 0.5433), 3: (0.9925, 0.885, 0.735),
                                            4: (0.994, 0.9633, 0.91), 5: (1.0, 0.861, 0.535)}
