"""Security: model output stays data, and API keys never reach a file.

- Code-shaped model output (``__import__('os').system(...)``, template and YAML tags,
  SQL, shell substitutions) in tool names, arguments and text goes through every
  registered variant's decoder, the episode loop, the store, the exports and the
  reports: nothing evaluates it (``eval``/``exec``/``os.system``/``subprocess`` are
  watched while it flows, and a canary file the payloads would create never appears),
  and it comes back out byte for byte as data.
- A study against the loopback OpenAI-compatible server with ``OPENAI_API_KEY`` set
  (and a key in the base URL): the key reaches the server's ``Authorization`` header and
  no file the run produced (store and its WAL, response cache, exports, reports,
  figures, console output).

The HTML report's escaping of model text (a script-injection payload rendered in
headless Chromium) is tested with the report itself, in ``tests/test_report.py``.
"""

from __future__ import annotations

import asyncio
import builtins
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.servers import FakeOpenAIServer, Reply
from toolbias.catalog import load_catalog
from toolbias.catalog.model import NativeAction, Task
from toolbias.providers.scripted import ScriptedProvider
from toolbias.store import Store, export
from toolbias.study.episode import EpisodeConfig, run_episode
from toolbias.study.runner import StudyConfig, build_study, run_study
from toolbias.variants import build_codec, registry, resolve_variants

TOOLBIAS = shutil.which("toolbias") or str(Path(sys.executable).with_name("toolbias"))


def payloads(canary: Path) -> list[str]:
    """Strings that would do something if anything evaluated, rendered or shelled them."""
    c = str(canary)
    return [
        f"__import__('os').system('touch {c}')",
        f"exec(\"open('{c}', 'w').write('x')\")",
        f"eval(compile(\"open('{c}','w')\", 'x', 'exec'))",
        f"$(touch {c})", f"`touch {c}`", f"; touch {c} #",
        f"{{{{ self.__init__.__globals__.__builtins__.__import__('os').system('touch {c}') }}}}",
        f"!!python/object/apply:os.system ['touch {c}']",
        "'); DROP TABLE episodes; --",
        f"<script>fetch('file://{c}')</script>",
        "%(secret)s {0.__class__} ${HOME}",
    ]


