"""Reliability: SIGKILL and resume, a faulty server, and changed configurations on resume.

- ``toolbias run`` is SIGKILLed at random moments and re-run with the same command until
  it finishes: the store ends with exactly one finished record per episode key and the
  same results as an uninterrupted run (oracle in process, and a deterministic model
  behind the loopback OpenAI-compatible server).
- A loopback server injects faults (5xx, 429 with and without Retry-After, timeouts,
  dropped connections, truncated JSON, empty choices) at 20%: the study completes,
  retries are bounded and logged, exhausted retries are stored as ``infra_error`` (never
  as model failures) and re-run on resume.
- Resuming with another variant set, catalog, model setting or task set is refused with
  the differences named.

``bench/faults.py`` runs the same checks at full size and prints figures.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.reliability import (
    CATALOG,
    GATED_RUN,
    TOOLBIAS,
    VARIANTS,
    HttpOracle,
    comparable,
    done_count,
    kill_and_resume,
    startup_time,
)
from tests.support.servers import FAULTS, FakeOpenAIServer, Reply
from toolbias.base import forked
from toolbias.catalog import Catalog, load_catalog
from toolbias.errors import StoreError
from toolbias.providers import make_provider
from toolbias.providers.wrapper import ProviderWrapper, RetryPolicy
from toolbias.store import Store
from toolbias.study.runner import StudyConfig, build_study, run_study
from toolbias.variants import build_codec, resolve_variants

# --------------------------------------------------------------------------- SIGKILL and resume


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    cat = load_catalog(CATALOG)
    if len(cat.tasks) < 1000:
        pytest.skip(f"the catalog {CATALOG} has {len(cat.tasks)} tasks; these tests need 1000")
    return cat


def test_sigkill_and_resume_oracle(tmp_path: Path, catalog: Catalog) -> None:
    """2,000 oracle episodes; SIGKILL at random moments 4 times; identical to an uninterrupted run."""
    base = [TOOLBIAS, "run", "--model", "oracle", "--catalog", CATALOG, "--variants", VARIANTS,
            "--tasks", "1000", "--concurrency", "8"]
    ref, killed = tmp_path / "ref.db", tmp_path / "killed.db"
    startup = startup_time(base, tmp_path / "scratch.db")
    t0 = time.perf_counter()
    subprocess.run(base + ["--store", str(ref)], check=True, capture_output=True)
    full = time.perf_counter() - t0
    # one kill known to fall mid-run: the workers wait after their first batch until the parent is gone
    gated = [sys.executable, str(GATED_RUN), str(forked.BATCH_ROWS), *base[1:], "--workers", "2", "--store",
             str(killed)]
    proc = subprocess.Popen(gated, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while done_count(killed) == 0 and proc.poll() is None:
            time.sleep(0.05)  # a condition: rows stored
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()
    assert 0 < done_count(killed) < 2000
    # then random moments, start-up included
    kill_and_resume(base + ["--store", str(killed)], killed, kills=4, startup=startup, full=full, total=2000, seed=7)
    expected, got = comparable(ref), comparable(killed)
    assert len(expected) == 2000
    assert got == expected


def test_sigkill_and_resume_loopback(tmp_path: Path, catalog: Catalog) -> None:
    """The same against the loopback OpenAI-compatible server with a deterministic model."""
    codecs = [build_codec(catalog, s) for s in resolve_variants(VARIANTS)]
    with FakeOpenAIServer(responder=HttpOracle(catalog, codecs)) as server:
        base = [TOOLBIAS, "run", "--model", "openai:fake-model", "--base-url", server.base_url, "--catalog",
                CATALOG, "--variants", VARIANTS, "--tasks", "60", "--concurrency", "8"]
        ref, killed = tmp_path / "ref.db", tmp_path / "killed.db"
        startup = startup_time(base, tmp_path / "scratch.db")
        t0 = time.perf_counter()
        subprocess.run(base + ["--store", str(ref)], check=True, capture_output=True)
        full = time.perf_counter() - t0
        kill_and_resume(base + ["--store", str(killed)], killed, kills=3, startup=startup, full=full, total=120,
                        seed=11)
    expected, got = comparable(ref), comparable(killed)
    assert len(expected) == 120 and got == expected
    successes = sum(1 for v in expected.values() if v[3])
    modes = {v[4] for v in expected.values() if v[4]}
    assert 0 < successes < 120 and len(modes) >= 2, (successes, modes)  # a mixed result, not all-or-nothing


# --------------------------------------------------------------------------- a faulty server

#: retries with tiny waits (the test is about counts, not backoff); every fault kind the loopback
#: server knows is injected, timeouts hang 4 s against a 3 s client timeout (roomy, so a loaded
#: machine does not turn slow replies into extra timeouts)
FAST_RETRY = RetryPolicy(attempts=8, initial_wait=0.001, max_wait=0.02)


def _faulty_study(server: FakeOpenAIServer, catalog: Catalog, tasks: int, retry: RetryPolicy,
                  store: Path) -> tuple[Any, ProviderWrapper]:
    provider = make_provider("openai:fake-model", base_url=server.base_url, timeout=3.0)
    model = ProviderWrapper(provider, concurrency=16, retry=retry)
    cfg = StudyConfig(model="openai:fake-model", catalog=CATALOG, variants=VARIANTS, tasks=tasks, concurrency=16)
    study = build_study(cfg, model)
    return run_study(study, str(store)), model


@pytest.fixture
def faulty_server(catalog: Catalog) -> Any:
    codecs = [build_codec(catalog, s) for s in resolve_variants(VARIANTS)]
    with FakeOpenAIServer(responder=HttpOracle(catalog, codecs), fault_rate=0.2, faults=FAULTS, seed=3,
                          retry_after=0.01, hang_s=4.0) as server:
        yield server


def test_faults_at_20_percent_study_completes(tmp_path: Path, catalog: Catalog, faulty_server: FakeOpenAIServer,
                                              caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="toolbias.providers")
    prog, model = _faulty_study(faulty_server, catalog, 60, FAST_RETRY, tmp_path / "f.db")
    stats = model.stats
    for _ in range(3):  # 8 failed tries in a row (rare; likelier when a loaded machine adds timeouts):
        if not prog.infra_errors:  # a resume re-runs those episodes; its tries count with the first run's
            break
        prog, again = _faulty_study(faulty_server, catalog, 60, FAST_RETRY, tmp_path / "f.db")
        stats.add(again.stats)
    assert prog.total == 120 and prog.infra_errors == 0
    faults = sum(n for k, n in faulty_server.counts.items() if k != "reply")
    assert faults >= 10 and set(faulty_server.counts) - {"reply"} >= {"http503", "drop", "truncated"}
    # bounded: never more tries per call than the policy allows; logged: one warning per retry
    assert 0 < stats.retries <= stats.calls * (FAST_RETRY.attempts - 1)
    served_faults = sum(n for k, n in faulty_server.counts.items() if k != "reply")
    assert stats.retries + stats.failures >= served_faults  # every fault the server sent was a failed try
    retry_logs = [r for r in caplog.records if "retrying" in r.getMessage()]
    assert len(retry_logs) == stats.retries
    # results equal those of a fault-free server
    faulty_server.fault_rate = 0.0
    _faulty_study(faulty_server, catalog, 60, FAST_RETRY, tmp_path / "clean.db")
    assert comparable(tmp_path / "f.db") == comparable(tmp_path / "clean.db")


def test_exhausted_retries_are_infra_errors_and_rerun_on_resume(tmp_path: Path, catalog: Catalog,
                                                               faulty_server: FakeOpenAIServer) -> None:
    store = tmp_path / "f.db"
    faulty_server.fault_rate = 0.5
    prog, model = _faulty_study(faulty_server, catalog, 60, RetryPolicy(attempts=2, initial_wait=0.001,
                                                                          max_wait=0.002), store)
    assert prog.total == 120 and prog.infra_errors > 0 and model.stats.failures >= prog.infra_errors
    with Store(store) as s:
        infra = list(s.rows(status="infra_error"))
        done_before = {r.key: r.created for r in s.rows(status="done", with_record=False)}
    assert len(infra) == prog.infra_errors
    for r in infra:  # kept apart from model failures: no score, no failure mode, the fault named
        assert r.success is None and r.failure_mode is None and r.termination == "infra_error"
        assert any(w in r.record["infra_error"] for w in ("HTTP", "timed out", "connection", "unreadable",
                                                           "no choices", "transport"))
    # resume against a healthy server: only the infra errors run again
    faulty_server.fault_rate = 0.0
    requests_before = len(faulty_server.requests)
    prog2, _ = _faulty_study(faulty_server, catalog, 60, FAST_RETRY, store)
    assert prog2.skipped == len(done_before) and prog2.infra_errors == 0
    assert len(faulty_server.requests) - requests_before <= 2 * len(infra)  # at most 2 turns each
    with Store(store) as s:
        after = {r.key: r.created for r in s.rows(status="done", with_record=False)}
        assert s.count("infra_error") == 0 and len(after) == 120
    assert all(after[k] == c for k, c in done_before.items())  # finished ones untouched
    _faulty_study(faulty_server, catalog, 60, FAST_RETRY, tmp_path / "clean.db")
    assert comparable(store) == comparable(tmp_path / "clean.db")


def test_infra_error_mid_episode_is_not_a_model_failure(tmp_path: Path, catalog: Catalog) -> None:
    """A fault on the second turn, after calls executed, still stores infra_error (no score)."""
    codecs = [build_codec(catalog, s) for s in resolve_variants("native")]
    oracle = HttpOracle(catalog, codecs, flawed=0.0)

    def responder(body: dict[str, Any]) -> Reply | dict[str, Any]:
        if body["messages"][-1]["role"] == "tool":
            return {"choices": []}  # every second turn: empty choices
        return oracle(body)

    with FakeOpenAIServer(responder=responder) as server:
        provider = make_provider("openai:fake-model", base_url=server.base_url, timeout=5)
        model = ProviderWrapper(provider, retry=RetryPolicy(attempts=2, initial_wait=0.001, max_wait=0.002))
        cfg = StudyConfig(model="openai:fake-model", catalog=CATALOG, variants="native", tasks=5)
        prog = run_study(build_study(cfg, model), str(tmp_path / "s.db"))
    assert prog.infra_errors == 5
    with Store(tmp_path / "s.db") as s:
        rows = list(s.rows(status="infra_error"))
    assert len(rows) == 5 and all(r.success is None and r.failure_mode is None for r in rows)
    assert all(r.record["executed"] for r in rows)  # calls ran before the fault; still not scored


# --------------------------------------------------------------------------- changed configuration on resume


def _run(args: list[str], store: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    if "--catalog" not in args:
        args = ["--catalog", CATALOG, *args]
    return subprocess.run([TOOLBIAS, "run", "--model", "oracle", "--store", str(store), *args],
                          capture_output=True, text=True, env=env)


@pytest.mark.parametrize("changed, expect", [
    (["--variants", "native,fully_merged"], ["variants: stored ['native'] != now ['native', 'fully_merged']"]),
    (["--tasks", "8"], ["n_tasks: stored 5 != now 8"]),
    (["--temperature", "0.7"], ["settings.generate.temperature: stored 0.0 != now 0.7"]),
    (["--max-tokens", "64"], ["settings.generate.max_tokens: stored 512 != now 64"]),
    (["--turn-limit", "4"], ["turn_limit: stored 16 != now 4"]),
    (["--seed", "3"], ["seed: stored 0 != now 3"]),
])
def test_changed_configuration_is_refused_and_explained(tmp_path: Path, catalog: Catalog, changed: list[str],
                                                        expect: list[str]) -> None:
    store = tmp_path / "s.db"
    # the first run in process (what `toolbias run --model oracle --variants native --tasks 5` does)
    run_study(StudyConfig(model="oracle", catalog=CATALOG, variants="native", tasks=5), str(store))
    args = ["--variants", "native", "--tasks", "5"]
    for i in range(0, len(changed), 2):  # the changed option replaces or joins the original ones
        if changed[i] in args:
            args[args.index(changed[i]) + 1] = changed[i + 1]
        else:
            args += changed[i:i + 2]
    again = _run(args, store)
    assert again.returncode == 2, again.stderr
    assert again.stderr.startswith("error:") or "\nerror:" in again.stderr, again.stderr
    assert "Traceback" not in again.stderr
    for text in expect:
        assert text in again.stderr, again.stderr
    assert "fix: re-run with the original options" in again.stderr
    with Store(store) as s:
        assert s.count() == 5  # nothing mixed in


def test_changed_catalog_is_refused(tmp_path: Path, catalog: Catalog, toolschemaspace_dir: Path) -> None:
    store = tmp_path / "s.db"
    # another catalog is its own study by default (issue 24 item 12); under one study name it is refused
    assert _run(["--variants", "native", "--tasks", "3", "--study", "one"], store).returncode == 0
    again = _run(["--variants", "native", "--tasks", "3", "--study", "one", "--catalog",
                  f"toolschemaspace:{toolschemaspace_dir}"], store)
    assert again.returncode == 2 and f"catalog: stored '{CATALOG.split(':')[0]}" in again.stderr, again.stderr


def test_edited_variant_spec_under_the_same_name_is_refused(tmp_path: Path, catalog: Catalog) -> None:
    spec = tmp_path / "mine.json"
    spec.write_text(json.dumps({"name": "mine", "steps": [{"op": "strip"}]}))
    store = tmp_path / "s.db"
    assert _run(["--variants", str(spec), "--tasks", "3"], store).returncode == 0
    spec.write_text(json.dumps({"name": "mine", "steps": [{"op": "rename", "method": "opaque"}]}))
    again = _run(["--variants", str(spec), "--tasks", "3"], store)
    assert again.returncode == 2 and "variant_steps.mine: stored" in again.stderr, again.stderr


def test_changed_base_url_or_model_settings_via_api(tmp_path: Path, catalog: Catalog) -> None:
    """Provider settings (the model name) are part of the identity; base URLs are not (tested in test_store)."""
    store = tmp_path / "s.db"
    codecs = [build_codec(catalog, s) for s in resolve_variants("native")]
    with FakeOpenAIServer(models=("fake-model", "other-model"), responder=HttpOracle(catalog, codecs)) as server:
        def study(model: str) -> Any:
            provider = make_provider(model, base_url=server.base_url)
            return build_study(StudyConfig(model=model, catalog=CATALOG, variants="native", tasks=3,
                                           study="s"), provider)

        run_study(study("openai:fake-model"), str(store))
        with pytest.raises(StoreError) as err:
            run_study(study("openai:other-model"), str(store))
    text = str(err.value)
    assert "model: stored 'openai:fake-model' != now 'openai:other-model'" in text
    assert "settings.provider.model: stored 'fake-model' != now 'other-model'" in text


def test_the_same_command_resumes_without_work(tmp_path: Path, catalog: Catalog) -> None:
    store = tmp_path / "s.db"
    assert _run(["--variants", "native", "--tasks", "20"], store).returncode == 0
    before = comparable(store)
    env = dict(os.environ, TOOLBIAS_CONCURRENCY="3")  # an operational knob may change
    again = _run(["--variants", "native", "--tasks", "20", "--concurrency", "2"], store, env=env)
    assert again.returncode == 0, again.stderr
    assert comparable(store) == before


def test_infra_errors_are_listed_by_variant_and_reason(tmp_path: Path) -> None:
    """`toolbias run` ends by naming which variants hit infrastructure errors and why, so a
    transient fault (re-run) can be told from one that recurs (a prompt too long)."""
    script = tmp_path / "s.json"
    reason = "the prompt has 26355 tokens, more than the model's context window n_ctx=8192"
    script.write_text(json.dumps({"default": [{"infra_error": reason, "retryable": False}]}))
    proc = subprocess.run([TOOLBIAS, "run", "--model", f"scripted:{script}", "--catalog", CATALOG,
                           "--variants", "native,fully_merged", "--tasks", "2", "--store", str(tmp_path / "s.db")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    err = " ".join(proc.stderr.split())
    assert "4 episode(s) hit infrastructure errors" in err
    assert f"native: 2 x {reason}" in err and f"fully_merged: 2 x {reason}" in err
    assert "--variants" in err and "Traceback" not in err
