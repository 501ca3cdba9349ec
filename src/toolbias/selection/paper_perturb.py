"""Metadata perturbations as the authors ran them (PROTOCOL.md 3): under ``--paper`` a condition replays
the authors' per-run files instead of this project's seeded variants.

==========================  ===========================================  ===================================
condition                   run r (1-based) uses                         clusters
==========================  ===========================================  ===================================
``random_names``            ``tool_to_id_<r>.json``                      all
``shuffled_names``          ``tool_to_shuffled_tool_<r>.json``           all
``random_names_top``        ``tool_to_id_prom_<r>.json`` (five fixed     all (six clusters touched)
                            tools, not the model's own top tool)
``desc_param_scramble``     description + parameter + blurb scramble     all
``desc_scramble``           description + blurb scramble                 all
``param_desc_scramble``     parameter scramble                           all
``targeted_desc_scramble``  the keys of ``desc_swap_1.json`` scrambled   6, 8, 9, 10
``desc_swap``               the pairs of ``desc_swap_1.json`` swapped    6, 8, 9, 10
``full_scramble``           ``tool_to_id_<r>.json`` + every scramble     all
``all_but_one``             ``tool_to_id_abo_1.json`` (every run)        all
==========================  ===========================================  ===================================

Only ``desc_swap_1.json`` and ``tool_to_id_abo_1.json`` exist, so every run of those conditions
uses them (the authors' runs 2-3 of Targ. Desc. and Swap. Desc. used files that are not shipped).
Scrambled blurbs are written with the authors' spacing (``1.tool: R20``, spaced ``1.tool:  R20``:
mark ``paper_spacing``), and a renamed tool whose function name was cut at 64 characters keeps
the cut API part (:func:`keep_cut`), as the authors' rename of the rendered prompt did. The
records' condition is ``<condition>[paper]``, so toolbias's own seeded variants keep their names.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import ToolbiasError
from .perturb import mark, rename, swap_descriptions, tool_label
from .toolbench import NAME_LIMIT, api_of, standardize
from .types import Benchmark, SelectionTool, validate_benchmark

EXPERIMENTS = "experiments"
PAPER_SUFFIX = "[paper]"
DESC_CLUSTERS = ("6", "8", "9", "10")
#: what each scramble marks (:mod:`.scramble`), as :mod:`.perturb`'s conditions mark them
DESC_PARAMS, DESC, PARAMS = ("desc", "blurb", "params"), ("desc", "blurb"), ("params",)
SPACED = ("desc", "blurb_spaced", "params")


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ToolbiasError(f"cannot read the authors' file: {exc}", where=str(path)) from None


def _load_mapping(path: Path) -> dict[str, str]:
    data = _load_json(path)
    if not isinstance(data, dict):
        raise ToolbiasError("expected a JSON object mapping tool names to names", where=str(path))
    return {str(k).strip(): str(v).strip() for k, v in data.items()}


def _lookup(mapping: Mapping[str, str], t: SelectionTool) -> str | None:
    return mapping.get(tool_label(t)) or mapping.get(t.name)


@dataclass(frozen=True)
class Plan:
    """How one condition was run: a kind, a file per run (``{r}``: the 1-based run), the clusters."""

    kind: str
    files: str = ""
    clusters: tuple[str, ...] = ()
    marks: tuple[str, ...] = ()


PLANS: dict[str, Plan] = {
    "random_names": Plan("names", "tool_to_id_{r}.json"),
    "shuffled_names": Plan("names", "tool_to_shuffled_tool_{r}.json"),
    "random_names_top": Plan("names", "tool_to_id_prom_{r}.json"),
    "desc_param_scramble": Plan("scramble", marks=DESC_PARAMS),
    "desc_scramble": Plan("scramble", marks=DESC),
    "param_desc_scramble": Plan("scramble", marks=PARAMS),
    "targeted_desc_scramble": Plan("scramble_named", "desc_swap_1.json", DESC_CLUSTERS, DESC),
    "desc_swap": Plan("desc_swap", "desc_swap_1.json", DESC_CLUSTERS),
    "full_scramble": Plan("names_scramble", "tool_to_id_{r}.json", marks=SPACED),
    "all_but_one": Plan("all_but_one", "tool_to_id_abo_1.json", marks=SPACED),
}


def paper_label(condition: str) -> str:
    return f"{condition}{PAPER_SUFFIX}"


def experiments_dir(bench: Benchmark, given: str | Path | None = None) -> Path:
    """The authors' mapping files: ``given``, else ``experiments/`` beside the imported BiasBusters files."""
    if given:
        return Path(given)
    m = re.search(r"imported from (.+)$", bench.description or "")
    if bench.name.startswith("biasbusters") and m:
        return Path(m.group(1).strip()) / EXPERIMENTS
    raise ToolbiasError("the authors' perturbation files belong to the BiasBusters benchmark",
                        where=f"benchmark '{bench.name}'",
                        fix="use --benchmark biasbusters:DIR, or leave out --paper for toolbias's seeded variants")


