"""Equivalence verification: every registered variant passes, broken layers fail loudly."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.support.catalogs import mini_catalog
from tests.support.cli import run_cli
from tests.support.paths import SHARED_DATA, needs_shared
from toolbias import Call, VariantSpec, build_codec, load_catalog
from toolbias.catalog.model import NativeAction, Tool
from toolbias.operators import OPERATORS, Forward, Layer, Reject, RejectionKind
from toolbias.operators.base import Step
from toolbias.variants import registry
from toolbias.variants.codec import Codec
from toolbias.variants.verify import (
    coverage_actions,
    sample_values,
    schema_cuts,
    verify_all,
    verify_codec,
    verify_variant,
)

SHARED = SHARED_DATA
TSS = SHARED / "toolschemaspace"
BFCL = SHARED / "bfcl"
needs_tss = needs_shared("toolschemaspace", "tools.json")
needs_bfcl = pytest.mark.skipif(not any(BFCL.glob("BFCL_v4_*.json")) if BFCL.is_dir() else True,
                                reason=f"BFCL data not found at {BFCL} (../shared/data is absent)")
NAMES = list(registry())


# -- coverage ----------------------------------------------------------------------------

def test_sample_values_cover_enums_booleans_and_bounds() -> None:
    assert sample_values({"type": "string", "enum": ["a", "b", "c"]}) == ["a", "b", "c"]
    assert sample_values({"type": "boolean"}) == [True, False]
    assert sample_values({"type": "integer", "minimum": 0, "maximum": 10}) == [0, 10, 5]
    assert sample_values({"type": "integer", "minimum": 0, "maximum": 100}, cuts=[50]) == [0, 100, 50, 49, 51]
    assert sample_values({"type": "number", "minimum": 0, "exclusiveMaximum": 1}) == [0.0, 0.5, 0.25]
    assert sample_values({"type": "integer", "minimum": 0, "maximum": 10}, cuts=[0, 10]) == [0, 10, 5]
    assert sample_values({"type": "array", "items": {"type": "integer"}, "minItems": 2}) == [[0, 1], [1, 0]]
    # every item enum value appears; the empty array where it is allowed
    assert sample_values({"type": "array", "items": {"type": "string", "enum": ["a", "b"]}}) == [["a"], ["b"], []]
    assert sample_values({"type": "object", "properties": {"x": {"type": "boolean"}}}) == [{"x": True},
                                                                                           {"x": False}, {}]
    nested = {"type": "object", "required": ["k"], "properties": {
        "k": {"type": "string", "enum": ["p", "q", "r"]}, "n": {"type": "integer", "default": 3}}}
    assert sample_values(nested) == [{"k": "p", "n": 0}, {"k": "q", "n": 1}, {"k": "r", "n": 3}, {"k": "p"}]
    assert sample_values({"type": ["integer", "null"]}) == [0, 1, None]
    assert all(isinstance(v, str) for v in sample_values({"type": "string"}))
    assert sample_values({}) == sample_values({"type": "string"})  # BFCL's "any"


def test_coverage_actions_use_every_value_once_at_least() -> None:
    cat = mini_catalog()
    tool = cat.tool("home", "set_fan")
    assert tool is not None
    actions = coverage_actions(tool)
    speeds = {a.arguments["speed"] for a in actions}
    rooms = {a.arguments["room"] for a in actions}
    assert speeds == {"low", "medium", "high"} and rooms == {"kitchen", "office", "bedroom"}
    assert len({a.key() for a in actions}) == len(actions)


def test_schema_cuts_come_from_the_variant_schema() -> None:
    if "split" not in OPERATORS:
        pytest.skip("the split operator is not installed")
    cat = mini_catalog()
    c = build_codec(cat, VariantSpec("iv", ({"op": "split", "method": "interval",
                                             "cuts": {"set_brightness.level": [40]}},)))
    assert 40 in schema_cuts(c).get("level", [])
    tool = cat.tool("home", "set_brightness")
    assert tool is not None
    levels = {a.arguments["level"] for a in coverage_actions(tool, schema_cuts(c))}
    assert {39, 40, 41, 0, 100} <= levels


# -- every registered variant passes ----------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_registered_variant_verifies_on_mini_catalog(name: str) -> None:
    r = verify_variant(mini_catalog(), registry()[name])
    assert r.ok, r.examples
    assert r.checked > 20


@pytest.mark.parametrize("name", NAMES)
def test_registered_variant_verifies_on_builtin(name: str) -> None:
    r = verify_variant(load_catalog("builtin"), registry()[name], probes=1)
    assert r.ok, r.examples


@needs_tss
@pytest.mark.parametrize("name", NAMES)
def test_registered_variant_verifies_on_toolschemaspace(name: str) -> None:
    cat = load_catalog(f"toolschemaspace:{TSS}")
    r = verify_variant(cat, registry()[name], probes=1)
    assert r.ok, r.examples


@needs_bfcl
@pytest.mark.parametrize("name", NAMES)
def test_registered_variant_verifies_on_bfcl(name: str) -> None:
    """BFCL (about 1,000 tools): one coverage action per tool (the full check: toolbias verify)."""
    cat = load_catalog(f"bfcl:{BFCL}")
    r = verify_variant(cat, registry()[name], probes=0, max_actions_per_tool=1)
    assert r.ok, r.examples


def test_verify_all_in_parallel_matches_sequential() -> None:
    cat = mini_catalog()
    specs = [registry()[n] for n in NAMES[:4]]
    seq = verify_all(cat, specs)
    par = verify_all(cat, specs, jobs=2)
    assert [(r.name, r.checked, r.failed) for r in seq] == [(r.name, r.checked, r.failed) for r in par]


def test_unbuildable_variant_fails_with_the_reason() -> None:
    r = verify_variant(mini_catalog(), VariantSpec("bad", ({"op": "no_such_operator"},)))
    assert not r.ok and "cannot build" in r.examples[0]


# -- deliberately broken layers ----------------------------------------------------------

class _Broken(Layer):
    """Identity schema, broken decode; ``how`` says how."""

    op = ""

    def __init__(self, inner: Sequence[Tool], params: Mapping[str, Any]) -> None:
        super().__init__(inner, params)
        self.how = params["how"]
        self.count = 0

    def decode(self, call: Call, tool: Tool, state: Any) -> Step:
        args = dict(call.arguments)
        if self.how == "drop_arg" and len(args) > 1:
            args.pop(next(iter(args)))
        elif self.how == "swap":
            args = {k: ("off" if v == "on" else v) for k, v in args.items()}
        elif self.how == "nondeterministic":
            self.count += 1  # state kept on the layer, not the session
            if self.count % 2 == 0:
                return Reject(RejectionKind.PROTOCOL, f"try again ({self.count})")
        elif self.how == "reject_enum" and "kitchen" in args.values():
            return Reject(RejectionKind.INVALID_ARGUMENTS, "kitchen is not allowed")
        elif self.how == "twice":  # a valid call plus an invalid one: the rejection carries the first's action
            return Forward((call, Call(call.name, {**args, "extra": 1})))
        return Forward((Call(call.name, args),))

    def finish(self, state: Any) -> list:
        from toolbias.operators import Flag, FlagKind

        return [Flag(FlagKind.UNCOMMITTED_HANDLE, "always")] if self.how == "flags" else []


def _broken(how: str) -> Codec:
    cat = mini_catalog()
    return Codec(cat, [_Broken(cat.tools, {"how": how})], name=f"broken_{how}")


@pytest.mark.parametrize("how", ["drop_arg", "swap", "nondeterministic", "reject_enum", "twice", "flags"])
def test_broken_layer_fails_verification(how: str) -> None:
    r = verify_codec(_broken(how))
    assert not r.ok and r.failed > 0
    assert r.examples and len(r.examples) <= 5


def test_broken_layer_examples_say_what_went_wrong() -> None:
    assert any("gave" in e and "'off'" in e for e in verify_codec(_broken("swap")).examples)
    assert any("rejected" in e for e in verify_codec(_broken("drop_arg")).examples)
    assert any("not deterministic" in e or "rejected" in e for e in verify_codec(_broken("nondeterministic")).examples)
    assert any("kitchen" in e for e in verify_codec(_broken("reject_enum")).examples)
    assert any("finish()" in e for e in verify_codec(_broken("flags")).examples)


def test_rejection_part_way_carries_no_actions() -> None:
    """A Forward of a valid and an invalid call is rejected as a whole: the codec drops the
    first action (a rejection executes nothing), and verification still fails the layer."""
    r = verify_codec(_broken("twice"), probes=6)
    assert not r.ok and any("rejected" in e for e in r.examples)
    from toolbias.variants.verify import _closure_problem

    c = _broken("twice")
    d = c.session("home").decode(Call("set_fan", {"room": "office", "speed": "low"}))
    assert d.outcome.value == "rejection" and d.actions == ()
    assert _closure_problem(c.catalog, "home", [d]) is None


# -- CLI ---------------------------------------------------------------------------------



def test_cli_verify_json_ok(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "verify", "--variant", "transaction,schema_discovery", "--json")
    data = json.loads(out)
    assert code == 0 and data["ok"] is True
    assert [v["name"] for v in data["variants"]] == ["transaction", "schema_discovery"]
    assert {"name", "checked", "failed", "examples"} <= set(data["variants"][0])


def test_cli_verify_fails_for_broken_operator(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                              tmp_path: Path) -> None:
    class BrokenOp(_Broken):
        op = "broken_for_test"

    monkeypatch.setitem(OPERATORS, "broken_for_test", BrokenOp)
    spec = tmp_path / "broken.json"
    spec.write_text(json.dumps({"name": "broken", "steps": [{"op": "broken_for_test", "how": "drop_arg"}]}))
    code, out, _ = run_cli(capsys, "verify", "--spec", str(spec), "--json")
    data = json.loads(out)
    assert code == 1 and data["ok"] is False
    assert data["variants"][0]["failed"] > 0 and data["variants"][0]["examples"]
    code, out, _ = run_cli(capsys, "verify", "--spec", str(spec))
    assert code == 1 and "FAIL" in out


def test_cli_variants_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "variants", "--json")
    rows = json.loads(out)
    assert code == 0 and [r["name"] for r in rows] == NAMES
    native = load_catalog("builtin").tools
    for r in rows:
        assert {"name", "steps", "functions", "ratio", "paper"} <= set(r)
        assert r["functions"] and abs(r["ratio"] - r["functions"] / len(native)) < 0.01
    assert {r["paper"] for r in rows} >= {"transaction", "reference resolution", "schema discovery", "composed"}


def test_cli_shape_writes_tool_list(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    cat = load_catalog("builtin")
    domain = cat.domains[0].name
    out_file = tmp_path / "tools.json"
    code, _, err = run_cli(capsys, "shape", "--variant", "transaction", "--domain", domain, "-o", str(out_file))
    assert code == 0 and "wrote" in err
    tools = json.loads(out_file.read_text())
    assert tools[0]["type"] == "function" and tools[0]["function"]["name"] == "begin_set_window"
    code, out, _ = run_cli(capsys, "shape", "--variant", "native")
    assert code == 0 and set(json.loads(out)) == {d.name for d in cat.domains}


def test_cli_shape_user_spec_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    spec = tmp_path / "mine.json"
    spec.write_text(json.dumps({"name": "mine", "steps": [{"op": "strip"}, {"op": "discovery"}]}))
    domain = load_catalog("builtin").domains[0].name
    code, out, _ = run_cli(capsys, "shape", "--spec", str(spec), "--domain", domain)
    names = [t["function"]["name"] for t in json.loads(out)]
    assert code == 0 and names[0] == "get_tool_schema"


@pytest.mark.parametrize("argv,needle", [
    (("shape", "--variant", "no_such_variant"), "unknown variant"),
    (("shape",), "exactly one of"),
    (("shape", "--variant", "native", "--domain", "atlantis"), "unknown domain"),
    (("verify", "--variant", "nope"), "unknown variant"),
    (("variants", "--catalog", "bfcl:/no/such/dir"), "not a directory"),
])
def test_cli_errors_print_without_traceback(capsys: pytest.CaptureFixture[str], argv: tuple[str, ...],
                                            needle: str) -> None:
    code, _, err = run_cli(capsys, *argv)
    assert code == 2 and needle in err and "Traceback" not in err


def test_native_actions_of_mini_catalog_tasks_round_trip_through_every_variant() -> None:
    cat = mini_catalog()
    for name in NAMES:
        c = build_codec(cat, registry()[name])
        for task in cat.tasks:
            s = c.session(task.domain)
            got: list[NativeAction] = [a for x in c.encode(task.gold) for a in s.decode(x).actions]
            assert got == list(task.gold), name


# -- the paper artifact's spec files -----------------------------------------------------

SPECS = TSS / "specs"


@needs_tss
def test_artifact_specs_import_and_verify() -> None:
    from toolbias.variants.artifact import import_dir

    cat = load_catalog(f"toolschemaspace:{TSS}")
    imported = import_dir(SPECS, cat)
    assert len(imported) >= 50
    by_name = {i.spec.name: i for i in imported}
    # every arm of the paper's registry that is a spec file imports without loss of kind
    for name in ("pred", "pack", "s_nodesc", "s_obf", "s_shuffle", "curry", "indirect", "enum1", "enumfull",
                 "merge_full_flat", "merge_full_nested", "merge_full_union", "mgroup_sem", "mgroup_rand",
                 "mgroup_anti", "class_neutral", "random_neutral_r0", "anti_class_neutral_r0", "mixed",
                 "mix_r03_rot0", "mix_r05_union", "merge_sem_union"):
        imp = by_name[name]
        assert not imp.unsupported, (name, imp.report())
        r = verify_variant(cat, imp.spec, probes=0, max_actions_per_tool=1)
        assert r.ok, (name, r.examples)
    assert by_name["s_nodesc"].exact and by_name["pred"].exact and by_name["merge_full_union"].exact
    assert [s["op"] for s in by_name["mixed"].spec.steps] == ["merge", "split", "reference"]
    # references inside transactions: protocols stack
    assert [s["op"] for s in by_name["curryind"].spec.steps] == ["transaction", "reference"]
    assert build_codec(cat, by_name["curryind"].spec).function_count() == 727 + 42


@needs_tss
def test_artifact_imports_match_the_paper_surface() -> None:
    from toolbias.variants.artifact import load_spec_file

    cat = load_catalog(f"toolschemaspace:{TSS}")
    merged = build_codec(cat, load_spec_file(SPECS / "merge_full_flat.json", cat))
    assert [t.name for t in merged.tools_for("car_cabin")] == ["execute"]
    pred = build_codec(cat, load_spec_file(SPECS / "pred.json", cat))
    names = [t.name for t in pred.tools_for("car_cabin")]
    assert any("75" in n and n.startswith("set_sunroof") for n in names)
    classes = build_codec(cat, load_spec_file(SPECS / "class_semantic.json", cat))
    assert sorted(t.name for t in classes.tools_for("car_cabin")) == sorted(
        json.loads((SPECS / "class_grouping_assignments.json").read_text())["class_names"])


@needs_tss
def test_artifact_unsupported_and_assignment_files_are_refused(tmp_path: Path) -> None:
    from toolbias import VariantError
    from toolbias.variants.artifact import load_spec_file

    cat = load_catalog(f"toolschemaspace:{TSS}")
    ops = json.loads((SPECS / "curry.json").read_text())["ops"]
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps({"ops": ops + [{"op": "teleport", "tool": "set_window", "group": "car_cabin"}]}))
    with pytest.raises(VariantError, match="teleport x1"):
        load_spec_file(odd, cat)
    spec = load_spec_file(odd, cat, partial=True)  # built as the artifact builds it, without the unknown op
    assert [s["op"] for s in spec.steps] == ["paper"] and len(spec.steps[0]["ops"]) == len(ops)
    assert build_codec(cat, spec).function_count() == 727
    with pytest.raises(VariantError, match="assignment file"):
        load_spec_file(SPECS / "class_grouping_assignments.json", cat)


@needs_tss
def test_cli_shape_and_verify_accept_artifact_specs(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "shape", "--catalog", f"toolschemaspace:{TSS}", "--spec", str(SPECS / "curry.json"),
                        "--domain", "car_cabin")
    assert code == 0 and json.loads(out)[0]["function"]["name"] == "begin_set_window"
    code, out, _ = run_cli(capsys, "verify", "--catalog", f"toolschemaspace:{TSS}", "--spec",
                        str(SPECS / "indirect.json"), "--probes", "0", "--json")
    data = json.loads(out)
    assert code == 0 and data["ok"] and [v["name"] for v in data["variants"]] == ["indirect"]


def test_toolbias_spec_is_not_taken_for_an_artifact_spec() -> None:
    from toolbias.variants.artifact import is_artifact_spec

    assert not is_artifact_spec({"name": "x", "steps": [{"op": "merge"}]})
    assert not is_artifact_spec({"ops": [{"op": "merge"}]})
    assert is_artifact_spec({"ops": [{"op": "curry", "tool": "t", "group": "g"}]})
