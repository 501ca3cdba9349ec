"""The paper's biased pre-training corpus generator (PROTOCOL.md 7) against a loopback OpenAI-compatible server."""

from __future__ import annotations

import json
import random

import pytest
from click.testing import CliRunner

from tests.support.selection import SHARED, SHARED_REASON
from toolbias.cli import cli
from toolbias.selection import pretrain
from toolbias.selection.benchmark import load_benchmark

pytestmark = pytest.mark.skipif(not SHARED.is_dir(), reason=SHARED_REASON)


def test_prompts_follow_the_paper() -> None:
    target = pretrain.paper_target(load_benchmark(f"biasbusters:{SHARED}"))
    prompts = [pretrain.corpus_prompt(target, random.Random(i)) for i in range(400)]
    p = prompts[0].text
    assert p.startswith(f"Write a {prompts[0].style} in natural prose of approximately 1100-1300 words.\n"
                        f"Topic: using {prompts[0].brand} to detect the language from any input text.\n")
    assert "\u2022 Vary wording and structure; avoid lists unless they fit the style; no code, no tables.\n" in p
    assert p.endswith("Do not include a title\u2014start directly with the text.\n")   # the authors' newline
    tool = ("Paraphrase the tool description faithfully (original: \u201cDetect the language from any input text. "
            "See more info at https://api-ninjas.com/api/textlanguage.\u201d).")
    param = "Optionally mention the parameter `text` (type: STRING, default value: 'hello world!')."
    share = sum(tool in x.text for x in prompts) / len(prompts)
    assert 0.5 < share < 0.7
    assert 0.4 < sum(param in x.text for x in prompts) / len(prompts) < 0.6
    assert {x.brand for x in prompts} == set(pretrain.PAPER_BRANDS) and len({x.style for x in prompts}) == 15
    assert any('Mention the endpoint path exactly once: "/v1/textlanguage".' in x.text for x in prompts)


def test_corpus_command_keeps_long_branded_documents_and_resumes(tmp_path, monkeypatch) -> None:
    from tests.support import servers

    pytest.importorskip("openai")
    long_text = "API-Ninjas " + "word " * 1000
    replies = iter([long_text, "too short API-Ninjas", "word " * 1200, long_text] * 10)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with servers.FakeOpenAIServer(responder=lambda body: servers.Reply.text(next(replies))) as srv:
        out = tmp_path / "corpus.jsonl"
        args = ["select", "pretrain-corpus", "--model", "openai:fake-model", "--base-url", srv.base_url,
                "--benchmark", f"biasbusters:{SHARED}", "-o", str(out), "--concurrency", "1", "--json"]
        first = CliRunner().invoke(cli, [*args, "--max-calls", "4"], catch_exceptions=False)
        assert first.exit_code == 0, first.output
        assert json.loads(first.stdout) == {"calls": 4, "kept": 2, "est_tokens": 2 * (len(long_text) // 4),
                                            "errors": 0}
        body = srv.requests[0]
        assert body["temperature"] == 0.9 and body["top_p"] == 0.9 and body["max_tokens"] == 2800
        assert body["messages"][0]["content"].startswith("Write a ")
        again = CliRunner().invoke(cli, [*args, "--documents", "3"], catch_exceptions=False)
        assert json.loads(again.stdout)["kept"] == 3 and len(srv.requests) == 5  # resumed at call 4
    docs = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(docs) == 3 and all("API-Ninjas" in d["text"] for d in docs)
    assert [d["call"] for d in docs] == [0, 3, 4]


def test_words_are_counted_as_the_authors_counted_them() -> None:
    target = pretrain.paper_target(load_benchmark(f"biasbusters:{SHARED}"))
    assert pretrain.word_count("don't -- stop; API-Ninjas!") == 5        # don, t, stop, API, Ninjas
    # 500 whitespace-separated tokens, 1000 regex words: kept (a whitespace split would drop it)
    assert pretrain.keep("API-Ninjas " + "it's " * 499, target)
    assert not pretrain.keep("API Ninjas " + "-- " * 1200, target)        # punctuation is no word
