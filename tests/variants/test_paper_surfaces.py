"""The paper's variants render and decode as its artifact does (issue 25, "the paper's variants
render as the artifact renders them").

Three checks, each against the artifact itself (``../shared/reference/ToolSchemaSpace``, skipped
where absent):

* the 13 representative renderings equal the artifact's rendered schema files
  (``benchmarks/synthetic/data/schemas/*.json``): names, descriptions, parameters and order,
  through the API and through ``toolbias shape``;
* every ``paper.*`` rendering equals what the artifact's own code builds for its runner
  (``SchemaAdapter`` for the ladder and spec files, ``build_arm`` for the hierarchy arms,
  ``compile_spec_file`` for Table 8's grouping files), and the oracle's call sequences equal the
  artifact's ``encode_episode``;
* decoding: the artifact's environment under hard control (``SimEnv``, ``HierEnv``,
  ``QualifyingEnv``) and the ``paper`` layer give the same outcome for every call of a sample
  of task sequences and of erring sequences (perturbed, wrong case, numbers as strings, null and
  empty extras, wrong operations, protocol steps out of order): the same executed native
  action, the same reply or error object, the same flags.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run_cli
from tests.support.operators import TSS, toolschemaspace_catalog
from tests.support.reference_artifact import ARTIFACT, SCHEMAS, artifact_module, needs_artifact
from toolbias import Call, Catalog, build_codec
from toolbias.errors import VariantError
from toolbias.operators import Flag, Forward, Reject, Reply
from toolbias.variants import get_variant, paper_rendering, paper_renderings, registry, resolve_variants
from toolbias.variants.codec import Codec, Outcome
from toolbias.variants.paper import PAPER_VARIANTS
from toolbias.variants.verify import probe_sequences, verify_all

pytestmark = needs_artifact()

#: Figure 2's rendered files and the rendering that must equal each
FILES = {"00_native.json": "paper.native", "01_fully_merged.json": "paper.fully_merged",
         "02_class_dispatch.json": "paper.class_dispatch", "03_fully_split.json": "paper.fully_split",
         "04_interval_split.json": "paper.interval_split", "05_nested_args.json": "paper.nested_args",
         "06_namespaced_names.json": "paper.namespaced_names",
         "07_strip_descriptions.json": "paper.strip_descriptions",
         "08_reorder_arguments.json": "paper.reorder_arguments", "09_transaction.json": "paper.transaction",
         "10_reference_resolution.json": "paper.reference_resolution",
         "11_schema_discovery.json": "paper.schema_discovery", "12_composed.json": "paper.composed"}


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return toolschemaspace_catalog()


@cache
def _codec(name: str) -> Codec:
    return build_codec(toolschemaspace_catalog(), get_variant(name))


def _file(name: str) -> dict[str, Any]:
    path = SCHEMAS / name
    if not path.is_file():
        pytest.skip(f"the artifact's rendered schema {path} is absent")
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _same(got: Any, want: Any) -> bool:
    """Equal JSON, key order included."""
    return json.dumps(got, ensure_ascii=False) == json.dumps(want, ensure_ascii=False)


def _unmarked(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tools without the top-level ``optional`` markers (the agentic runner drops them)."""
    out = []
    for t in tools:
        f = t["function"]
        props = {p: {k: v for k, v in s.items() if k != "optional"} for p, s in f["parameters"]["properties"].items()}
        out.append({**t, "function": {**f, "parameters": {**f["parameters"], "properties": props}}})
    return out


# -- the rendered schema files ------------------------------------------------------------

def test_the_representative_group_is_figure_2_in_order() -> None:
    assert [v.name for v in paper_renderings("representative")] == list(FILES.values())
    assert [v.paper for v in paper_renderings("representative")] == [e["variant"] for e in _file("index.json")]


