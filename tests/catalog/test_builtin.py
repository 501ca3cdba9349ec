"""The built-in catalog: shape, executable gold, recoverable queries, deterministic generation."""

from __future__ import annotations

import copy
import importlib.util
import os
import re
import subprocess
import sys
from collections import Counter
from typing import Any

import pytest

from tests.support.paths import ROOT
from toolbias.catalog import NativeAction, load_catalog, validate_action
from toolbias.catalog.builtin import load_domain_files
from toolbias.catalog.model import Catalog
from toolbias.study.env import Environment

SNAKE = re.compile(r"^[a-z][a-z0-9_]*$")


#: the build-time generator lives outside the package (tools/), so it is loaded from its file
GENERATOR = ROOT / "tools" / "gen_builtin_catalog.py"
_spec = importlib.util.spec_from_file_location("gen_builtin_catalog", GENERATOR)
assert _spec is not None and _spec.loader is not None
gen = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = gen  # dataclasses look their module up while the file executes
_spec.loader.exec_module(gen)


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog("builtin")


@pytest.fixture(scope="module")
def specs() -> dict[str, gen.DomainSpec]:
    return {raw["name"]: gen.DomainSpec(raw) for raw in load_domain_files()}


# --------------------------------------------------------------------------- catalog shape


def test_twelve_domains_about_168_tools(catalog: Catalog) -> None:
    assert len(catalog.domains) == 12
    assert 160 <= len(catalog.tools) <= 176
    for d in catalog.domains:
        assert 13 <= len(d.tools) <= 18, d.name
    names = {d.name for d in catalog.domains}
    for required in ("car_cabin", "home_hvac", "media_player", "kitchen", "laundry", "security"):
        assert required in names


def test_tools_have_meaningful_classes(catalog: Catalog) -> None:
    for d in catalog.domains:
        per_class = Counter(t.cls for t in d.tools)
        assert all(cls and SNAKE.match(cls) for cls in per_class), d.name
        assert len(per_class) >= 4, f"{d.name}: class dispatch needs several classes"
        shared = sum(n for n in per_class.values() if n >= 2)
        assert shared >= len(d.tools) // 2, f"{d.name}: most tools should share a class with another tool"


def test_tool_schemas_follow_the_paper_shape(catalog: Catalog) -> None:
    kinds: Counter[str] = Counter()
    for d in catalog.domains:
        assert len({t.name for t in d.tools}) == len(d.tools)
        for t in d.tools:
            assert SNAKE.match(t.name), t.name
            assert t.description
            assert 1 <= len(t.properties) <= 4, t.uid
            assert sorted(t.required) == sorted(t.properties), f"{t.uid}: all parameters required"
            for p, s in t.properties.items():
                assert s.get("description"), f"{t.uid}.{p}"
                if "enum" in s:
                    kinds["enum"] += 1
                    assert s["type"] == "string" and 2 <= len(s["enum"]) <= 19
                    assert all(isinstance(v, str) and SNAKE.match(v) for v in s["enum"]), f"{t.uid}.{p}"
                else:
                    kinds[s["type"]] += 1
                if s["type"] == "integer":
                    assert "minimum" in s and "maximum" in s, f"{t.uid}.{p}: device ranges are declared"
            assert t.effect and t.effect["kind"] in ("set", "append", "remove", "event")
            assert all(x in t.properties for x in t.effect.get("target", []))
    total = sum(kinds.values())
    assert 2.2 <= total / len(catalog.tools) <= 2.6
    assert kinds["enum"] > total / 2 and kinds["string"] > 0 and kinds["integer"] > 0 and kinds["boolean"] >= 1


def test_domain_files_pass_the_generator_lint(specs: dict[str, gen.DomainSpec]) -> None:
    for name, spec in specs.items():
        assert gen.lint_domain(spec) == [], name


def test_lint_reports_specific_problems(specs: dict[str, gen.DomainSpec]) -> None:
    raw: dict[str, Any] = copy.deepcopy(dict(specs["car_cabin"].raw))
    window = raw["tools"][0]
    window["phrases"][1] = "put the {window} window {position}"  # drops {speed}
    raw["lexicon"]["position=vent"] = ["shut"]  # 'shut' already means closed
    raw["tools"][1]["class"] = "seat"
    raw["tools"][1]["parameters"]["properties"]["heat_level"] = raw["tools"][1]["parameters"]["properties"].pop("lock")
    raw["tools"][1]["parameters"]["required"] = ["side", "heat_level"]
    for i, ph in enumerate(raw["tools"][1]["phrases"]):
        raw["tools"][1]["phrases"][i] = ph.replace("{lock}", "{heat_level}")
    problems = "\n".join(gen.lint_domain(gen.DomainSpec(raw)))
    assert "must name each parameter exactly once" in problems
    assert "'shut' would mean both" in problems
    assert "attribute 'heat_level' of class 'seat'" in problems


