"""Compliance probes: derivation from the schema, scoring, storage and the CLI."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from toolbias.catalog import load_catalog, validate_action
from toolbias.cli import cli
from toolbias.providers.scripted import ScriptedProvider
from toolbias.store import Store
from toolbias.study.probes import compliance_cells, make_probes, probe_outcome, probe_study, run_probes
from toolbias.study.runner import StudyConfig, run_study

TOOLS = [
    ("cabin", "set_window", "Open, close or vent a window.",
     {"position": {"type": "string", "enum": ["front_left", "front_right", "rear"]},
      "state": {"type": "string", "enum": ["open", "closed", "vent"]}}),
    ("cabin", "set_seat_heat", "Set the heating level of a seat.",
     {"seat": {"type": "string", "enum": ["driver", "passenger"]},
      "level": {"type": "integer", "minimum": 0, "maximum": 3}}),
    ("home", "set_lamp", "Dim a lamp.",
     {"room": {"type": "string", "enum": ["kitchen", "office"]},
      "brightness": {"type": "integer", "minimum": 0, "maximum": 100}}),
    ("home", "set_thermostat", "Set a zone's target temperature.",
     {"zone": {"type": "string", "enum": ["upstairs", "downstairs"]},
      "celsius": {"type": "number", "minimum": 10, "maximum": 30}}),
    ("home", "say", "Announce a message.", {"text": {"type": "string"}}),
]


@pytest.fixture()
def catalog_spec(tmp_path: Path) -> str:
    root = tmp_path / "cat"
    root.mkdir()
    tools = [{"group": d, "name": n, "description": desc,
              "parameters": {"type": "object", "properties": props, "required": list(props)}}
             for d, n, desc, props in TOOLS]
    (root / "tools.json").write_text(json.dumps(tools))
    task = {"id": "t1", "domain": "home", "query": "Office lamp to 40 please, it's been a long day.",
            "gold_calls": [{"name": "set_lamp", "arguments": {"room": "office", "brightness": 40}}]}
    (root / "queries.jsonl").write_text(json.dumps(task) + "\n")
    return f"toolschemaspace:{root}"


def test_probes_spread_over_domains_and_operations(catalog_spec: str) -> None:
    cat = load_catalog(catalog_spec)
    probes = make_probes(cat, n=5, seed=0)
    assert len(probes) == 5
    assert Counter(p.domain for p in probes) == {"cabin": 2, "home": 3}   # round-robin over domains
    # within a domain every operation is used before any repeats
    assert len({p.gold[0].tool for p in probes if p.domain == "home"}) == 3
    for p in probes:
        assert len(p.gold) == 1 and validate_action(cat, p.gold[0]) is None
        assert p.query.startswith("Do exactly one thing:") and "long day" not in p.query  # no task story
        for k, v in p.gold[0].arguments.items():
            assert f"{k} = {json.dumps(v)}" in p.query                  # every value is stated
        assert p.meta["probe"] is True


def test_probes_are_deterministic_and_cycle_when_asked_for_more(catalog_spec: str) -> None:
    cat = load_catalog(catalog_spec)
    assert [p.to_dict() for p in make_probes(cat, 12, seed=1)] == [p.to_dict() for p in make_probes(cat, 12, seed=1)]
    assert [p.query for p in make_probes(cat, 12, seed=1)] != [p.query for p in make_probes(cat, 12, seed=2)]
    many = make_probes(cat, 12, seed=0)
    assert len(many) == 12 and len({p.id for p in many}) == 12
    assert make_probes(cat, 0) == []


def test_36_probes_on_the_paper_catalog(toolschemaspace_dir: Path) -> None:
    cat = load_catalog(f"toolschemaspace:{toolschemaspace_dir}")
    probes = make_probes(cat)
    assert len(probes) == 36
    per_domain = Counter(p.domain for p in probes)
    assert len(per_domain) == len(cat.domains) and max(per_domain.values()) - min(per_domain.values()) <= 1
    assert len({(p.domain, p.gold[0].tool) for p in probes}) == 36     # 36 distinct operations
    assert all(validate_action(cat, p.gold[0]) is None for p in probes)


# -- scoring a probe episode -------------------------------------------------------

GOLD = {"domain": "home", "tool": "set_lamp", "arguments": {"room": "office", "brightness": 40}}


def call(outcome: str | None, actions: list[dict[str, Any]] = ()) -> dict[str, Any]:  # type: ignore[assignment]
    if outcome is None:
        return {"turn": 0, "tool_call": {"name": "x"}, "decoded": None}
    return {"turn": 0, "tool_call": {"name": "x"}, "decoded": {"outcome": outcome, "actions": list(actions)}}


@pytest.mark.parametrize("calls, compliant, exact", [
    ([call("native", [GOLD])], True, True),
    ([call("reply"), call("native", [GOLD])], True, True),                 # a protocol reply is no rejection
    ([call("native", [{**GOLD, "arguments": {"room": "office", "brightness": 41}}])], True, False),
    ([call("rejection"), call("native", [GOLD])], False, True),            # recovered, but not compliant
    ([call(None), call("native", [GOLD])], False, True),                   # a parse error is a rejection
    ([call("rejection")], False, False),
    ([], False, False),
])
def test_probe_outcome(calls: list[dict[str, Any]], compliant: bool, exact: bool) -> None:
    out = probe_outcome({"gold": [GOLD], "calls": calls})
    assert (out.compliant, out.exact_call) == (compliant, exact)


# -- running probes ----------------------------------------------------------------

def test_oracle_probes_are_fully_compliant_stored_and_resumable(catalog_spec: str, tmp_path: Path) -> None:
    store = tmp_path / "p.db"
    cfg = StudyConfig(model="oracle", catalog=catalog_spec, variants="native,strip_descriptions")
    prog = run_probes(cfg, str(store), n=6)
    assert prog.total == 12 and prog.skipped == 0
    again = run_probes(cfg, str(store), n=6)
    assert again.skipped == 12
    with Store(store) as st:
        rows = [r.__dict__ for r in st.rows(kind="probe")]
        assert not list(st.rows(kind="task"))
    assert len(rows) == 12 and {r["kind"] for r in rows} == {"probe"}
    assert all(r["study"].endswith("|probe") for r in rows)
    cells = compliance_cells(rows, task_success={("oracle", "native", "strict", "base"): 0.5})
    assert {(c.variant, c.compliance, c.exact_call, c.probe_success) for c in cells} == {
        ("native", 1.0, 1.0, 1.0), ("strip_descriptions", 1.0, 1.0, 1.0)}
    assert next(c for c in cells if c.variant == "native").task_success == 0.5


def test_a_model_that_first_calls_off_schema_is_not_compliant(catalog_spec: str, tmp_path: Path) -> None:
    def fn(task: Any, codec: Any, messages: list[Any], turn: int) -> dict[str, Any] | None:
        good = [{"name": c.name, "arguments": dict(c.arguments)} for c in codec.encode(task.gold)]
        if turn == 0:
            return {"tool_calls": [{"name": "do_it", "arguments": {}}]}
        return {"tool_calls": good} if turn == 1 else None

    cfg = StudyConfig(model="scripted", catalog=catalog_spec, variants="native", study="late")
    study = probe_study(cfg, n=4, model=ScriptedProvider(script=fn, name="scripted"))
    run_study(study, str(tmp_path / "p.db"))
    with Store(tmp_path / "p.db") as st:
        rows = [r.__dict__ for r in st.rows(kind="probe")]
    (cell,) = compliance_cells(rows)
    assert (cell.n, cell.compliance, cell.exact_call, cell.probe_success) == (4, 0.0, 1.0, 1.0)


def test_probe_cli_and_report(catalog_spec: str, tmp_path: Path) -> None:
    store = str(tmp_path / "p.db")
    runner = CliRunner()
    res = runner.invoke(cli, ["probe", "--model", "oracle", "--catalog", catalog_spec, "--variants",
                              "native,strip_descriptions", "--n", "4", "--store", store])
    assert res.exit_code == 0, res.output
    assert "compliance" in res.output and "strip_descriptions" in res.output and "100.0" in res.output
    res = runner.invoke(cli, ["run", "--model", "oracle", "--catalog", catalog_spec, "--variants", "native",
                              "--store", store])
    assert res.exit_code == 0, res.output
    res = runner.invoke(cli, ["report", "--store", store, "--json", "--resamples", "200", "--repeats", "5"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    probes = {p["variant"]: p for p in data["probes"]}
    assert probes["native"]["compliance"] == 1.0 and probes["native"]["n"] == 4
    assert probes["native"]["task_success"] == 1.0          # shown next to full-task success
    assert probes["strip_descriptions"]["task_success"] is None