@pytest.mark.parametrize("file", list(FILES))
def test_rendering_equals_the_artifacts_schema_file(catalog: Catalog, file: str) -> None:
    data = _file(file)
    codec = _codec(FILES[file])
    if data["scope"] == "catalog":
        for d in catalog.domains:  # the whole catalog, in every domain
            assert _same(codec.schema(d.name), data["tools"]), d.name
        return
    assert list(data["domains"]) == [d.name for d in catalog.domains]
    for domain, tools in data["domains"].items():
        got = codec.schema(domain)
        if file == "12_composed.json":
            # the file keeps the dispatchers' optional markers; the agentic runner that runs the
            # variant drops them, and the rendering is what the model is sent
            assert not _same(got, tools) and _same(got, _unmarked(tools)), domain
        else:
            assert _same(got, tools), domain
    assert codec.function_count() == next(e["n_tools"] for e in _file("index.json") if e["file"] == file)


@pytest.mark.parametrize("variant,domain,file", [("paper.fully_merged", "car_cabin", "01_fully_merged.json"),
                                                 ("paper.interval_split", "climate", "04_interval_split.json")])
def test_shape_writes_the_artifacts_schema(capsys: pytest.CaptureFixture[str], variant: str, domain: str,
                                           file: str) -> None:
    toolschemaspace_catalog()
    code, out, err = run_cli(capsys, "shape", "--catalog", f"toolschemaspace:{TSS}", "--variant", variant,
                             "--domain", domain)
    assert code == 0, err
    assert _same(json.loads(out), _file(file)["domains"][domain])


# -- naming: toolbias's constructions keep their names ---------------------------------------

def test_paper_rendering_maps_every_name_form() -> None:
    assert paper_rendering("fully_merged").name == "paper.fully_merged"      # toolbias's variant
    assert paper_rendering("fully merged").name == "paper.fully_merged"      # the paper's name
    assert paper_rendering("paper.fully_merged").name == "paper.fully_merged"
    assert paper_rendering("opaque_names").name == "paper.opaque_names"      # "rename · opaque"
    assert paper_rendering("merge_catalog_random_classes_r3").name == "paper.merge_catalog_random_classes_r3"
    with pytest.raises(VariantError, match="no artifact rendering"):
        paper_rendering("flat_args")
    # every toolbias variant that names a paper entry has a rendering of that entry
    for spec in registry().values():
        if spec.paper is not None:
            assert paper_rendering(spec.name).paper == spec.paper


def test_renderings_stay_out_of_all_and_resolve_by_group() -> None:
    assert not any(n.startswith("paper.") for n in registry())
    assert registry()["fully_merged"].steps[0]["op"] == "merge"   # toolbias's own construction, unchanged
    assert [v.name for v in resolve_variants("paper-representative")] == list(FILES.values())
    assert len(resolve_variants("paper")) == len(PAPER_VARIANTS)
    assert [v.name for v in resolve_variants("native,paper.native")] == ["native", "paper.native"]


def test_file_renderings_need_the_artifacts_specs_folder() -> None:
    from toolbias import load_catalog

    with pytest.raises(VariantError, match="specs/ folder"):
        build_codec(load_catalog("builtin"), get_variant("paper.interval_split"))
    # the ladder and the hierarchy arms are rules: they build on any catalog
    assert build_codec(load_catalog("builtin"), get_variant("paper.fully_merged")).function_count() > 0


def test_every_rendering_verifies(catalog: Catalog) -> None:
    results = verify_all(catalog, paper_renderings("all"), probes=1, max_actions_per_tool=3)
    assert [(r.name, r.examples) for r in results if not r.ok] == []


def test_the_oracle_scores_every_rendering_fully(catalog: Catalog, tmp_path: Path) -> None:
    """``toolbias run --model oracle`` (the episode loop, the state engine, exact success) on every
    rendering: each task's gold written in the variant is executed back to the gold."""
    from toolbias.store import Store
    from toolbias.study.runner import StudyConfig, build_study, run_study

    study = build_study(StudyConfig(model="oracle", catalog=f"toolschemaspace:{TSS}", variants="paper", sample=12,
                                    workers=1, study="paper"))
    run_study(study, str(tmp_path / "s.db"))
    with Store(tmp_path / "s.db") as st:
        rows = list(st.rows(study="paper"))
    assert len(rows) == 12 * len(PAPER_VARIANTS)
    assert sorted({r.variant for r in rows if not r.success}) == []