class Watch:
    """Records what reaches eval/exec/os.system/subprocess while model output flows."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, needles: list[str]) -> None:
        self.needles = needles
        self.hits: list[str] = []
        for mod, name in ((builtins, "eval"), (builtins, "exec"), (os, "system"), (os, "popen"),
                          (subprocess, "Popen"), (subprocess, "run")):
            monkeypatch.setattr(mod, name, self._wrap(getattr(mod, name), name))

    def _wrap(self, fn: Any, name: str) -> Any:
        def watched(*args: Any, **kwargs: Any) -> Any:
            text = repr(args) + repr(kwargs)
            if any(n in text for n in self.needles):
                self.hits.append(f"{name}{text[:200]}")
            return fn(*args, **kwargs)

        return watched


@pytest.fixture
def canary(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "PWNED"
    yield path
    assert not path.exists(), "a payload was executed"


def test_code_in_model_output_stays_data(tmp_path: Path, canary: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    catalog = load_catalog("builtin")
    tasks = sorted(catalog.tasks, key=lambda t: t.id)[:3]
    evil = payloads(canary)
    watch = Watch(monkeypatch, [str(canary), "DROP TABLE"])

    def script(task: Task, codec: Any, messages: list[dict[str, Any]], turn: int) -> dict[str, Any] | None:
        if turn > 1:
            return None
        tools = codec.schema(task.domain)
        real = tools[0]["function"]["name"]
        props = list(tools[0]["function"]["parameters"].get("properties", {}))
        calls: list[dict[str, Any]] = [{"name": p, "arguments": {"x": p}} for p in evil]           # as tool names
        calls += [{"name": real, "arguments": {k: p for k in props or ["x"]}} for p in evil]       # as values
        calls += [{"name": real, "arguments": {p: 1}} for p in evil]                               # as keys
        calls += [{"name": real, "arguments": p} for p in evil]                                    # as raw JSON
        calls.append({"name": real, "arguments": "{\"a\": \"" + evil[0].replace("'", "\\'") + "\"}"})
        return {"content": "\n".join(evil), "tool_calls": calls}

    store = tmp_path / "s.db"
    variants = resolve_variants("representative")  # every variant's decoder: the test below
    cfg = StudyConfig(model="scripted", catalog="builtin", variants=",".join(v.name for v in variants), study="evil")
    run_study(build_study(cfg, ScriptedProvider(script=script, name="scripted"), tasks=tasks), str(store))
    export(store, "jsonl", tmp_path / "out.jsonl")
    export(store, "csv", tmp_path / "out.csv")
    from toolbias.cli import main

    main(["report", "--store", str(store), "--html", str(tmp_path / "r.html"), "--json",
          "--resamples", "200", "--repeats", "5"])  # returns normally on success (exits only on errors)
    assert not watch.hits, watch.hits
    with Store(store) as s:
        assert s.count() == len(tasks) * len(variants)          # the SQL payload did not drop anything
        for row in s.rows():
            text = json.dumps(row.record, ensure_ascii=False)
            assert all(json.dumps(p, ensure_ascii=False)[1:-1] in text for p in evil)  # kept verbatim, as data
            names = {c["tool_call"]["name"] for c in row.record["calls"]}
            assert set(evil) <= names
    exported = (tmp_path / "out.jsonl").read_text(encoding="utf-8")
    assert json.dumps(evil[0], ensure_ascii=False)[1:-1] in exported


def test_decoders_never_evaluate_payloads(canary: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Straight into every variant's decoder, strict and lenient, as names, keys and values."""
    catalog = load_catalog("builtin")
    evil = payloads(canary)
    watch = Watch(monkeypatch, [str(canary)])
    from toolbias.operators.base import Call

    for spec in registry().values():
        codec = build_codec(catalog, spec)
        for domain in [d.name for d in catalog.domains][:3]:
            tools = codec.schema(domain)
            for control in ("strict", "lenient"):
                session = codec.session(domain, control)
                for tool in tools[:3]:
                    name = tool["function"]["name"]
                    props = list(tool["function"]["parameters"].get("properties", {}))
                    for p in evil:
                        for call in (Call(p, {"x": p}), Call(name, {k: p for k in props}), Call(name, {p: p})):
                            d = session.decode(call)
                            json.dumps(d.to_dict())
    assert not watch.hits, watch.hits


def test_payload_round_trips_through_an_episode_as_data(tmp_path: Path, canary: Path) -> None:
    """A free-text argument holding code is executed as a native action with that exact string."""
    path = tmp_path / "notes.json"
    path.write_text(json.dumps([{"type": "function", "function": {
        "name": "add_note", "description": "store a note",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}}]))
    catalog = load_catalog(f"tools:{path}")
    evil = payloads(canary)
    task = Task(id="n1", domain="notes", query="note it", gold=(NativeAction("notes", "add_note", {"text": evil[0]}),))
    codec = build_codec(catalog, registry()["native"])
    provider = ScriptedProvider(script={"default": [{"tool_calls": [
        {"name": "add_note", "arguments": json.dumps({"text": p})} for p in evil]}]})
    rec = asyncio.run(run_episode(task, codec, provider, EpisodeConfig()))
    assert [a.arguments["text"] for a in rec.executed] == evil      # executed as data, byte for byte
    assert [json.loads(c.message)["state"]["text"] for c in rec.calls] == evil


# --------------------------------------------------------------------------- API keys


SECRET = "sk-SECRET-7c1f0a9e4b2d4e6f8a1b3c5d7e9f0a2b"
URL_SECRET = "urlpass-5e3d1c9b7a"


def _files_holding(root: Path, needle: bytes) -> list[str]:
    found = []
    for path in root.rglob("*"):
        if path.is_file() and needle in path.read_bytes():
            found.append(str(path.relative_to(root)))
    return found


