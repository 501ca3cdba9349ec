"""Reports from real stores: an oracle study and a scripted mixed study (every failure
mode, strict and lenient), plus probes. Checks the grid numbers against the store,
the JSON/CSV/figures/HTML outputs, and renders the HTML in headless Chromium."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from click.testing import CliRunner

from tests.support.layers import NamespaceByClass
from toolbias.catalog import load_catalog
from toolbias.catalog.model import NativeAction
from toolbias.cli import cli
from toolbias.operators import OPERATORS
from toolbias.providers.scripted import ScriptedProvider
from toolbias.report import ReportSettings, build_report
from toolbias.report.html import render_html
from toolbias.study.probes import run_probes
from toolbias.study.runner import StudyConfig, build_study, run_study
from toolbias.variants import VariantSpec, build_codec
from toolbias.variants.codec import Codec, Control

PAYLOAD = "<script>alert(1)</script><img src=x onerror=\"document.title='pwned'\">"
FAST = ReportSettings(n_resamples=500, repeats=10)

TOOLS = [
    ("cabin", "set_window", "Open, close or vent a window.",
     {"position": {"type": "string", "enum": ["front_left", "rear"]},
      "state": {"type": "string", "enum": ["open", "closed", "vent"]}}),
    ("cabin", "set_seat_heat", "Set the heating level of a seat.",
     {"seat": {"type": "string", "enum": ["driver", "passenger"]},
      "level": {"type": "integer", "minimum": 0, "maximum": 3}}),
    ("home", "set_lamp", "Dim a lamp.",
     {"room": {"type": "string", "enum": ["kitchen", "office"]},
      "brightness": {"type": "integer", "minimum": 0, "maximum": 100}}),
    ("home", "lock_door", "Lock a door.", {"door": {"type": "string", "enum": ["front", "back"]}}),
]
TASKS = [
    ("c1", "cabin", [("set_window", {"position": "front_left", "state": "open"}),
                     ("set_seat_heat", {"seat": "driver", "level": 2})]),
    ("c2", "cabin", [("set_window", {"position": "rear", "state": "vent"})]),
    ("h1", "home", [("set_lamp", {"room": "office", "brightness": 40}), ("lock_door", {"door": "front"})]),
    ("h2", "home", [("lock_door", {"door": "back"})]),
]
OTHER_CLASS = {"set_window": ("set_seat_heat", {"seat": "passenger", "level": 1}),
               "set_seat_heat": ("set_window", {"position": "rear", "state": "closed"}),
               "set_lamp": ("lock_door", {"door": "back"}),
               "lock_door": ("set_lamp", {"room": "kitchen", "brightness": 10})}

#: which error the scripted model makes, per (variant, task); None = plays the gold
PLAN: dict[str, dict[str, str | None]] = {
    "native": {"c1": "under_execution", "c2": "over_execution", "h1": None, "h2": "rejected_and_stuck"},
    "strip_descriptions": {"c1": "wrong_arguments", "c2": "livelock", "h1": "over_execution", "h2": None},
    "class_namespace": {"c1": "wrong_class", "c2": None, "h1": "under_execution", "h2": "wrong_class"},
    "transaction": {"c1": "transaction_handle", "c2": None, "h1": "wrong_arguments", "h2": None},
}


def _calls(codec: Codec, actions: Sequence[NativeAction]) -> list[dict[str, Any]]:
    return [{"name": c.name, "arguments": dict(c.arguments)} for c in codec.encode(actions)]


def mixed_agent(task: Any, codec: Codec, messages: list[Any], turn: int) -> dict[str, Any] | None:
    error = PLAN.get(codec.name, {}).get(task.id)
    gold = list(task.gold)
    if error == "livelock":
        return {"content": PAYLOAD, "tool_calls": [{"name": "open_everything", "arguments": {}}]}
    if turn > 0:
        return None
    if error == "rejected_and_stuck":
        calls = [{"name": f"{gold[0].tool}<b>{PAYLOAD}</b>", "arguments": {"note": PAYLOAD}}]
    elif error == "transaction_handle":
        calls = _calls(codec, gold)[:-1]
    elif error == "wrong_class":
        tool, args = OTHER_CLASS[gold[0].tool]
        calls = _calls(codec, [NativeAction(gold[0].domain, tool, args), *gold[1:]])
    elif error == "under_execution":
        calls = _calls(codec, gold[:-1])
    elif error == "over_execution":
        calls = _calls(codec, gold + gold[:1])
    elif error == "wrong_arguments":
        first = gold[0]
        key = next(k for k, v in first.arguments.items() if isinstance(v, str))
        enum = next(t[3] for t in TOOLS if t[1] == first.tool)[key]["enum"]
        wrong = next(v for v in enum if v != first.arguments[key])
        calls = _calls(codec, [NativeAction(first.domain, first.tool, {**first.arguments, key: wrong}), *gold[1:]])
    else:
        calls = _calls(codec, gold)
    return {"content": PAYLOAD, "tool_calls": calls}


def _has_transaction() -> bool:
    try:
        from toolbias.variants import registry

        return "transaction" in registry() and "transaction" in OPERATORS
    except Exception:
        return False


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("report")
    cat = root / "cat"
    cat.mkdir()
    (cat / "tools.json").write_text(json.dumps([
        {"group": d, "name": n, "description": desc,
         "parameters": {"type": "object", "properties": props, "required": list(props)}}
        for d, n, desc, props in TOOLS]))
    (cat / "queries.jsonl").write_text("\n".join(json.dumps(
        {"id": i, "domain": d, "query": f"please do task {i}",
         "gold_calls": [{"name": n, "arguments": a} for n, a in gold]}) for i, d, gold in TASKS) + "\n")
    spec = root / "class_namespace.json"
    spec.write_text(json.dumps({"name": "class_namespace", "steps": [{"op": NamespaceByClass.op}]}))
    catalog = f"toolschemaspace:{cat}"
    variants = ["native", "strip_descriptions", str(spec)] + (["transaction"] if _has_transaction() else [])
    store = str(root / "study.db")
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(OPERATORS, NamespaceByClass.op, NamespaceByClass)
        run_study(StudyConfig(model="oracle", catalog=catalog, variants=",".join(variants)), store)
        for control in (Control.STRICT, Control.LENIENT):
            cfg = StudyConfig(model="scripted", catalog=catalog, variants=",".join(variants), control=control,
                              turn_limit=3)
            run_study(build_study(cfg, model=ScriptedProvider(script=mixed_agent, name="scripted")), store)
        run_probes(StudyConfig(model="oracle", catalog=catalog, variants="native,strip_descriptions"), store, n=4)
        yield {"store": store, "root": root, "catalog": catalog, "variants": variants}


def _db(store: str) -> pd.DataFrame:
    with sqlite3.connect(store) as db:
        return pd.read_sql("SELECT model, variant, control, condition, task_id, success, failure_mode, kind "
                           "FROM episodes WHERE status='done'", db)


@pytest.fixture(scope="module")
def outputs(study: dict[str, Any]) -> dict[str, Any]:
    """One `toolbias report` run with every output."""
    root: Path = study["root"]
    res = CliRunner().invoke(cli, ["report", "--store", study["store"], "--json", "--csv", str(root / "e.csv"),
                                   "--figures", str(root / "figs"), "--html", str(root / "r.html"),
                                   "--resamples", "500", "--repeats", "10"])
    assert res.exit_code == 0, res.output
    return {"json": json.loads(res.stdout), "csv": root / "e.csv", "figs": root / "figs",
            "html": root / "r.html"}


# -- numbers ------------------------------------------------------------------------

def test_the_scripted_study_has_every_mode_it_was_planned_to_have(study: dict[str, Any]) -> None:
    df = _db(study["store"])
    planned = {m for v in study["variants"] for m in PLAN[Path(v).stem].values() if m}
    assert set(df[df.model == "scripted"].failure_mode.dropna()) == planned
    assert len(planned) == (7 if _has_transaction() else 6)


def test_oracle_cells_are_perfect(study: dict[str, Any]) -> None:
    data = build_report(study["store"], settings=FAST)
    oracle = [c for c in data.cells if c.model == "oracle"]
    assert len(oracle) == len(study["variants"])
    for c in oracle:
        assert (c.success, c.ci_low, c.ci_high, c.failure_modes, c.n) == (1.0, 1.0, 1.0, {}, len(TASKS))


def test_cells_match_the_store(study: dict[str, Any]) -> None:
    df = _db(study["store"])
    data = build_report(study["store"], settings=FAST)
    tasks = df[df.kind == "task"]
    for c in data.cells:
        sel = tasks[(tasks.model == c.model) & (tasks.variant == c.variant) & (tasks.control == c.control)]
        assert c.success == pytest.approx(sel.success.mean())
        assert c.failure_modes == sel.failure_mode.dropna().value_counts().to_dict()
        assert c.ci_low <= c.success <= c.ci_high
    assert data.variants[0] == "native" and data.models == ["oracle", "scripted"]


# -- outputs -------------------------------------------------------------------------

def test_json(outputs: dict[str, Any], study: dict[str, Any]) -> None:
    data = outputs["json"]
    for cell in data["cells"]:
        assert {"model", "variant", "control", "condition", "n", "success", "ci_low", "ci_high",
                "failure_modes"} <= set(cell)
    assert {(c["model"], c["control"]) for c in data["cells"]} == {("oracle", "strict"), ("scripted", "strict"),
                                                                   ("scripted", "lenient")}
    df = _db(study["store"])
    tasks = df[(df.kind == "task") & (df.model == "scripted")]
    for g in data["gap"]:
        rate = tasks[tasks.variant == g["variant"]].groupby("control").success.mean()
        assert g["gap"] == pytest.approx(rate["lenient"] - rate["strict"])
    diffs = data["differences"]["variant_vs_native"]
    assert {d["a"]["variant"] for d in diffs} == set(data["variants"]) - {"native"}
    assert data["differences"]["model_vs_model"]
    assert {p["variant"] for p in data["probes"]} == {"native", "strip_descriptions"}
    assert data["difficulty"]["estimates"] and data["difficulty"]["summaries"]
    assert data["function_ratios"]["native"] == 1.0
    # a variant given as a spec file (its operator no longer registered): the ratio the study stored
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(OPERATORS, NamespaceByClass.op, NamespaceByClass)
        catalog = load_catalog(study["catalog"])
        codec = build_codec(catalog, VariantSpec.from_file(study["root"] / "class_namespace.json"))
    assert data["function_ratios"]["class_namespace"] == pytest.approx(
        codec.function_count() / Codec(catalog, []).function_count())
    assert not any("class_namespace" in n for n in data["notes"])
    assert data["variant_steps"]["class_namespace"] == [[NamespaceByClass.op, {}]]
    assert data["variant_steps"]["native"] == [] and set(data["variant_steps"]) == set(data["variants"])


def test_function_ratios_are_read_from_the_counts_the_studies_stored(study: dict[str, Any], tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Figure 3's query-weighted ratios come from each played domain's function counts as the
    studies stored them: no codec is rebuilt, and the report equals the one that rebuilds every
    variant from the catalog (a copy of the store whose studies stored no domain counts)."""
    from toolbias.report import grid

    rebuilt_for: list[list[str]] = []
    rebuild = grid.function_ratios
    monkeypatch.setattr(grid, "function_ratios", lambda spec, variants, *a: rebuilt_for.append(list(variants))
                        or rebuild(spec, variants, *a))
    stored = build_report(study["store"], settings=FAST)
    assert rebuilt_for == [] and set(stored.function_ratios) == set(stored.variants)
    old = tmp_path / "old.db"
    shutil.copy(study["store"], old)
    with sqlite3.connect(old) as db:
        assert db.execute("DELETE FROM study_domains").rowcount > 0
    monkeypatch.setitem(OPERATORS, NamespaceByClass.op, NamespaceByClass)  # the spec file's operator: rebuildable
    rebuilt = build_report(old, settings=FAST)
    assert rebuilt_for == [stored.variants]
    assert {**stored.to_json(), "store": ""} == {**rebuilt.to_json(), "store": ""}