def keep_cut(original: SelectionTool, renamed: SelectionTool) -> SelectionTool:
    """A renamed tool whose original function name was cut at 64 characters: the cut name with its
    ``_for_<tool>`` part replaced (the authors renamed the rendered text), not a new cut. A long new tool
    name makes it longer than 64 characters, as in the authors' prompts (their perturbation runs were text
    mode; a function-calling server may refuse such a name)."""
    before, after = api_of(original), api_of(renamed)
    full = f"{standardize(before.api_name)}_for_{before.standard_tool_name}"
    if len(full) <= NAME_LIMIT or "toolbench" not in renamed.metadata:
        return renamed
    old, new = f"_for_{before.standard_tool_name}", f"_for_{after.standard_tool_name}"
    cut = before.function_name
    name = cut.replace(old, new) if old in cut else cut.rsplit("_for_", 1)[0] + new
    api = replace(after, name_override=name)
    return replace(renamed, name=name, metadata={**renamed.metadata, "toolbench": api.to_dict()})


def _rename_kept(t: SelectionTool, new: str) -> SelectionTool:
    return keep_cut(t, rename(t, new))


def _map(bench: Benchmark, mapping: Mapping[str, str], marks: Sequence[str] = (), *, held_out: bool = False,
         ) -> Benchmark:
    clusters = []
    for c in bench.clusters:
        tools = []
        for t in c.tools:
            new = _lookup(mapping, t)
            if held_out and new is not None and new == tool_label(t):
                tools.append(t)         # all-but-one: a tool mapped to itself keeps everything
                continue
            out = _rename_kept(t, new) if new else t
            tools.append(mark(out, [*marks, "paper_spacing"]) if marks else out)
        clusters.append(c.with_tools(tools))
    out_bench = bench.with_clusters(clusters)
    for c in out_bench.clusters:  # names may pass 64 characters, as the authors' kept cuts did (text mode)
        if len(set(c.names)) != len(c.names):
            validate_benchmark(out_bench)   # the clear error about duplicate names
    return out_bench


def _file(root: Path, pattern: str, run: int) -> Path:
    path = root / pattern.format(r=run + 1)
    if not path.is_file():
        raise ToolbiasError(f"the authors' file for run {run + 1} is not there", where=str(path),
                            fix="the authors shipped 3 runs of the name mappings: use --runs 3 or fewer")
    return path


def paper_runs(bench: Benchmark, condition: str, runs: int, *, experiments: str | Path | None = None,
               ) -> list[tuple[int, Benchmark]]:
    """(run index, the benchmark as shown in that run) for each of ``runs`` runs of a condition."""
    plan = PLANS.get(condition)
    if plan is None:
        raise ToolbiasError(f"'{condition}' is not one of the authors' perturbations",
                            fix=f"use one of: {', '.join(PLANS)}")
    if plan.clusters:
        keep = [c for c in bench.clusters if c.id in plan.clusters]
        if not keep:
            raise ToolbiasError(f"the authors ran '{condition}' on clusters {', '.join(plan.clusters)} only",
                                where=f"benchmark '{bench.name}'", fix="include some of them in --clusters")
        bench = bench.with_clusters(keep)
    root = experiments_dir(bench, experiments) if plan.files else None
    out = []
    for run in range(runs):
        if plan.kind == "scramble":
            b = bench.with_clusters([c.with_tools([mark(t, [*plan.marks, "paper_spacing"]) for t in c.tools])
                                     for c in bench.clusters])
        elif plan.kind in ("names", "names_scramble"):
            assert root is not None
            b = _map(bench, _load_mapping(_file(root, plan.files, run)), plan.marks)
        elif plan.kind == "all_but_one":
            assert root is not None
            b = _map(bench, _load_mapping(_file(root, plan.files, run)), plan.marks, held_out=True)
        elif plan.kind == "desc_swap":
            assert root is not None
            b = swap_descriptions(bench, _load_mapping(_file(root, plan.files, run)))
        else:  # scramble_named: the keys of the file
            assert root is not None
            wanted = set(_load_json(_file(root, plan.files, run)))
            b = bench.with_clusters([c.with_tools([mark(t, [*plan.marks, "paper_spacing"])
                                                   if tool_label(t) in wanted else t for t in c.tools])
                                     for c in bench.clusters])
        out.append((run, b))
    return out


__all__ = ["PLANS", "keep_cut", "paper_label", "paper_runs"]
