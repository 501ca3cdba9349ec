"""The BFCL importer: ``bfcl:DIR`` (function docs + possible answers)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.paths import SHARED_DATA
from toolbias import CatalogError, load_catalog, validate_action
from toolbias.catalog.validation import check_schema
from toolbias.integrations.bfcl import convert_schema, load_bfcl, tool_name

BFCL = SHARED_DATA / "bfcl"
needs_bfcl = pytest.mark.skipif(not any(BFCL.glob("BFCL_v4_*.json")) if BFCL.is_dir() else True,
                                reason=f"BFCL data not found at {BFCL} (../shared/data is absent)")


# -- unit: schemas, names, answers (no data needed) ----------------------------------------

def test_convert_schema_maps_bfcl_types() -> None:
    from collections import Counter

    notes: Counter[str] = Counter()
    raw = {"type": "dict", "properties": {
        "x": {"type": "float", "description": "x"},
        "loc": {"type": "tuple", "items": {"type": "float"}},
        "data": {"type": "any"},
        "opts": {"type": "dict", "properties": {"n": {"type": "integer", "optional": True}}},
        "mode": {"type": "string", "enum": ["a", 1]},
    }, "required": ["x", "ghost"]}
    out = convert_schema(raw, notes)
    assert out["type"] == "object" and out["required"] == ["x"]
    props = out["properties"]
    assert props["x"]["type"] == "number" and props["loc"] == {"type": "array", "items": {"type": "number"}}
    assert props["data"] == {} and props["opts"]["properties"]["n"] == {"type": "integer"}
    assert "enum" not in props["mode"]
    assert notes["unusable enum dropped"] == 1 and notes["required name without property dropped"] == 1
    check_schema(out, "converted")  # toolbias can rewrite it


def test_tool_names_become_valid() -> None:
    assert tool_name("math.factorial") == "math_factorial"
    assert tool_name("a.b-c d") == "a_b-c_d"
    assert len(tool_name("x" * 80)) == 64


def _write(folder: Path, category: str, entries: list[dict], answers: list[dict] | None) -> None:
    (folder / f"BFCL_v4_{category}.json").write_text("\n".join(json.dumps(e) for e in entries) + "\n")
    if answers is not None:
        (folder / "possible_answer").mkdir(exist_ok=True)
        (folder / "possible_answer" / f"BFCL_v4_{category}.json").write_text(
            "\n".join(json.dumps(a) for a in answers) + "\n")


def _fn(name: str, props: dict, required: list[str], desc: str = "d") -> dict:
    return {"name": name, "description": desc, "parameters": {"type": "dict", "properties": props,
                                                              "required": required}}


def test_load_small_folder(tmp_path: Path) -> None:
    fact = _fn("math.factorial", {"n": {"type": "integer"}}, ["n"])
    fact2 = _fn("math.factorial", {"number": {"type": "integer"}}, ["number"], desc="other")
    area = _fn("geo.area", {"r": {"type": "float"}, "unit": {"type": "string"}}, ["r"])
    q = [[{"role": "user", "content": "what is 5!"}]]
    _write(tmp_path, "simple", [
        {"id": "simple_0", "question": q, "function": [fact]},
        {"id": "simple_1", "question": q, "function": [fact2, area]},
        {"id": "simple_2", "question": q, "function": [area]},
        {"id": "simple_3", "question": q, "function": [area]},
        {"id": "simple_4", "question": q, "function": [area]},
    ], [
        {"id": "simple_0", "ground_truth": [{"math.factorial": {"n": [5]}}]},
        {"id": "simple_1", "ground_truth": [{"math.factorial": {"number": [5]}},
                                            {"geo.area": {"r": [2.5, 2.50], "unit": ["", "m"]}}]},
        {"id": "simple_2", "ground_truth": [{"geo.area": {"r": ["", 1.0]}}]},     # required may be omitted
        {"id": "simple_3", "ground_truth": [{"geo.area": {"r": ["two"]}}]},      # fails the schema
        {"id": "simple_4", "ground_truth": [{"nope": {"r": [1]}}]},              # unknown function
    ])
    cat = load_bfcl(tmp_path, per_entry=False)
    assert [d.name for d in cat.domains] == ["simple"]
    names = [t.name for t in cat.domains[0].tools]
    assert names == ["math_factorial", "math_factorial_2", "geo_area"]
    assert cat.meta["bfcl"]["names"]["simple::math_factorial_2"] == "math.factorial"
    assert [t.id for t in cat.tasks] == ["simple_0", "simple_1", "simple_2"]
    t1 = cat.tasks[1]
    assert [(a.tool, dict(a.arguments)) for a in t1.gold] == [("math_factorial_2", {"number": 5}),
                                                              ("geo_area", {"r": 2.5})]
    assert t1.meta["functions"] == ["math_factorial_2", "geo_area"] and t1.query == "what is 5!"
    assert t1.meta["accept"] == [{"tool": "math_factorial_2", "arguments": {"number": [5]}},
                                 {"tool": "geo_area", "arguments": {"r": [2.5, 2.50], "unit": ["", "m"]}}]
    # a required parameter BFCL lists as omittable still needs a value: the gold takes the listed one
    assert dict(cat.tasks[2].gold[0].arguments) == {"r": 1.0}
    assert cat.meta["bfcl"]["skipped"] == {"no listed value fits the schema": 1,
                                           "answer names a function the entry lacks": 1}
    assert not cat.meta.get("isolated_domains")
    per_entry = load_bfcl(tmp_path)  # the default: one domain per entry, as BFCL presents it
    assert per_entry.meta["isolated_domains"] and per_entry.name == f"bfcl:{tmp_path}"
    assert [d.name for d in per_entry.domains][:2] == ["simple_0", "simple_1"]
    assert [t.name for t in per_entry.domain("simple_1").tools] == ["math_factorial", "geo_area"]
    assert [t.domain for t in per_entry.tasks] == ["simple_0", "simple_1", "simple_2"]


def test_nested_answers_take_first_values(tmp_path: Path) -> None:
    fn = _fn("find", {"budget": {"type": "dict", "properties": {"min": {"type": "integer"},
                                                                "max": {"type": "integer"}}}}, ["budget"])
    _write(tmp_path, "multiple", [{"id": "m0", "question": [[{"role": "user", "content": "q"}]], "function": [fn]}],
           [{"id": "m0", "ground_truth": [{"find": {"budget": [{"min": [3, 4], "max": ["", 9]}]}}]}])
    cat = load_bfcl(tmp_path)
    assert dict(cat.tasks[0].gold[0].arguments) == {"budget": {"min": 3}}


@pytest.mark.parametrize("variant", ["native", "fully_merged", "composed"])
def test_an_enum_on_an_array_means_its_items_and_verify_passes(tmp_path: Path, variant: str) -> None:
    """Issue 24, item 4: BFCL writes an array parameter's item enum on the array itself, and lists
    its acceptable values as arrays (``"metrics": [["temperature"]]``). Read as written, no array is
    valid: the verifier sampled ``"temperature"`` (a string) and rejected its own sample under every
    variant, and the task was skipped. The enum now constrains the items."""
    from toolbias.variants import registry
    from toolbias.variants.verify import verify_variant

    weather = _fn("weather.get", {"city": {"type": "string"},
                                  "metrics": {"type": "array", "items": {"type": "string"},
                                              "enum": ["temperature", "humidity", "wind"]}}, ["city", "metrics"])
    _write(tmp_path, "live_simple", [{"id": "live_simple_0", "question": [[{"role": "user", "content": "Paris?"}]],
                                      "function": [weather]}],
           [{"id": "live_simple_0", "ground_truth": [{"weather.get": {"city": ["Paris"],
                                                                      "metrics": [["temperature"]]}}]}])
    cat = load_bfcl(tmp_path)
    tool = cat.domains[0].tools[0]
    assert tool.parameters["properties"]["metrics"] == {"type": "array", "items": {
        "type": "string", "enum": ["temperature", "humidity", "wind"]}}
    assert [dict(a.arguments) for a in cat.tasks[0].gold] == [{"city": "Paris", "metrics": ["temperature"]}]
    result = verify_variant(cat, registry()[variant])
    assert result.ok and result.checked > 0, result.examples


def test_folder_without_answers_has_no_tasks(tmp_path: Path) -> None:
    _write(tmp_path, "simple", [{"id": "s0", "question": "q", "function": [_fn("f", {}, [])]}], None)
    cat = load_catalog(f"bfcl:{tmp_path}")
    assert len(cat.tools) == 1 and cat.tasks == ()


@pytest.mark.parametrize("make,needle", [
    (lambda p: None, "no BFCL_v4_"),
    (lambda p: (p / "BFCL_v4_x.json").write_text("{not json\n"), "invalid JSON"),
    (lambda p: (p / "BFCL_v4_x.json").write_text('{"id": "x"}\n'), "'function' list"),
])
def test_bad_folders_raise_catalog_errors(tmp_path: Path, make, needle: str) -> None:
    make(tmp_path)
    with pytest.raises(CatalogError, match=needle):
        load_bfcl(tmp_path)


def test_bad_spec_option() -> None:
    with pytest.raises(CatalogError, match="unknown option"):
        load_catalog("bfcl:/tmp?domains=sometimes")


# -- the real data -------------------------------------------------------------------------

@needs_bfcl
def test_real_bfcl_categories_and_tasks() -> None:
    by_category = load_catalog(f"bfcl:{BFCL}?domains=category")
    cats = sorted(p.name[len("BFCL_v4_"):-len(".json")] for p in BFCL.glob("BFCL_v4_*.json"))
    assert sorted(d.name for d in by_category.domains) == cats
    assert len(by_category.tools) > 900
    cat = load_catalog(f"bfcl:{BFCL}")
    meta = cat.meta["bfcl"]
    entries = sum(1 for p in BFCL.glob("BFCL_v4_*.json") for line in p.read_text().splitlines() if line.strip())
    assert len(cat.domains) == entries  # one domain per entry, holding the entry's own functions
    assert len(cat.tasks) + sum(meta["skipped"].values()) == entries
    assert len(cat.tasks) > 0.99 * entries
    for t in cat.tasks:
        assert t.domain == t.id and sorted(x.name for x in cat.domain(t.domain).tools) == sorted(t.meta["functions"])
    assert all(validate_action(cat, a) is None for t in cat.tasks for a in t.gold)
    assert any("." in n for n in meta["names"].values())  # dotted names were renamed
    for t in cat.domains[0].tools:
        assert "." not in t.name and t.parameters["type"] == "object"


@needs_bfcl
def test_real_bfcl_oracle_round_trip_through_protocols() -> None:
    from toolbias import VariantSpec, build_codec

    cat = load_catalog(f"bfcl:{BFCL}")
    for op in ("transaction", "reference", "discovery"):
        c = build_codec(cat, VariantSpec(op, ({"op": op},)))
        for task in cat.tasks[::7]:
            s = c.session(task.domain)
            got = [a for x in c.encode(task.gold) for a in s.decode(x).actions]
            assert got == list(task.gold), (op, task.id)
            assert s.finish() == []