def test_cli_verify_passes_on_the_representative_renderings(capsys: pytest.CaptureFixture[str]) -> None:
    toolschemaspace_catalog()
    code, out, err = run_cli(capsys, "verify", "--catalog", f"toolschemaspace:{TSS}", "--variant",
                             "paper-representative", "--probes", "0", "--json")
    data = json.loads(out)
    assert code == 0 and data["ok"], err
    assert [v["name"] for v in data["variants"]] == list(FILES.values())


# -- the artifact's own builders -----------------------------------------------------------

def _native_openai() -> dict[str, list[dict[str, Any]]]:
    rows = json.loads((TSS / "tools.json").read_text(encoding="utf-8"))
    out: dict[str, list[dict[str, Any]]] = {}
    for t in rows:
        out.setdefault(t["group"], []).append({"type": "function", "function": {
            "name": t["name"], "description": t["description"], "parameters": t["parameters"]}})
    return out


class Reference:
    """One rendering as the artifact's own code builds and runs it: per domain its OpenAI tools, a
    fresh hard-control environment, and (where the artifact has one) its oracle encoder."""

    def __init__(self, step: Mapping[str, Any]) -> None:
        self.build = step["build"]
        self.native = _native_openai()
        if self.build in ("ladder", "ops"):
            adapter_mod = artifact_module("schema_adapter")
            spec = json.loads((TSS / "specs" / step["file"]).read_text(encoding="utf-8")) if "file" in step else None
            adapter = adapter_mod.SchemaAdapter(k=step.get("k"), spec=spec, control="hard")
            self.per_domain = {}
            for d, tools in self.native.items():
                vt, cmap = adapter.transform(tools, group=d)
                self.per_domain[d] = (vt, cmap, getattr(adapter, "last_compiled", None) if spec else None)
        elif self.build == "hierarchy":
            rows = json.loads((TSS / "tools.json").read_text(encoding="utf-8"))
            self.hier = artifact_module("hierarchy").build_arm(step["arm"], rows)
        else:
            grouping = artifact_module("class_grouping")
            self.groups = grouping.compile_spec_file(str(TSS / "specs" / step["file"]),
                                                     catalog=grouping.load_catalog(str(TSS / "tools.json")))

    def tools(self, domain: str) -> list[dict[str, Any]]:
        if self.build in ("ladder", "ops"):
            return list(self.per_domain[domain][0])
        if self.build == "hierarchy":
            return [{"type": "function", "function": t} for t in self.hier.tools]
        return list(artifact_module("class_grouping").openai_tools(self.groups))

    def env(self, domain: str, control: str = "hard") -> Any:
        if self.build in ("ladder", "ops"):
            return artifact_module("simenv").SimEnv(self.per_domain[domain][1], control=control)
        if self.build == "hierarchy":
            return artifact_module("hierarchy").HierEnv(self.hier, control=control)
        return artifact_module("class_grouping").QualifyingEnv(self.groups, control=control)

    def encode(self, domain: str, gold: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]] | None:
        if self.build == "ops":
            return list(self.per_domain[domain][2].encode_episode(gold))
        if self.build == "hierarchy":
            return list(self.hier.encode_episode(domain, gold))
        if self.build == "groups":
            return list(self.groups.encode_episode(domain, gold))
        return None  # the ladder's call maps have no encoder there

    def qualified(self) -> bool:
        return self.build in ("hierarchy", "groups")


@cache
def _reference(name: str) -> Reference:
    return Reference(get_variant(name).steps[0])


ALL = list(PAPER_VARIANTS)


@pytest.mark.parametrize("name", ALL)
def test_rendering_equals_what_the_artifacts_code_builds(catalog: Catalog, name: str) -> None:
    ref, codec = _reference(name), _codec(name)
    for d in catalog.domains:
        assert _same(codec.schema(d.name), ref.tools(d.name)), (name, d.name)


