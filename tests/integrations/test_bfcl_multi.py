"""BFCL multi-turn under variants: ``bfcl-multi:base`` runs BFCL's own API classes (from an
installed bfcl-eval), feeds user turns one at a time and scores by BFCL's per-turn state check."""

from __future__ import annotations

import importlib.util
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from toolbias.catalog import load_catalog
from toolbias.catalog.model import Catalog, Task
from toolbias.errors import CatalogError
from toolbias.integrations.bfcl_multi import load_bfcl_multi, parse_call
from toolbias.providers.scripted import ScriptedProvider
from toolbias.store import Store
from toolbias.study.runner import StudyConfig, build_study, run_study
from toolbias.study.scoring import explain_failure
from toolbias.variants.codec import Codec

needs_bfcl_eval = pytest.mark.skipif(importlib.util.find_spec("bfcl_eval") is None,
                                     reason="bfcl-eval is not installed (pip install --no-deps bfcl-eval mpmath)")


def test_missing_package_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "bfcl_eval" else real(name, *a))
    with pytest.raises(CatalogError, match=r"toolbias\[bfcl\]"):
        load_bfcl_multi("base")


def test_unknown_category_lists_the_known_ones() -> None:
    with pytest.raises(CatalogError, match="use one of: base"):
        load_bfcl_multi("sometimes")


def test_gold_strings_are_parsed_never_evaluated() -> None:
    import inspect

    def sort(self: Any, file_name: str) -> None: ...

    sigs = {"sort": inspect.signature(sort)}
    assert parse_call("cd(folder='doc')", {}) == ("cd", {"folder": "doc"})
    assert parse_call("sort('a.pdf')", sigs) == ("sort", {"file_name": "a.pdf"})
    assert parse_call("f(x=[1, 2.5], y={'k': True})", {}) == ("f", {"x": [1, 2.5], "y": {"k": True}})
    for bad in ("cd(folder=open('/etc/passwd'))", "os.system('ls')", "__import__('os')", "cd(**opts)", "x + 1"):
        with pytest.raises(ValueError):
            parse_call(bad, sigs)


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    if importlib.util.find_spec("bfcl_eval") is None:
        pytest.skip("bfcl-eval is not installed (pip install --no-deps bfcl-eval mpmath)")
    return load_catalog("bfcl-multi:base")


@needs_bfcl_eval
def test_every_entry_is_a_domain_with_its_classes_functions(catalog: Catalog) -> None:
    assert len(catalog.domains) == 200
    skipped = catalog.meta["bfcl"]["skipped"]
    assert len(catalog.tasks) + sum(skipped.values()) == 200 and len(catalog.tasks) >= 199
    for task in catalog.tasks:
        info = task.meta["bfcl_multi"]
        assert {t.cls for t in catalog.domain(task.domain).tools} <= set(info["involved_classes"])
        assert sum(task.meta["gold_turns"]) == len(task.gold) and len(task.meta["turns"]) + 1 == \
            len(task.meta["gold_turns"])


def _scores(db: Path) -> dict[str, list[int]]:
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    with Store(db) as st:
        for row in st.rows():
            out[row.variant][0] += 1
            out[row.variant][1] += int(bool(row.success))
    return dict(out)


@needs_bfcl_eval
def test_oracle_scores_100_percent_under_every_representative_variant(catalog: Catalog, tmp_path: Path) -> None:
    run_study(StudyConfig(model="oracle", catalog="bfcl-multi:base", variants="representative"), tmp_path / "o.db")
    scores = _scores(tmp_path / "o.db")
    assert len(scores) >= 12
    assert all(n == len(catalog.tasks) == ok for n, ok in scores.values()), scores
    with Store(tmp_path / "o.db") as st:
        rec = next(iter(st.rows())).record
    assert rec["state_check"]["ok"] and len(rec["state_check"]["turns"]) >= 2
    assert sum(1 for m in rec["messages"] if m["role"] == "user") == len(rec["state_check"]["turns"])


def _play(catalog: Catalog, tmp_path: Path, tasks: list[Task], turns_of: Any) -> list[dict[str, Any]]:
    def script(task: Task, codec: Codec, messages: list[Any], turn: int) -> dict[str, Any] | None:
        users = sum(1 for m in messages if m["role"] == "user")
        if messages[-1]["role"] != "user":
            return None  # one batch of calls per user turn
        actions = turns_of(task, users - 1)
        return {"tool_calls": [{"name": c.name, "arguments": dict(c.arguments)} for c in codec.encode(actions)]} \
            if actions else None

    study = build_study(StudyConfig(model="scripted", catalog="bfcl-multi:base", variants="native,fully_merged"),
                        model=ScriptedProvider(script=script, name="scripted"), tasks=tasks)
    run_study(study, tmp_path / "s.db")
    with Store(tmp_path / "s.db") as st:
        return [r.record | {"success": r.success} for r in st.rows()]


def _turn_gold(task: Task, k: int) -> list[Any]:
    counts = task.meta["gold_turns"]
    at = sum(counts[:k])
    return list(task.gold[at:at + counts[k]]) if k < len(counts) else []


@needs_bfcl_eval
def test_a_skipped_turn_or_a_missing_write_fails_the_state_check(catalog: Catalog, tmp_path: Path) -> None:
    tasks = [t for t in catalog.tasks if len(t.meta["gold_turns"]) >= 3][:10]
    # the agent plays every turn right but the second: it answers without calls there
    skip = _play(catalog, tmp_path / "a", tasks, lambda t, k: [] if k == 1 else _turn_gold(t, k))
    assert skip and not any(r["success"] for r in skip)
    for r in skip:
        second = r["state_check"]["turns"][1]
        assert not second["called"] or not second["state"] or not second["results"]
        assert any(line.startswith("user turn 2:") for line in explain_failure(r))
    # the gold itself, turn by turn, passes (the same scripted path)
    (tmp_path / "b").mkdir()
    right = _play(catalog, tmp_path / "b", tasks, _turn_gold)
    assert all(r["success"] for r in right)


@needs_bfcl_eval
def test_method_calls_get_decoded_values_as_data(catalog: Catalog, tmp_path: Path) -> None:
    task = next(t for t in catalog.tasks if any(a.tool == "cd" for a in t.gold))
    evil = "__import__('os').system('touch /tmp/toolbias_bfcl_pwned')"
    first = task.gold[0]
    bad = type(first)(first.domain, "cd", {"folder": evil})
    recs = _play(catalog, tmp_path, [task], lambda t, k: [bad] if k == 0 else [])
    assert not Path("/tmp/toolbias_bfcl_pwned").exists()
    for r in recs:
        assert r["success"] is False
        # BFCL's cd ran with the string as its argument, and answered about it
        assert [a["arguments"]["folder"] for a in r["executed"]] == [evil]
        tool_message = next(m["content"] for m in r["messages"] if m["role"] == "tool")
        assert "error" in tool_message.lower() and "touch" in tool_message
