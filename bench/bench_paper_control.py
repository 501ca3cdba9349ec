"""How far toolbias's strict control is from the schema-bias artifact's hard control today
(issue 25 item 1b, not yet reproduced): every gold call of the shared query sample, plus the same
call perturbed the ways models err, through the artifact's ``SimEnv`` (hard control, native
variant) and through toolbias's native codec (strict); prints how often the two agree on whether
the call executes, per perturbation.

    PYTHONPATH=src python bench/bench_paper_control.py

Needs ../shared/reference/ToolSchemaSpace and ../shared/data/toolschemaspace (prints why not).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT.parent / "shared" / "reference" / "ToolSchemaSpace"
DATA = ROOT.parent / "shared" / "data" / "toolschemaspace"


def perturbations(args: dict) -> dict[str, dict]:
    out = {"gold": dict(args)}
    out["case"] = {k: v.swapcase() if isinstance(v, str) else v for k, v in args.items()}
    out["numtext"] = {k: str(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v
                      for k, v in args.items()}
    out["extras"] = {**args, "note": None, "tag": ""}
    if args:
        out["missing"] = dict(list(args.items())[1:])
    return out


def main() -> None:
    if not (REFERENCE / "eval" / "run_agentic.py").exists() or not (DATA / "queries.sample.jsonl").exists():
        print(f"needs {REFERENCE} and {DATA}; not present")
        return
    os.environ["SCHEMA_VARIANT"] = "5"  # NATIVE_K (K=10): the native variant
    os.environ["SYN_QUERIES"] = str(DATA / "queries.sample.jsonl")
    sys.path.insert(0, str(REFERENCE))
    ra = importlib.import_module("eval.run_agentic")
    simenv = importlib.import_module("toolschema.simenv")

    from toolbias import Call, load_catalog
    from toolbias.variants import build_codec, get_variant

    codec = build_codec(load_catalog(f"toolschemaspace:{DATA}"), get_variant("native"))
    rows = [json.loads(line) for line in (DATA / "queries.sample.jsonl").read_text().splitlines() if line.strip()]
    agree: Counter[str] = Counter()
    total: Counter[str] = Counter()
    only_artifact: Counter[str] = Counter()
    for q in rows:
        _, cmap = ra.VARIANT[q["domain"]]
        for g in q["gold_calls"]:
            for how, args in perturbations(g.get("arguments", {})).items():
                env = simenv.SimEnv(cmap, control="hard")
                env.call(g["name"], args)
                artifact_ran = bool(env.native_actions)
                decoded = codec.session(q["domain"], "strict").decode(Call(g["name"], args))
                toolbias_ran = decoded.outcome.value == "native"
                total[how] += 1
                agree[how] += artifact_ran is toolbias_ran
                only_artifact[how] += artifact_ran and not toolbias_ran
    print(f"{len(rows)} queries; native variant; artifact hard control vs toolbias strict control")
    print(f"{'calls':<9}{'n':>6}{'agree':>8}{'artifact only':>15}")
    for how in total:
        print(f"{how:<9}{total[how]:>6}{agree[how] / total[how]:>8.1%}{only_artifact[how]:>15}")


if __name__ == "__main__":
    main()
