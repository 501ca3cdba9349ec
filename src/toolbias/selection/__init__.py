"""Tool-selection bias (BiasBusters): benchmark, runner, metrics, explanation, mitigation, figures.

Typical use::

    from toolbias.selection import load_benchmark, run_selection, report_of, SelectionStore
    bench = load_benchmark("builtin")                  # or "biasbusters:DIR"
    records, summary = run_selection(model, bench, runs=3, presentation="tools",
                                     store=SelectionStore("study.db"))
    report = report_of(records)                        # delta_api, delta_pos, delta_model, std, per_cluster

Modules: :mod:`.benchmark` (clusters, rotations, the built-in benchmark), :mod:`.importers`
(BiasBusters files), :mod:`.runner` (presentations, resumable runs), :mod:`.parse` (exact
parsing), :mod:`.metrics` (TV metrics, record format, cross-model agreement),
:mod:`.features` and :mod:`.embed` (explanation), :mod:`.perturb` (metadata perturbations),
:mod:`.mitigate` (filter-then-uniform, filter quality), :mod:`.study` (the API the CLI calls),
:mod:`.present` and :mod:`.toolbench` (presentations, the paper's prompt), :mod:`.paper_stats` and
:mod:`.paper_features` (the paper's numbers), :mod:`.selector` (``chooser:RULE``),
:mod:`.store` (SQLite tables), :mod:`.report` (store -> reports and the HTML report's sections:
``html_fragments(store_path)``).
"""

from __future__ import annotations

from .benchmark import Benchmark, Cluster, SelectionTool, builtin_benchmark, load_benchmark, rotations
from .importers import load_biasbusters, load_biasbusters_filter_set
from .metrics import Agreement, BiasReport, Selection, agreement, bias_report, read_records, tv_from_uniform
from .mitigate import (
    FilterExample,
    FilterScores,
    MitigationRunner,
    aevaluate_filter,
    arun_mitigation,
    builtin_filter_set,
    parse_subset,
    score_filter,
)
from .parse import Parsed, parse_output, parse_text
from .perturb import CONDITIONS, PerturbationEffect, apply_condition, perturbation_effects
from .records import SelectionRecord, Status
from .results import store_reports
from .runner import (
    PRESENTATIONS,
    RunSummary,
    SelectionRunner,
    arun_selection,
    build_request,
    plan_trials,
    report_of,
    run_selection,
)
from .store import SelectionStore

__all__ = [
    "CONDITIONS", "PRESENTATIONS", "Agreement", "Benchmark", "BiasReport", "Cluster", "FilterExample",
    "FilterScores", "MitigationRunner", "Parsed", "PerturbationEffect", "RunSummary", "Selection",
    "SelectionRecord", "SelectionRunner", "SelectionStore", "SelectionTool", "Status", "aevaluate_filter",
    "agreement", "apply_condition", "arun_mitigation", "arun_selection", "bias_report", "build_request",
    "builtin_benchmark", "builtin_filter_set", "load_benchmark", "load_biasbusters", "load_biasbusters_filter_set",
    "parse_output", "parse_subset", "parse_text", "perturbation_effects", "plan_trials", "read_records",
    "report_of", "rotations", "run_selection", "score_filter", "store_reports", "tv_from_uniform",
]
