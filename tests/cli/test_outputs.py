"""Output paths are checked before any work (issue 24, items 2 and 9): no output overwrites a store
or an input file, a folder where a file goes (or the reverse) and a missing folder are refused with
exit 2 and a what/fix message, and ``--store :memory:`` is refused where the results should last.
Each case runs the real command line in process on a real SQLite store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolbias.cli import main

SQLITE = b"SQLite format 3\x00"


def _cli(args: list[str]) -> int:
    with pytest.raises(SystemExit) as exc:
        main(args)
    return int(exc.value.code or 0)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("store") / "study.db"
    main(["run", "--model", "oracle", "--catalog", "builtin", "--variants", "native", "--tasks", "2",
          "--store", str(path)])
    assert path.read_bytes().startswith(SQLITE)
    return path


def _refused(args: list[str], capsys: pytest.CaptureFixture[str], *words: str) -> str:
    assert _cli(args) == 2
    err = capsys.readouterr().err
    assert "error:" in err and "fix:" in err and "Traceback" not in err
    for w in words:
        assert w in err
    return err


@pytest.mark.parametrize("cmd", ["report", "run"])
def test_html_onto_the_store_is_refused_and_the_store_survives(store: Path, cmd: str,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    before = store.read_bytes()
    args = ["report", "--store", str(store)] if cmd == "report" else [
        "run", "--model", "oracle", "--catalog", "builtin", "--variants", "native", "--tasks", "2",
        "--store", str(store)]
    _refused([*args, "--html", str(store)], capsys, "--html", "input")
    assert store.read_bytes() == before


def test_an_output_onto_another_store_is_refused(store: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "other.db"
    other.write_bytes(store.read_bytes())
    _refused(["report", "--store", str(store), "--csv", str(other)], capsys, "store")
    _refused(["export", "--store", str(store), "-o", str(other)], capsys, "store")
    assert other.read_bytes() == store.read_bytes()


def test_html_into_a_folder_or_a_missing_folder_is_refused(store: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    _refused(["report", "--store", str(store), "--html", str(tmp_path)], capsys, "folder")
    _refused(["report", "--store", str(store), "--html", str(tmp_path / "no" / "r.html")], capsys,
             "does not exist", "mkdir")


def test_figures_onto_a_file_is_refused_before_the_report(store: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "figs.txt"
    f.write_text("keep me")
    html = tmp_path / "r.html"
    _refused(["report", "--store", str(store), "--figures", str(f), "--html", str(html)], capsys, "--figures")
    assert f.read_text() == "keep me" and not html.exists()  # refused before anything was written


def test_recommend_export_onto_a_file_is_refused_before_any_episode(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "chosen.json"
    f.write_text("{}")
    st = tmp_path / "rec.db"
    _refused(["recommend", "--model", "oracle", "--sample", "4", "--store", str(st), "--export", str(f)],
             capsys, "--export")
    assert not st.exists()


@pytest.mark.parametrize("where", ["dir", "missing"])
def test_select_build_output_is_checked_before_any_model_call(tmp_path: Path, where: str,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([{"type": "function", "function": {"name": "f", "parameters": {}}}]))
    out = tmp_path if where == "dir" else tmp_path / "missing" / "x.json"
    # the model's endpoint does not exist: a check made after the work would fail on the model instead
    _refused(["select", "build", "--tools", str(tools), "--model", "openai:none",
              "--base-url", "http://127.0.0.1:9/v1", "-o", str(out)], capsys, "--output")


def test_select_build_refuses_to_overwrite_its_tools_file(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text("[]")
    _refused(["select", "build", "--tools", str(tools), "--model", "openai:none", "-o", str(tools)],
             capsys, "input")
    assert tools.read_text() == "[]"


@pytest.mark.parametrize("args", [
    ["run", "--model", "oracle", "--variants", "native", "--tasks", "1"],
    ["select", "run", "--model", "oracle"],
])
def test_an_in_memory_store_is_refused_where_results_should_last(args: list[str],
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    _refused([*args, "--store", ":memory:"], capsys, "in-memory")


def test_merge_refuses_an_in_memory_output(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _refused(["merge", str(store), "-o", ":memory:"], capsys, "in-memory")


def test_a_fresh_output_path_is_still_written(store: Path, tmp_path: Path) -> None:
    html, csv = tmp_path / "r.html", tmp_path / "new.csv"
    main(["report", "--store", str(store), "--html", str(html), "--csv", str(csv), "--resamples", "200"])
    assert html.read_text().startswith("<!doctype html>") and csv.stat().st_size > 0
    main(["report", "--store", str(store), "--html", str(html), "--resamples", "200"])  # rewriting its own output
    assert html.read_text().startswith("<!doctype html>")


def test_shape_output_is_checked_before_the_variant_is_built(store: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    before = store.read_bytes()
    _refused(["shape", "--variant", "native", "-o", str(store)], capsys, "--output", "store")
    assert store.read_bytes() == before
    _refused(["shape", "--variant", "native", "-o", str(tmp_path / "missing" / "tools.json")], capsys,
             "does not exist")
    main(["shape", "--variant", "native", "--format", "anthropic", "-o", str(tmp_path / "tools.json")])
    assert json.loads((tmp_path / "tools.json").read_text())
