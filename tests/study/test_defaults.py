"""Run policy as an API: the study a set of options describes, the same from a script and
from ``toolbias run``; errors as data under ``--json``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from toolbias.cli import cli, main
from toolbias.errors import CatalogError, ToolbiasError
from toolbias.store import Store
from toolbias.study.defaults import EMBEDDED_DEFAULT_JOB, MAX_TOKENS, TURN_LIMIT, parse_shard, study_config
from toolbias.study.episode import Condition
from toolbias.variants.codec import Control


def test_the_embedded_model_with_no_task_option_gets_the_default_job() -> None:
    cfg = study_config(model="local")
    job = EMBEDDED_DEFAULT_JOB
    assert (cfg.sample, cfg.domains, cfg.turn_limit, cfg.generate.max_tokens) == \
        (job.sample, job.domains, job.turn_limit, job.max_tokens)


def test_options_given_win_over_the_default_job() -> None:
    cfg = study_config(model="local", turn_limit=5, max_tokens=64)
    assert (cfg.turn_limit, cfg.generate.max_tokens) == (5, 64)
    assert cfg.domains == EMBEDDED_DEFAULT_JOB.domains
    named = study_config(model="local", domains="lighting, ")
    assert (named.domains, named.sample, named.turn_limit) == (("lighting",), None, TURN_LIMIT)


def test_other_models_get_the_plain_defaults() -> None:
    cfg = study_config(model="oracle", control="lenient", condition="required", shard="1/4",
                       base_urls=["http://a", "http://b"])
    assert (cfg.sample, cfg.domains, cfg.turn_limit, cfg.generate.max_tokens) == (None, (), TURN_LIMIT, MAX_TOKENS)
    assert (cfg.control, cfg.condition, cfg.shard) == (Control.LENIENT, Condition.REQUIRED, (1, 4))
    assert cfg.provider_options == {"base_urls": ["http://a", "http://b"]}


@pytest.mark.parametrize("bad", ["4/4", "x", "1/0", "-1/2"])
def test_a_bad_shard_is_refused(bad: str) -> None:
    with pytest.raises(ToolbiasError, match="bad --shard"):
        parse_shard(bad)


def test_the_cli_runs_the_study_the_api_describes(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    result = CliRunner().invoke(cli, ["run", "--model", "oracle", "--variants", "native", "--tasks", "2",
                                      "--store", str(store), "--turn-limit", "4"])
    assert result.exit_code == 0, result.output
    with Store(store) as st:
        rows = list(st.rows(with_record=False))
        identity = next(iter(st.studies().values()))
    assert len(rows) == 2 and all(r.success for r in rows)
    assert identity["turn_limit"] == 4


def test_errors_are_data_under_json(capsys: pytest.CaptureFixture[str]) -> None:
    err = CatalogError("unknown catalog kind 'nope'", where="catalog spec 'nope:x'", fix="use builtin")
    assert err.to_dict() == {"kind": "CatalogError", "what": "unknown catalog kind 'nope'",
                             "where": "catalog spec 'nope:x'", "fix": "use builtin"}
    with pytest.raises(SystemExit) as info:
        main(["catalog", "stats", "--catalog", "nope:x", "--json"])
    assert info.value.code == 2
    out = capsys.readouterr()
    assert json.loads(out.out)["error"]["kind"] == "CatalogError"
    assert "unknown catalog kind 'nope'" in out.err


def test_the_default_job_is_an_ordinary_study_its_command_spells_out() -> None:
    """Same measurement as a full study: every choice of the default job is a run option."""
    job = EMBEDDED_DEFAULT_JOB
    implicit = study_config(model="local")
    explicit = study_config(model="local", variants=job.variants, domains=",".join(job.domains), calls=job.calls,
                            phrasing=job.phrasing, turn_limit=job.turn_limit, max_tokens=job.max_tokens)
    assert implicit == explicit
    assert (implicit.variants, implicit.calls, implicit.phrasing) == (job.variants, (1,), "query_base")
    assert "fully_merged" in job.variants.split(",") and "native" in job.variants.split(",")
    command = job.command()
    for option in (f"--variants {job.variants}", "--calls 1", "--phrasing query_base", f"--turn-limit {job.turn_limit}"):
        assert option in command
    # naming variants (or any task option) is a study of one's own, with the plain defaults
    own = study_config(model="local", variants="native")
    assert (own.calls, own.phrasing, own.turn_limit, own.domains) == ((), "query", TURN_LIMIT, ())


def test_calls_and_phrasing_choose_and_word_the_tasks(tmp_path: Path) -> None:
    from toolbias.catalog import load_catalog

    store = tmp_path / "s.db"
    base = ["run", "--model", "oracle", "--variants", "native", "--domains", "tv", "--calls", "1", "--store",
            str(store)]
    for extra in ([], ["--phrasing", "query_base"]):
        result = CliRunner().invoke(cli, base + extra)
        assert result.exit_code == 0, result.output
    templated = {t.id: t.query_templated for t in load_catalog("builtin").tasks}
    with Store(store) as st:
        studies = set(st.studies())
        rows = list(st.rows())
    assert studies == {"oracle|strict|base", "oracle|strict|base|query_base"}
    single = [t for t in load_catalog("builtin").tasks if t.domain == "tv" and len(t.gold) == 1]
    assert len(rows) == 2 * len(single) and all(r.n_gold == 1 and r.success for r in rows)
    for r in rows:  # each study asked in its own phrasing; the episodes did not resume into each other
        asked = r.record["query"]
        assert (asked == templated[r.task_id]) == r.study.endswith("query_base")


def test_bad_calls_are_refused_clearly() -> None:
    result = CliRunner().invoke(cli, ["run", "--model", "oracle", "--calls", "one"])
    assert isinstance(result.exception, ToolbiasError) and "bad --calls 'one'" in str(result.exception)
    with pytest.raises(ToolbiasError, match="no task of catalog 'builtin' has 9 gold call"):
        from toolbias.study.runner import build_study

        build_study(study_config(model="oracle", calls=(9,)))
