"""How ``release_store.db`` was made: with the toolbias release before the shared store layer
(commit in ``release_store.json``), from a checkout of that commit::

    PYTHONPATH=OLD/src:OLD/tests python tests/store/data/make_release_store.py OUTDIR [COMMIT]

It writes a small results file in the previous layout (no ``user_version``, meta schema
version "1", selection tables created by the old selection store) holding: oracle and
scripted-model episodes on three registered variants and one variant given as a spec file,
compliance probes, tool-selection records (tools and text presentations, two runs, a
mitigated run) and filter-evaluation answers; and what the release printed for it
(``report --json`` and ``select metrics --json``), which the new code must reproduce after
migrating the file (tests/store/test_store_migration.py).
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner


def main(out: Path) -> None:
    from test_selection_support import ChooserModel, always_first

    from toolbias.cli import cli
    from toolbias.selection import SelectionStore, builtin_benchmark, run_selection
    from toolbias.selection.mitigate import aevaluate_filter, arun_mitigation, builtin_filter_set

    out.mkdir(parents=True, exist_ok=True)
    db = out / "release_store.db"
    db.unlink(missing_ok=True)
    spec = out / "my_merge.json"
    spec.write_text(json.dumps({"name": "my_merge", "steps": [{"op": "merge"}],
                                "description": "a merge given as a spec file"}))
    script = out / "lazy.json"  # answers without calling anything: under-execution failures
    script.write_text(json.dumps({"default": [{"content": "I cannot do that."}]}))

    def invoke(*args: str) -> str:
        result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return result.stdout

    invoke("run", "--model", "oracle", "--variants", f"native,strip_descriptions,fully_merged,{spec}", "--tasks", "3",
           "--store", str(db), "--workers", "1")
    invoke("run", "--model", f"scripted:{script}", "--variants", "native,fully_merged", "--tasks", "3",
           "--store", str(db), "--workers", "1")
    invoke("probe", "--model", "oracle", "--variants", "native,fully_merged", "--n", "2", "--store", str(db))

    import asyncio

    bench = builtin_benchmark().limit_queries(2).select_clusters(["forward_geocoding"])
    with SelectionStore(db) as st:
        run_selection(ChooserModel(always_first), bench, runs=2, store=st)
        run_selection(ChooserModel(always_first), bench, presentation="text", store=st)
        keep = ChooserModel(always_first, keep=lambda n: "geo" in n)
        asyncio.run(arun_mitigation(keep, bench, store=st))
        examples = builtin_filter_set(bench, per_cluster=2)
        asyncio.run(aevaluate_filter(keep, examples, store=st))
    con = sqlite3.connect(db)  # small pages: a small file (the layout is unchanged)
    con.execute("PRAGMA journal_mode=DELETE")
    con.execute("PRAGMA page_size=1024")
    con.execute("VACUUM")
    con.execute("PRAGMA journal_mode=WAL")
    con.close()
    report = json.loads(invoke("report", "--store", str(db), "--json", "--resamples", "200", "--repeats", "20"))
    metrics = json.loads(invoke("select", "metrics", "--store", str(db), "--json"))
    rev = sys.argv[2] if len(sys.argv) > 2 else subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True,
                                                                  text=True).stdout.strip()
    (out / "release_store.json").write_text(json.dumps(
        {"commit": rev, "report_args": ["--resamples", "200", "--repeats", "20"], "report": report,
         "select_metrics": metrics}, indent=1, sort_keys=True) + "\n")
    spec.unlink()
    script.unlink()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