def test_csv_is_the_per_episode_table(outputs: dict[str, Any], study: dict[str, Any]) -> None:
    csv = pd.read_csv(outputs["csv"])
    assert len(csv) == len(_db(study["store"]))
    assert {"model", "variant", "task_id", "kind", "success", "failure_mode", "termination"} <= set(csv.columns)
    assert "record" not in csv.columns


def test_figures_png_and_svg(outputs: dict[str, Any]) -> None:
    from matplotlib.image import imread

    names = {p.name for p in outputs["figs"].iterdir()}
    for stem in ("grid_strict_base", "grid_lenient_base", "function_ratio_strict_base", "gap_base"):
        assert {f"{stem}.png", f"{stem}.svg"} <= names, names
    img = imread(outputs["figs"] / "grid_strict_base.png")
    assert img.std() > 0.05                                   # not a blank canvas
    assert (outputs["figs"] / "gap_base.svg").read_text().lstrip().startswith("<?xml")


def test_terminal_report(study: dict[str, Any]) -> None:
    res = CliRunner().invoke(cli, ["report", "--store", study["store"], "--resamples", "300", "--repeats", "5"])
    assert res.exit_code == 0, res.output
    for text in ("oracle", "scripted", "native", "class_namespace", "100.0", "strict/base", "lenient/base",
                 "schema-form gap", "compliance probes", "difficulty prediction", "[95% CI]", "[paired CI]"):
        assert text in res.output, text


