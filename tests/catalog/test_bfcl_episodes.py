"""BFCL as BFCL scores it: one episode per entry with the entry's own functions, success on
BFCL's possible answers, and verify passing on every category (needs ../shared/data/bfcl)."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.support.paths import SHARED_DATA, needs_shared
from toolbias.catalog import load_catalog
from toolbias.catalog.model import Catalog, NativeAction, Task
from toolbias.catalog.validation import validate_action, value_error
from toolbias.cli import cli
from toolbias.providers.scripted import ScriptedProvider
from toolbias.store import Store
from toolbias.study.runner import StudyConfig, build_study, run_study
from toolbias.study.success import MatchRule
from toolbias.variants import build_codec, get_variant
from toolbias.variants.codec import Codec

BFCL = SHARED_DATA / "bfcl"
pytestmark = needs_shared("bfcl", "possible_answer")


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog(f"bfcl:{BFCL}")


def _scores(store: Path) -> dict[str, tuple[int, int]]:
    with Store(store) as st:
        out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for row in st.rows():
            out[row.variant][0] += 1
            out[row.variant][1] += int(bool(row.success))
    return {v: (n, ok) for v, (n, ok) in out.items()}


def test_each_entry_is_an_episode_with_its_own_functions(catalog: Catalog) -> None:
    for variant in ("native", "class_dispatch", "schema_discovery"):
        codec = build_codec(catalog, get_variant(variant))
        for task in catalog.tasks[::40]:
            shown = codec.schema(task.domain)
            if variant == "native":
                assert sorted(t["function"]["name"] for t in shown) == sorted(task.meta["functions"])
            # a catalog-scope variant spans the entry's functions only, never another entry's
            native = {t.uid for t in catalog.domain(task.domain).tools}
            sub = codec.sub(task.domain)  # type: ignore[attr-defined]
            assert {t.uid for t in sub.catalog.tools} == native
            assert len(shown) <= 2 * len(native) + 2


def test_oracle_scores_100_percent_on_every_representative_variant(catalog: Catalog, tmp_path: Path) -> None:
    run_study(StudyConfig(model="oracle", catalog=f"bfcl:{BFCL}", variants="representative"), tmp_path / "o.db")
    scores = _scores(tmp_path / "o.db")
    assert len(scores) >= 12
    assert all(n == len(catalog.tasks) and ok == n for n, ok in scores.values()), scores


def _concrete(value: Any, pick: int) -> Any:
    if isinstance(value, dict):
        out = {}
        for k, listed in value.items():
            present = [v for v in listed if v != ""]
            if present and "" not in listed:
                out[k] = _concrete(present[min(pick, len(present) - 1)], pick)
        return out
    return value


def second_answer(task: Task, catalog: Catalog) -> list[NativeAction]:
    """Another answer BFCL accepts: optional parameters whose answer lists "" omitted, every
    other the second listed value the schema takes (else the first), the calls in reverse order."""
    tools = {t.name: t for t in catalog.domain(task.domain).tools}
    out = []
    for entry in task.meta["accept"]:
        tool = tools[entry["tool"]]
        args: dict[str, Any] = {}
        for p, listed in entry["arguments"].items():
            if "" in listed and p not in tool.required:
                continue
            for value in ([_concrete(v, 1) for v in listed if v != ""][1:2] + [_concrete(listed[0], 0)]):
                if value_error(tool.properties[p], value, p) is None:
                    args[p] = value
                    break
        out.append(NativeAction(task.domain, tool.name, args))
    out.reverse()
    return out if all(validate_action(catalog, a) is None for a in out) else list(task.gold)


def test_agent_giving_other_accepted_answers_scores_100_percent(catalog: Catalog, tmp_path: Path) -> None:
    tasks = list(catalog.tasks[::3])
    answers = {t.id: second_answer(t, catalog) for t in tasks}
    differ = sum(1 for t in tasks if answers[t.id] != list(t.gold))
    assert differ > 0.55 * len(tasks)  # most episodes really play another answer than the gold

    def script(task: Task, codec: Codec, messages: list[Any], turn: int) -> dict[str, Any] | None:
        if turn:
            return None
        return {"tool_calls": [{"name": c.name, "arguments": dict(c.arguments)}
                               for c in codec.encode(answers[task.id])]}

    cfg = StudyConfig(model="scripted", catalog=f"bfcl:{BFCL}", variants="native,fully_merged,transaction,"
                      "schema_discovery,class_dispatch,fully_split,nested_args")
    study = build_study(cfg, model=ScriptedProvider(script=script, name="scripted"), tasks=tasks)
    run_study(study, tmp_path / "s.db")
    scores = _scores(tmp_path / "s.db")
    assert all(ok == n == len(tasks) for n, ok in scores.values()), scores


def test_unlisted_values_fail_and_rules_are_stored_apart(catalog: Catalog, tmp_path: Path) -> None:
    task = next(t for t in catalog.tasks if any(isinstance(v, str) for a in t.gold for v in a.arguments.values()))
    gold = task.gold[0]
    key = next(k for k, v in gold.arguments.items() if isinstance(v, str))
    shouted = NativeAction(gold.domain, gold.tool, {**gold.arguments, key: f"  {gold.arguments[key].upper()} "})

    def script(t: Task, codec: Codec, messages: list[Any], turn: int) -> dict[str, Any] | None:
        calls = codec.encode([shouted, *t.gold[1:]]) if turn == 0 else []
        return {"tool_calls": [{"name": c.name, "arguments": dict(c.arguments)} for c in calls]} if calls else None

    db = tmp_path / "m.db"
    for rule in (MatchRule.EXACT, MatchRule.NORMALISED, None):  # None: the catalog's own rule (BFCL's)
        cfg = StudyConfig(model="scripted", catalog=f"bfcl:{BFCL}", variants="native", match=rule)
        run_study(build_study(cfg, model=ScriptedProvider(script=script, name="scripted"), tasks=[task]), db)
    with Store(db) as st:
        rows = {r.condition: r for r in st.rows()}
    assert set(rows) == {"base", "base+normalised", "base+bfcl"}  # never pooled: the rule is in the condition
    assert rows["base"].success is False and rows["base+normalised"].success is True
    assert rows["base+bfcl"].success is True
    assert rows["base"].key != rows["base+normalised"].key
    assert json.loads(json.dumps(rows["base+normalised"].record))["match"] == "normalised"


@pytest.mark.parametrize("category", sorted(p.name[len("BFCL_v4_"):-len(".json")]
                                            for p in BFCL.glob("BFCL_v4_*.json")) if BFCL.is_dir() else [])
def test_verify_every_variant_passes_on_each_category(category: str, tmp_path: Path) -> None:
    folder = tmp_path / category
    (folder / "possible_answer").mkdir(parents=True)
    for sub in ("", "possible_answer/"):
        (folder / f"{sub}BFCL_v4_{category}.json").symlink_to(BFCL / f"{sub}BFCL_v4_{category}.json")
    out = CliRunner().invoke(cli, ["verify", "--catalog", f"bfcl:{folder}", "--variant", "all", "--probes", "1",
                                   "--json"])
    assert out.exit_code == 0, out.output[-2000:]
    results = json.loads(out.output)
    rows = results if isinstance(results, list) else results.get("variants", results)
    assert len(rows) >= 40 and all(r["ok"] for r in rows), [r for r in rows if not r["ok"]][:3]


def test_categories_choose_and_stratify_entries(catalog: Catalog) -> None:
    from toolbias.study.runner import select_tasks

    parallel = select_tasks(catalog, StudyConfig(catalog=f"bfcl:{BFCL}", domains=("parallel",)))
    assert parallel and all(t.meta["category"] == "parallel" for t in parallel)
    assert len(parallel) == sum(1 for t in catalog.tasks if t.meta["category"] == "parallel")
    sample = select_tasks(catalog, StudyConfig(catalog=f"bfcl:{BFCL}", sample=30))
    assert {t.meta["category"] for t in sample} == {t.meta["category"] for t in catalog.tasks}