def _spec_files() -> list[str]:
    folder = TSS / "specs"
    if not folder.is_dir():
        pytest.skip(f"the artifact's spec files are absent ({folder})")
    return sorted(p.name for p in folder.glob("*.json") if "assignments" not in p.name)


def test_every_spec_file_builds_as_the_artifact_builds_it(catalog: Catalog) -> None:
    """``--variants FILE`` on any of the artifact's spec files (its ``to`` names, its shuffle rule,
    its partial ladders) gives the tool list the artifact's code gives for that file."""
    files = _spec_files()
    assert {"s_obf.json", "s_shuffle.json", "curryind.json", "pred4.json", "mgs8.json"} <= set(files)
    for name in files:
        [spec] = resolve_variants(str(TSS / "specs" / name))
        codec = build_codec(catalog, spec)
        ref = Reference({"build": spec.steps[0]["build"], "file": name})
        for d in catalog.domains:
            assert _same(codec.schema(d.name), ref.tools(d.name)), (name, d.name)
    obf = build_codec(catalog, resolve_variants(str(TSS / "specs" / "s_obf.json"))[0])
    to = {(o["group"], o["tool"]): o["to"] for o in json.loads((TSS / "specs" / "s_obf.json").read_text())["ops"]}
    assert [t.name for t in obf.tools_for("car_cabin")] == [to[("car_cabin", t.name)]
                                                             for t in catalog.domain("car_cabin").tools]


def _sample_tasks(catalog: Catalog, per_domain: int = 2) -> list[Any]:
    """Tasks of every domain and of every gold-call count, ``per_domain`` of each."""
    seen: dict[tuple[str, int], int] = {}
    out = []
    for t in catalog.tasks:
        key = (t.domain, len(t.gold))
        if seen.get(key, 0) < per_domain:
            seen[key] = seen.get(key, 0) + 1
            out.append(t)
    return out


def _gold(task: Any) -> list[dict[str, Any]]:
    return [{"name": a.tool, "arguments": dict(a.arguments)} for a in task.gold]


@pytest.mark.parametrize("name", [n for n in ALL if get_variant(n).steps[0]["build"] != "ladder"])
def test_oracle_calls_equal_the_artifacts_encode_episode(catalog: Catalog, name: str) -> None:
    ref, codec = _reference(name), _codec(name)
    for task in _sample_tasks(catalog, 1):
        ours = [(c.name, dict(c.arguments)) for c in codec.encode(task.gold)]
        assert ours == ref.encode(task.domain, _gold(task)), (name, task.id)


# -- decoding, call by call, against the artifact's environment ---------------------------------