def test_missing_store_is_an_error_and_creates_nothing(tmp_path: Path) -> None:
    from toolbias.cli import main

    missing = tmp_path / "nope.db"
    with pytest.raises(SystemExit) as exc:
        main(["report", "--store", str(missing)])
    assert exc.value.code == 2 and not missing.exists()


def test_empty_store(tmp_path: Path) -> None:
    from toolbias.store import Store

    Store(tmp_path / "empty.db").close()
    res = CliRunner().invoke(cli, ["report", "--store", str(tmp_path / "empty.db")])
    assert res.exit_code == 0 and "no finished episodes" in res.output


# -- HTML ----------------------------------------------------------------------------

def test_html_has_every_failure_mode_every_variant_and_the_drill_down(outputs: dict[str, Any],
                                                                         study: dict[str, Any]) -> None:
    page = outputs["html"].read_text()
    df = _db(study["store"])
    for mode in set(df.failure_mode.dropna()):
        assert mode.replace("_", " ") in page and f"{mode}:" in page   # chip and the drill-down reason
    for v in outputs["json"]["variants"]:
        assert f'id="variant-{v}"' in page and f'href="#variant-{v}"' in page
    anchors = [a.split('"')[0] for a in page.split('<article class="ep" id="')[1:]]
    assert anchors and all(f'href="#{a}"' in page for a in anchors)
    assert "data:image/png;base64," in page                      # figures embedded, self-contained
    assert "src=\"http" not in page and "<link" not in page
    assert "Why it failed" in page and "Conversation" in page and "native: set_" in page
    assert f"steps: {NamespaceByClass.op}</p>" in page  # a spec-file variant's steps, as the study stored them


