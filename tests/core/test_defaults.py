"""Run policy as an API: the study a set of options describes, the same from a script and
from ``toolbias run``; errors as data under ``--json``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from toolbias.cli import cli, main
from toolbias.codec import Control
from toolbias.defaults import EMBEDDED_DEFAULT_JOB, MAX_TOKENS, TURN_LIMIT, parse_shard, study_config
from toolbias.episode import Condition
from toolbias.errors import CatalogError, ToolbiasError
from toolbias.store import Store


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