# --------------------------------------------------------------------------- tasks


def test_task_set_size_and_lengths(catalog: Catalog) -> None:
    tasks = catalog.tasks
    assert len(tasks) >= 2500
    assert len({t.id for t in tasks}) == len(tasks)
    lengths = Counter(len(t.gold) for t in tasks)
    assert set(lengths) == {1, 2, 3, 4, 5, 6}
    assert lengths[1] + lengths[2] + lengths[3] > len(tasks) / 2
    assert lengths[4] > lengths[5] > lengths[6] > 0
    per_domain = Counter(t.domain for t in tasks)
    assert set(per_domain) == {d.name for d in catalog.domains}
    for t in tasks:
        assert re.fullmatch(rf"{t.domain}-\d{{4}}", t.id)
        assert t.meta["n_calls"] == len(t.gold)
        assert isinstance(t.meta["seed"], int)
        assert all(a.domain == t.domain for a in t.gold)
        assert t.query and t.query_templated and t.query != t.query_templated


def test_every_tool_is_covered(catalog: Catalog) -> None:
    used = Counter(a.uid for t in catalog.tasks for a in t.gold)
    single = {t.gold[0].uid for t in catalog.tasks if len(t.gold) == 1}
    for tool in catalog.tools:
        assert used[tool.uid] >= 5, tool.uid
        assert tool.uid in single, tool.uid


def test_every_gold_action_validates_and_executes(catalog: Catalog) -> None:
    for task in catalog.tasks:
        env = Environment(catalog, task.domain)
        for action in task.gold:
            assert validate_action(catalog, action) is None, (task.id, action)
            result = env.execute(action)
            assert result["ok"], (task.id, action, result)
        assert env.log == list(task.gold)


def test_gold_actions_never_overwrite_each_other(catalog: Catalog) -> None:
    """Each set action's attributes survive the whole task; no duplicates, no add-then-remove."""
    for task in catalog.tasks:
        assert len(set(task.gold)) == len(task.gold), task.id
        env = Environment(catalog, task.domain)
        for action in task.gold:
            env.execute(action)
        for action in task.gold:
            tool = catalog.tool(action.domain, action.tool)
            assert tool is not None and tool.effect is not None
            target = tool.effect.get("target", [])
            instance = "/".join(str(action.arguments[x]) for x in target) or "_"
            obj = env.state[tool.cls][instance]
            if tool.effect["kind"] == "set":
                for k, v in action.arguments.items():
                    if k not in target:
                        assert obj[k] == v, (task.id, action, k)
            elif tool.effect["kind"] == "append":
                record = {k: v for k, v in action.arguments.items() if k not in target}
                assert record in obj[tool.effect["list"]], (task.id, action)


def _mentioned(text: str, spec: gen.DomainSpec, action: NativeAction) -> list[str]:
    """Argument names whose value the text does not state."""
    tool = spec.tool(action.tool)
    props = tool["parameters"]["properties"]
    low = text.lower()
    missing = []
    for p, v in action.arguments.items():
        s = props[p]
        if s.get("type") == "boolean":
            alts = [m.group(2) if v else m.group(3) for ph in tool["phrases"] for m in gen._SLOT.finditer(ph)
                    if m.group(1) == p]
            ok = any(x.lower() in low for x in alts)
        elif "enum" in s:
            ok = any(x.lower() in low for x in [gen.display(v), *spec.synonyms(tool["name"], p, v)])
        elif s.get("type") == "integer":
            ok = re.search(rf"(?<![\d-]){re.escape(str(v))}(?!\d)", text) is not None or gen.number_words(v) in low
        else:
            ok = str(v) in text  # free strings verbatim, case included
        if not ok:
            missing.append(p)
    return missing


def test_queries_state_every_argument(catalog: Catalog, specs: dict[str, gen.DomainSpec]) -> None:
    for task in catalog.tasks:
        spec = specs[task.domain]
        for action in task.gold:
            assert not _mentioned(task.query, spec, action), (task.id, action, task.query)
            assert not _mentioned(task.query_templated, spec, action), (task.id, action, task.query_templated)


def test_colloquial_queries_are_varied(catalog: Catalog) -> None:
    queries = [t.query for t in catalog.tasks]
    assert len(set(queries)) == len(queries)
    words = re.compile(r"\b(zero|one|two|three|four|five|six|seven|eight|nine|ten|twenty|thirty|forty|fifty)\b")
    assert sum(1 for q in queries if words.search(q)) > len(queries) / 10, "numbers sometimes in words"
    openers = Counter(q.split()[0] for q in queries)
    assert len(openers) > 40