def test_a_drill_down_limit_keeps_every_failure_mode(study: dict[str, Any]) -> None:
    from toolbias.report import select_episodes

    modes = set(_db(study["store"]).failure_mode.dropna())
    views, left_out = select_episodes(study["store"], limit=len(modes))
    assert {v.failure_mode for v in views} == modes and left_out > 0
    assert all(v.record["task_id"] == v.task_id for v in views)


def test_html_escapes_model_text(outputs: dict[str, Any]) -> None:
    page = outputs["html"].read_text()
    assert "<script" not in page.lower()
    assert not re.search(r"<[^>]*\sonerror\s*=", page)           # never an attribute, only escaped text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;b&gt;" in page                                     # a model-chosen tool name, escaped


def test_selection_fragments_are_appended(study: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    import toolbias.report.selection as selection

    monkeypatch.setattr(selection, "html_fragments",
                        lambda store: [("Selection bias", "<p id='sel-frag'>API bias 0.12</p>")], raising=False)
    data = build_report(study["store"], settings=FAST)
    page = render_html(data, figures=False)
    assert "id='sel-frag'" in page and 'href="#extra-0"' in page

    def broken(store: str) -> list[tuple[str, str]]:
        raise RuntimeError("<boom>")

    monkeypatch.setattr(selection, "html_fragments", broken, raising=False)
    page = render_html(data, figures=False)
    assert "selection fragments failed: &lt;boom&gt;" in page


# -- headless Chromium ---------------------------------------------------------------

def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _render(page: Path, workdir: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    binary = _chromium()
    assert binary
    workdir.mkdir(parents=True, exist_ok=True)
    cmd = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
           f"--user-data-dir={workdir / 'profile'}", "--enable-logging=stderr", "--v=0", *extra, page.as_uri()]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


def _console(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "CONSOLE" in line]


needs_chromium = pytest.mark.skipif(_chromium() is None,
                                    reason="headless Chromium not installed (apt-get install -y chromium)")


@needs_chromium
def test_console_check_sees_script_errors(tmp_path: Path) -> None:
    """Negative control: the console check below would catch a failing script."""
    bad = tmp_path / "bad.html"
    bad.write_text("<!doctype html><html><body><p>x</p><script>notDefined()</script></body></html>")
    res = _render(bad, tmp_path / "chr", "--dump-dom")
    assert any("Uncaught" in line for line in _console(res.stderr)), res.stderr[-2000:]


@needs_chromium
def test_html_renders_in_chromium(outputs: dict[str, Any], tmp_path: Path) -> None:
    from matplotlib.image import imread

    shot = tmp_path / "shot.png"
    res = _render(outputs["html"], tmp_path / "chr", "--dump-dom", f"--screenshot={shot}",
                  "--window-size=1280,1600")
    assert shot.exists(), res.stderr[-2000:]
    assert _console(res.stderr) == []                           # no script errors, no CSP violations
    img = imread(shot)                                          # a page, not a blank canvas
    assert img.std() > 0.05 and (abs(img[..., :3] - img[0, 0, :3]).sum(axis=2) > 0.1).mean() > 0.02
    dom = res.stdout
    assert "toolbias report" in dom and "Model x variant grid" in dom
    assert "<script" not in dom.lower() and "pwned" not in dom.split("<body")[0]  # nothing ran
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in dom       # the payload is text on the page
