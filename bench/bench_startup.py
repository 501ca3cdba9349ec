"""Start-up of the command line: wall seconds of ``toolbias --help`` and ``toolbias run --help``
(median, min, max of fresh processes) and the modules each loads.

    python -m bench.bench_startup [--runs N]

Goal (issue 20): at most 0.25 s each on the 2-core machines (0.70 s for ``--help`` before the
commands became lazy), ``import toolbias.cli`` at most 40 toolbias modules and no matplotlib,
selection or training. A loaded machine stretches the times; the module counts do not vary.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

_PROBE = """
import json, sys
import toolbias.cli
argv = {argv!r}
if argv:
    try:
        toolbias.cli.main(argv)
    except SystemExit:
        pass
mods = [m for m in sys.modules if m == "toolbias" or m.startswith("toolbias.")]
print(json.dumps({{"toolbias": len(mods), "modules": len(sys.modules), "matplotlib": "matplotlib" in sys.modules,
                  "selection": any(m.startswith("toolbias.selection") for m in mods),
                  "training": any(m.startswith("toolbias.training") for m in mods)}}))
"""


def _wall(cmd: list[str], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        out.append(time.perf_counter() - started)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=9)
    args = ap.parse_args()
    cases = {"import toolbias.cli": [], "toolbias --help": ["--help"], "toolbias run --help": ["run", "--help"]}
    for label, argv in cases.items():
        probe = subprocess.run([sys.executable, "-c", _PROBE.format(argv=argv)], capture_output=True, text=True,
                               check=True)
        loaded = json.loads(probe.stdout.strip().splitlines()[-1])
        cmd = [sys.executable, "-c", "import toolbias.cli"] if not argv else \
            [sys.executable, "-m", "toolbias", *argv]
        times = _wall(cmd, args.runs)
        print(f"{label:22s} median {statistics.median(times):.3f} s  (min {min(times):.3f}, max {max(times):.3f}; "
              f"{args.runs} runs)  toolbias modules {loaded['toolbias']}, all modules {loaded['modules']}, "
              f"matplotlib {loaded['matplotlib']}, selection {loaded['selection']}, training {loaded['training']}")


if __name__ == "__main__":
    main()
