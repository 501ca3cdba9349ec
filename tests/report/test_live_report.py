"""`toolbias report` on live conversations: a real ProxyServer per variant writes them into one
store over loopback, in front of a scripted upstream that plays the task's gold in the variant
after some off-schema calls; the report's numbers must be what the conversations did."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from toolbias.catalog import load_catalog
from toolbias.catalog.model import NativeAction, Task
from toolbias.operators.base import Call
from toolbias.proxy.codecs import CodecSource
from toolbias.variants import registry, resolve_variant
from toolbias.variants.codec import Control, Outcome

pytest.importorskip("uvicorn", reason="toolbias proxy needs uvicorn (pip install 'toolbias[proxy]')")

from tests.support.agents import native_tools, proxy_server, run_agent  # noqa: E402
from tests.support.servers import FakeOpenAIServer, Reply  # noqa: E402
from toolbias.cli import cli  # noqa: E402

BAD_TOOL = "<script>alert(1)</script>"  # model output is data: the HTML must escape it
USAGE = {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
MAX_ROUNDS = 10  # above the longest turn of the plan (a transaction of the whole gold, after a rejection)
#: per variant: per conversation, the off-schema calls the model makes first ("unknown" tool or
#: unparsable "json" arguments); "stuck" never makes a valid call (the turn's round limit ends it)
PLAN: dict[str, list[list[str] | str]] = {
    "transaction": [[], ["unknown"], "stuck"],
    "native": [["json"]],
    "fully_merged": [[], ["unknown"], ["unknown", "json"]],
}


@dataclass
class Scripted:
    """The upstream: per conversation (told apart by its user message) the planned off-schema
    calls, then the gold encoded in the variant, one call per request, then an answer."""

    encoded: list[Any]
    plans: dict[str, list[str] | str] = field(default_factory=dict)

    def __call__(self, body: dict[str, Any]) -> Reply:
        query = next(m["content"] for m in body["messages"] if m["role"] == "user")
        plan = self.plans[query]
        made = sum(len(m.get("tool_calls") or []) for m in body["messages"] if m["role"] == "assistant")
        if plan == "stuck" or made < len(plan):
            kind = "unknown" if plan == "stuck" else plan[made]
            good = self.encoded[0]
            reply = Reply.calls((BAD_TOOL, {}) if kind == "unknown" else (good.name, '{"broken": '))
        elif made - len(plan) < len(self.encoded):
            c = self.encoded[made - len(plan)]
            reply = Reply.calls((c.name, dict(c.arguments)))
        else:
            reply = Reply.text("All done.")
        reply.usage = USAGE
        return reply


@dataclass
class Expected:
    conversations: int = 0
    turns: int = 0
    rounds: int = 0
    upstream_calls: int = 0
    native_calls: int = 0
    replies: int = 0
    rejections: int = 0
    protocol_rounds: int = 0
    rates: list[float] = field(default_factory=list)
    stuck: int = 0


def _protocol_replies(variant: str, tools: list[dict[str, Any]], encoded: list[Any]) -> int:
    """How many of the encoded calls are answered by the protocol (not native), decoded afresh."""
    bound = CodecSource(resolve_variant(variant)).for_tools(tools)
    session = bound.codec.session(bound.domain, Control.STRICT)
    return sum(session.decode(Call(c.name, dict(c.arguments))).outcome is Outcome.REPLY for c in encoded)


@pytest.fixture(scope="module")
def live_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, Expected]]]:
    """Three proxies (one per variant, one store) and what their conversations did, counted
    from the agent's and the upstream's side."""
    catalog = load_catalog("builtin")
    task: Task = next(t for t in catalog.tasks if len(t.gold) >= 2)
    tools = native_tools(catalog, task.domain)
    db = tmp_path_factory.mktemp("live") / "live.db"
    expected: dict[str, Expected] = {}
    with FakeOpenAIServer(models=("fake-model",)) as upstream:
        for variant, plans in PLAN.items():
            bound = CodecSource(resolve_variant(variant)).for_tools(tools)
            encoded = bound.codec.encode([NativeAction(bound.domain, a.tool, a.arguments) for a in task.gold])
            script = Scripted(encoded, {f"{task.query} #{i}": p for i, p in enumerate(plans)})
            upstream.responder = script
            exp = expected[variant] = Expected()
            replies = _protocol_replies(variant, tools, encoded)
            with proxy_server(upstream, variant, store=str(db), max_rounds=MAX_ROUNDS) as proxy:
                for query, plan in script.plans.items():
                    before = len(upstream.requests)
                    executed, messages, _ = run_agent(proxy.base_url, tools, query)
                    rounds = len(upstream.requests) - before
                    bad = rounds if plan == "stuck" else len(plan)
                    calls = bad + (0 if plan == "stuck" else len(encoded))
                    exp.conversations += 1
                    exp.turns += sum(m["role"] == "assistant" for m in messages)
                    exp.rounds += rounds
                    exp.upstream_calls += calls
                    exp.native_calls += len(executed)
                    exp.rejections += bad
                    exp.replies += 0 if plan == "stuck" else replies
                    exp.protocol_rounds += bad + (0 if plan == "stuck" else replies)
                    exp.rates.append(bad / calls)
                    exp.stuck += plan == "stuck"
                    if plan == "stuck":
                        assert rounds == MAX_ROUNDS and not executed
                    else:
                        assert executed == [(a.tool, dict(a.arguments)) for a in task.gold]
    yield db, expected


def _report(db: Path, *args: str) -> str:
    result = CliRunner().invoke(cli, ["report", "--store", str(db), "--resamples", "2000", *args],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_json_numbers_are_what_the_conversations_did(live_store: tuple[Path, dict[str, Expected]]) -> None:
    db, expected = live_store
    live = json.loads(_report(db, "--json"))["live"]
    order = list(registry())
    assert [r["variant"] for r in live] == sorted(PLAN, key=order.index)  # native first, then the registry's
    assert live[0]["variant"] == "native"
    for row in live:
        exp = expected[row["variant"]]
        assert row["study"] == f"proxy|{row['variant']}" and row["model"] == "proxy"
        for key in ("conversations", "turns", "rounds", "upstream_calls", "native_calls", "replies", "rejections",
                    "protocol_rounds"):
            assert row[key] == getattr(exp, key), (row["variant"], key)
        assert row["prompt_tokens"] == 10 * exp.rounds and row["completion_tokens"] == 2 * exp.rounds
        assert row["tokens_per_turn"] == pytest.approx(12 * exp.rounds / exp.turns)
        assert row["protocol_rounds_per_native_call"] == pytest.approx(exp.protocol_rounds / exp.native_calls)
        rate = row["rejection_rate"]
        assert rate["n"] == exp.conversations
        assert rate["estimate"] == pytest.approx(sum(exp.rates) / len(exp.rates))
        assert rate["low"] <= rate["estimate"] <= rate["high"]
        assert row["terminations"] == ({"protocol_round_limit": exp.stuck} if exp.stuck else {})
        assert sum(row["rejection_kinds"].values()) == exp.rejections
        assert all(len(m["message"]) <= 160 for m in row["top_rejections"])
    by = {r["variant"]: r for r in live}
    # the scripted rejections, by kind and message
    assert by["fully_merged"]["rejection_kinds"] == {"unknown_tool": 2, "parse_error": 1}
    top = by["fully_merged"]["top_rejections"]
    assert [(m["kind"], m["count"]) for m in top] == [("unknown_tool", 2), ("parse_error", 1)]
    assert top[0]["message"].startswith(f"Unknown tool '{BAD_TOOL}'") and "could not parse" in top[1]["message"]
    assert by["transaction"]["top_rejections"][0]["count"] == 1 + MAX_ROUNDS
    # the protocol's overhead: transaction answers begin/commit itself, fully merged and native have no protocol
    assert by["transaction"]["replies"] > 0 and by["fully_merged"]["replies"] == by["native"]["replies"] == 0
    native = by["native"]["rejection_rate"]  # one conversation: no spread to resample
    assert native["low"] == native["estimate"] == native["high"] == expected["native"].rates[0] > 0
    # a study filter keeps one proxy's conversations
    only = json.loads(_report(db, "--json", "--study", "proxy|transaction"))["live"]
    assert [r["variant"] for r in only] == ["transaction"]


def test_text_and_html_render_live_conversations(live_store: tuple[Path, dict[str, Expected]],
                                                 tmp_path: Path) -> None:
    db, expected = live_store
    text = _report(db)
    assert "no finished episodes" not in text
    assert "Live conversations through toolbias proxy" in text and "most common rejection messages" in text
    rows = [line for line in text.splitlines() if line.startswith("│ ")]
    assert [line.split("│")[1].strip() for line in rows[:3]] == ["native", "fully_merged", "transaction"]
    assert "round limit 1" in text
    page = tmp_path / "live.html"
    _report(db, "--html", str(page))
    html = page.read_text(encoding="utf-8")
    assert '<section id="live">' in html and 'href="#live"' in html
    assert f"{sum(e.conversations for e in expected.values())} live conversations" in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and BAD_TOOL not in html
    header = html.split("<header>", 1)[1].split("</header>", 1)[0]
    live = json.loads(_report(db, "--json"))["live"]
    assert f"models: {', '.join(sorted({r['model'] for r in live}))} - catalogs: " in header
    assert "catalogs: -" not in header  # named through the conversations, with no task episode in the store


def test_a_store_without_live_rows_reports_none(tmp_path: Path) -> None:
    from toolbias.report import build_report
    from toolbias.store import Store

    db = tmp_path / "empty.db"
    Store(db).close()
    assert build_report(db).live == []
    assert "no finished episodes" in _report(db)


def test_studies_and_models_get_their_columns_where_they_say_more_than_the_variant() -> None:
    """Two runs of one variant under their own --study names (stores merged), one with --model:
    a row each, and the text tables name the study and the model."""
    from toolbias.proxy.conversation import CallLog
    from toolbias.report.live import live_table, live_table_rows, summarize

    logs = []
    for study, model, rejected in (("mine|a", "proxy", 0), ("mine|b", "openai:m", 1)):
        log = CallLog(conv_id=study, variant="transaction", domain="live", catalog="request")
        log.calls = [{"round": 1, "tool_call": {}, "decoded": None, "message": "Error: could not parse"}] * rejected
        log.turns, log.rounds, log.rejections = 1, 1 + rejected, rejected
        logs.append(summarize(study, model, log.to_dict()))
    rows = live_table(logs, order=["native", "transaction"], n_resamples=100)
    assert [(r["study"], r["model"], r["rejections"]) for r in rows] == [("mine|a", "proxy", 0),
                                                                       ("mine|b", "openai:m", 1)]
    assert rows[0]["rejection_rate"]["n"] == 0 and rows[1]["rejection_rate"]["estimate"] == 1.0
    (head, cells), (msg_head, messages) = live_table_rows(rows).values()
    assert head[:3] == ["variant", "study", "model"] and cells[1][:3] == ["transaction", "mine|b", "openai:m"]
    assert cells[0][head.index("rejected % [95% CI]")] == "-"  # no upstream call: no rate
    assert messages == [["transaction", "mine|b", "openai:m", "1", "parse_error", "could not parse"]]


def test_tau2_results_in_the_same_store_stay_their_own_section(live_store: tuple[Path, dict[str, Expected]],
                                                               tmp_path: Path) -> None:
    """tau2's results for the same variants (its runner through these proxies) go to Table 9; the
    live rows are the same with or without them."""
    import shutil

    from tests.support.tau2_results import rewards_file

    db = tmp_path / "both.db"
    shutil.copy(live_store[0], db)
    before = json.loads(_report(db, "--json"))["live"]
    rewards = rewards_file(tmp_path / "merged.json", "airline", [1, 0, 1])
    after = json.loads(_report(db, "--json", "--tau2-results", f"fully_merged={rewards}"))
    assert after["live"] == before
    [row] = after["tau2_bench"]
    assert row["schemas"] == ["fully_merged"] and row["cells"]["fully_merged"]["episodes"] == 3