def test_number_words() -> None:
    assert gen.number_words(0) == "zero"
    assert gen.number_words(42) == "forty-two"
    assert gen.number_words(-3) == "minus three"
    assert gen.number_words(105) == "one hundred five"
    assert gen.number_words(3450) == "three thousand four hundred fifty"
    assert gen.tidy("for 1 minutes, a eco wash, a USB stick, one passes") == "for 1 minute, an eco wash, a USB stick, one pass"
    assert gen.tidy("twenty-one degrees, 21 minutes, 0.1 hours") == "twenty-one degrees, 21 minutes, 0.1 hours"


# --------------------------------------------------------------------------- determinism


@pytest.fixture(scope="module")
def generated() -> str:
    return gen.dumps(gen.generate())


def test_generation_is_deterministic_and_committed(generated: str) -> None:
    again = gen.dumps(gen.generate())
    assert gen.digest(generated) == gen.digest(again)
    assert gen.TASKS_PATH.read_text(encoding="utf-8") == generated, \
        "tasks.jsonl is stale: run python tools/gen_builtin_catalog.py"
    for line in generated.splitlines()[:50]:
        assert line.index('"domain"') < line.index('"gold"') < line.index('"id"')  # sorted keys


def test_check_flag_passes_under_another_hash_seed() -> None:
    env = dict(os.environ, PYTHONHASHSEED="12345")
    proc = subprocess.run([sys.executable, str(GENERATOR), "--check"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "up to date" in proc.stdout


def test_check_flag_fails_on_a_stale_file_and_writing_fixes_it(tmp_path: Any, generated: str) -> None:
    stale = tmp_path / "tasks.jsonl"
    stale.write_text('{"id": "x"}\n', encoding="utf-8")
    assert gen.main(["--check", "--output", str(stale)]) == 1
    assert gen.main(["--output", str(stale)]) == 0
    assert stale.read_text(encoding="utf-8") == generated


# --------------------------------------------------------------------------- the state engine on built-in tools


def _act(tool: str, domain: str = "media_player", **args: Any) -> NativeAction:
    return NativeAction(domain, tool, args)


def test_set_changes_the_named_instance(catalog: Catalog) -> None:
    env = Environment(catalog, "car_cabin")
    assert env.state["window"]["rear_left"]["position"] == "closed"  # initial_state
    r = env.execute(_act("set_window", "car_cabin", window="rear_left", position="vent", speed="slow"))
    assert r["ok"] and r["object"] == "window" and r["instance"] == "rear_left"
    assert env.state["window"]["rear_left"] == {"position": "vent", "speed": "slow"}
    assert env.state["window"]["front_left"] == {"position": "closed"}


def test_append_remove_and_event(catalog: Catalog) -> None:
    env = Environment(catalog, "media_player")
    env.execute(_act("add_to_queue", room="patio", track="Northbound"))
    env.execute(_act("add_to_queue", room="patio", track="Slow Tide"))
    assert env.state["queue"]["patio"]["queue"] == [{"track": "Northbound"}, {"track": "Slow Tide"}]
    env.execute(_act("remove_from_queue", room="patio", track="Northbound"))
    assert env.state["queue"]["patio"]["queue"] == [{"track": "Slow Tide"}]
    env.execute(_act("clear_queue", room="patio"))
    env.execute(_act("clear_queue", room="patio"))
    assert env.state["queue"]["patio"]["count"] == 2
    r = env.execute(_act("control_playback", room="kitchen", action="next"))
    assert r["ok"] and r["state"] == {"count": 1, "last": {"action": "next"}}


@pytest.mark.parametrize(("action", "kind"), [
    (_act("set_volume_level", room="kitchen", volume=3), "unknown_tool"),
    (_act("set_volume", room="kitchen", volume=30), "missing_argument"),
    (_act("set_volume", room="kitchen", volume=30, volume_limit=80, loud=True), "extra_argument"),
    (_act("set_volume", room="kitchen", volume="30", volume_limit=80), "wrong_type"),
    (_act("set_volume", room="garage", volume=30, volume_limit=80), "not_in_enum"),
    (_act("set_volume", room="kitchen", volume=130, volume_limit=80), "out_of_range"),
    (_act("transfer_playback", from_room="kitchen", to_room="patio", keep_queue="yes"), "wrong_type"),
])
def test_invalid_actions_return_errors_and_change_nothing(catalog: Catalog, action: NativeAction, kind: str) -> None:
    env = Environment(catalog, "media_player")
    before = copy.deepcopy(env.state)
    result = env.execute(action)
    assert result["ok"] is False and result["kind"] == kind and result["error"]
    assert env.state == before and env.log == []


def test_action_of_another_domain_is_an_error(catalog: Catalog) -> None:
    env = Environment(catalog, "tv")
    result = env.execute(_act("set_volume", room="kitchen", volume=30, volume_limit=80))
    assert result["ok"] is False and "media_player" in result["error"]