def test_api_key_never_written_anywhere(tmp_path: Path) -> None:
    catalog = load_catalog("builtin")
    codec = build_codec(catalog, registry()["native"])
    task_by_query = {t.query: t for t in catalog.tasks}

    def responder(body: dict[str, Any]) -> Reply:
        last = body["messages"][-1]
        task = task_by_query.get(last.get("content")) if last.get("role") == "user" else None
        if task is None:
            return Reply.text("done")
        return Reply.calls(*((c.name, dict(c.arguments)) for c in codec.encode(task.gold)))

    work = tmp_path / "work"
    work.mkdir()
    env = dict(os.environ, OPENAI_API_KEY=SECRET, HOME=str(work), XDG_CACHE_HOME=str(work / ".cache"),
               TOOLBIAS_CACHE_DIR=str(work / ".toolbias-cache"))
    env.pop("OPENAI_BASE_URL", None)
    logs = []
    with FakeOpenAIServer(api_key=SECRET, responder=responder, fault_rate=0.2, seed=5,
                          faults=("http503", "rate_limit", "truncated", "empty_choices", "drop")) as server:
        url = server.base_url
        commands = [
            ["run", "--model", "openai:fake-model", "--base-url", url, "--variants", "native,transaction",
             "--tasks", "8", "--store", "s.db", "--cache", "cache.db"],
            ["probe", "--model", "openai:fake-model", "--base-url", url, "--variants", "native", "--n", "4",
             "--store", "s.db", "--cache", "cache.db"],
            ["export", "--store", "s.db", "--format", "jsonl", "-o", "s.jsonl"],
            ["export", "--store", "s.db", "--format", "csv", "-o", "s.csv"],
            ["report", "--store", "s.db", "--json", "--csv", "r.csv", "--html", "r.html", "--figures", "figs",
             "--resamples", "200", "--repeats", "5"],
        ]
        for argv in commands:
            proc = subprocess.run([TOOLBIAS, *argv], cwd=work, env=env, capture_output=True, text=True,
                                  timeout=300)
            logs.append(proc.stdout + proc.stderr)
            assert proc.returncode == 0, proc.stderr[-2000:]
        assert any(h.get("authorization") == f"Bearer {SECRET}" for h in server.headers)  # the key was used
        # a wrong key: the refusal names the problem, not the key
        bad = subprocess.run([TOOLBIAS, "run", "--model", "openai:fake-model", "--base-url", url, "--tasks", "1",
                              "--store", "bad.db"], cwd=work, env=dict(env, OPENAI_API_KEY=SECRET + "-wrong"),
                             capture_output=True, text=True, timeout=120)
        logs.append(bad.stdout + bad.stderr)
        assert bad.returncode == 2 and "bad API key" in bad.stderr, bad.stderr
    (work / "console.log").write_text("\n".join(logs), encoding="utf-8")
    produced = {str(p.relative_to(work)) for p in work.rglob("*") if p.is_file()}
    assert {"s.db", "cache.db", "s.jsonl", "s.csv", "r.csv", "r.html"} <= produced, produced
    assert not _files_holding(work, SECRET.encode()), _files_holding(work, SECRET.encode())
    assert not _files_holding(work, SECRET[3:19].encode())  # nor a part of it
    with Store(work / "s.db") as s:
        assert s.count() > 0 and s.count("infra_error") == 0


def test_key_in_the_base_url_is_not_stored(tmp_path: Path) -> None:
    """Some gateways take credentials in the URL (``http://user:key@host/v1``); they must not
    land in the store or the console either."""
    with FakeOpenAIServer() as server:
        secret_url = server.base_url.replace("http://", f"http://user:{URL_SECRET}@")
        env = dict(os.environ, OPENAI_API_KEY=SECRET)
        proc = subprocess.run([TOOLBIAS, "run", "--model", "openai:fake-model", "--base-url", secret_url,
                               "--variants", "native", "--tasks", "3", "--store", "s.db"], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)
    (tmp_path / "console.log").write_text(proc.stdout + proc.stderr, encoding="utf-8")
    assert not _files_holding(tmp_path, URL_SECRET.encode()), (_files_holding(tmp_path, URL_SECRET.encode()),
                                                                 proc.stderr[-1500:])