def _mutations(call: Call, rng: random.Random) -> Iterator[Call]:
    """Erring forms of one call: wrong case, numbers as strings, null and empty extras, a
    missing argument, an unknown operation, a dispatcher's arguments flattened."""
    args = dict(call.arguments)
    yield Call(call.name, {k: v.upper() if isinstance(v, str) else v for k, v in args.items()})
    yield Call(call.name, {k: str(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v
                           for k, v in args.items()})
    yield Call(call.name, {**args, "extra_null": None, "extra_empty": ""})
    if args:
        yield Call(call.name, {k: v for k, v in args.items() if k != rng.choice(sorted(args))})
    if "operation" in args:
        yield Call(call.name, {**args, "operation": "not_a_real_op"})
        inner = args.get("arguments")
        flat = {k.split("::", 1)[-1]: v for k, v in args.items() if k != "operation"}
        yield Call(call.name, {"operation": args["operation"], **(inner if isinstance(inner, dict) else flat)})
    if len(args) == 1 and isinstance(next(iter(args.values())), dict):  # a union object: add a second one
        yield Call(call.name, {**args, "other_op": {"x": 1}})
    if "query" in args and isinstance(args["query"], str):
        yield Call(call.name, {"query": args["query"][:-1] + "x" if len(args["query"]) > 3 else "zzz"})
        yield Call(call.name, {"query": "completely unrelated words"})
    if "class" in args:
        yield Call(call.name, {**args, "class": "no_such_class"})
        yield Call(call.name, {**args, "method": "no_such_method"})


def _sequences(codec: Codec, tasks: Sequence[Any], seed: int = 7) -> Iterator[tuple[str, list[Call]]]:
    rng = random.Random(seed)
    for task in tasks:
        calls = codec.encode(task.gold)
        yield task.domain, calls
        for probe in probe_sequences(calls, rng, 4):  # dropped, repeated, reordered, wrong values
            yield task.domain, probe
        for i, c in enumerate(calls):
            for m in _mutations(c, rng):
                yield task.domain, calls[:i] + [m] + calls[i + 1:]


def _named_flag(flag: Flag) -> tuple[str, str]:
    """A flag as the artifact records it: (its name, its detail)."""
    name, _, detail = flag.detail.partition(": ")
    return name, detail


def _ours(codec: Codec, domain: str, calls: Sequence[Call]) -> tuple[list[tuple[str, Any]], list[tuple[str, str]]]:
    """The paper layer's own decision per call: ("exec", native action), ("reply", payload) or
    ("reject", error object); then the flags, as the artifact names them."""
    layer = codec.layers[-1]
    tools = {t.name: t for t in codec.tools_for(domain)}
    state = layer.new_state()
    out: list[tuple[str, Any]] = []
    flags: list[tuple[str, str]] = []
    for c in calls:
        tool = tools.get(c.name)
        if tool is None:
            out.append(("reject", {"error": f"Unknown function `{c.name}`. Use only the provided tools."}))
            continue
        step = layer.decode(c, tool, state)
        flags.extend(_named_flag(f) for f in step.flags)
        if isinstance(step, Forward):
            for inner in step.calls:
                dom, _, op = inner.name.partition("::")
                out.append(("exec", (dom, op, dict(inner.arguments))))
        elif isinstance(step, Reply):
            out.append(("reply", dict(step.payload)))
        else:
            assert isinstance(step, Reject)
            out.append(("reject", dict(step.reply or {})))
    flags.extend(_named_flag(f) for f in layer.finish(state))
    return out, flags


def _theirs(ref: Reference, domain: str, calls: Sequence[Call]) -> tuple[list[tuple[str, Any]], list[tuple[str, str]]]:
    env = ref.env(domain)
    out: list[tuple[str, Any]] = []
    for c in calls:
        executed, rejected = len(env.native_actions), env.n_rejected
        result = json.loads(env.call(c.name, json.loads(json.dumps(dict(c.arguments)))))
        if env.n_rejected > rejected:
            out.append(("reject", result))
        elif len(env.native_actions) > executed:
            for name, args in env.native_actions[executed:]:
                dom, op = name.split(".", 1) if ref.qualified() else (domain, name)
                out.append(("exec", (dom, op, dict(args))))
        else:
            out.append(("reply", result))
    return out, [(str(k), str(v)) for k, v in env.finish()]


def _our_answers(codec: Codec, domain: str, calls: Sequence[Call], control: str) -> list[Any]:
    """Every call as the paper layer's ``answer`` gives it (a name the variant lacks as the artifact
    treats it), then the dangling transactions: what the model reads, what ran, what was refused."""
    layer = codec.layers[-1]
    state = layer.new_state()
    out: list[Any] = []
    catalog_scope = layer.tools[0].domain == "*"
    for c in calls:
        got = layer.answer(domain, c.name, c.arguments, state, loose=control == "loose")
        if got is None:  # not a tool of the variant
            if control == "hard":
                out.append((True, {"error": f"Unknown function `{c.name}`. Use only the provided tools."}, []))
            else:
                out.append((False, {"status": "ok"}, [("" if catalog_scope else domain, c.name, dict(c.arguments))]))
            continue
        out.append((got.rejected, got.payload, [tuple(a) for a in got.actions]))
        out.extend(("flag", f) for f in got.flags)
    return out + [("flag", f) for f in state.dangling()]


def _their_answers(ref: Reference, domain: str, calls: Sequence[Call], control: str) -> list[Any]:
    env = ref.env(domain, control)
    out: list[Any] = []
    flags_seen = 0
    decoder = getattr(env, "dec", None) or getattr(getattr(env, "env", None), "dec", None)
    for c in calls:
        executed, rejected = len(env.native_actions), env.n_rejected
        payload = json.loads(env.call(c.name, json.loads(json.dumps(dict(c.arguments)))))
        actions = []
        for name, args in env.native_actions[executed:]:
            if ref.qualified():
                dom, _, op = name.rpartition(".") if "." in name else ("", "", name)
            else:
                dom, op = domain, name
            actions.append((dom, op, dict(args)))
        out.append((env.n_rejected > rejected, payload, actions))
        if decoder is not None:
            out.extend(("flag", tuple(f)) for f in decoder.flags[flags_seen:])
            flags_seen = len(decoder.flags)
    return out + [("flag", tuple(f)) for f in env.finish()[flags_seen:]]


@pytest.mark.parametrize("control", ["hard", "loose"])
@pytest.mark.parametrize("name", ALL)
def test_answers_equal_the_artifacts_environment(catalog: Catalog, name: str, control: str) -> None:
    """The artifact's answer to every call, text object and all, under both of its controls."""
    ref, codec = _reference(name), _codec(name)
    for domain, calls in _sequences(codec, _sample_tasks(catalog, 1), seed=11):
        ours, theirs = _our_answers(codec, domain, calls, control), _their_answers(ref, domain, calls, control)
        assert ours == theirs, (name, control, domain, [(c.name, dict(c.arguments)) for c in calls])


@pytest.mark.parametrize("name", ALL)
def test_decoding_equals_the_artifacts_environment(catalog: Catalog, name: str) -> None:
    ref, codec = _reference(name), _codec(name)
    checked = 0
    for domain, calls in _sequences(codec, _sample_tasks(catalog, 1)):
        ours, theirs = _ours(codec, domain, calls), _theirs(ref, domain, calls)
        assert ours == theirs, (name, domain, [(c.name, dict(c.arguments)) for c in calls])
        checked += 1
    assert checked > 50


@pytest.mark.parametrize("name", ["paper.transaction", "paper.reference_resolution", "paper.schema_discovery",
                                  "paper.interval_split", "paper.merge_domain_union"])
def test_protocol_steps_out_of_order_decode_as_there(catalog: Catalog, name: str) -> None:
    """Hand-made misuse: commit before begin, set after commit, double commit, a handle never
    resolved, invoke before list_methods, a value outside an interval."""
    ref, codec = _reference(name), _codec(name)
    domain = "car_cabin"
    calls = codec.encode(next(t for t in catalog.tasks if t.domain == domain and len(t.gold) > 1).gold)
    sequences = [list(reversed(calls)), calls + calls[-1:], calls[-1:] + calls, calls[1:], calls + calls]
    for seq in sequences:
        assert _ours(codec, domain, seq) == _theirs(ref, domain, seq), (name, seq)


def test_the_artifacts_replies_through_the_codec(catalog: Catalog) -> None:
    """Through a codec session: protocol replies and error objects are the artifact's, and an
    uncommitted transaction is flagged at the end with the artifact's flag name."""
    codec = _codec("paper.transaction")
    session = codec.session("car_cabin")
    begun = session.decode(Call("begin_set_window", {}))
    assert begun.outcome is Outcome.REPLY
    assert begun.reply == {"txn_id": "txn_1", "status": "transaction open; set arguments then commit"}
    early = session.decode(Call("commit_set_window", {"txn_id": "txn_1"}))
    assert early.outcome is Outcome.REJECTION
    assert early.reply == {"error": "cannot commit: missing required arguments ['position', 'state', 'speed']"}
    assert [f.detail for f in session.finish()] == ["dangling_txn: txn_1:set_window"]
    assert ARTIFACT.is_dir()
