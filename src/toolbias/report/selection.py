"""Tool-selection results in the report: figures (matplotlib, Agg backend) and HTML sections.

- :func:`selection_rates_figure`: per cluster, selection rate of each tool (canonical order)
  and of each list position, with the uniform rate 1/k dashed;
- :func:`tv_by_model_figure`: delta_api, delta_pos, delta_model per model (or per condition,
  e.g. before/after mitigation), error bars = population std over runs;
- :func:`perturbation_figure`: TV to the base distribution and to uniform per condition;
- :func:`save`: PNG or SVG by the file suffix;
- :func:`sections`: self-contained HTML sections (escaped text, images embedded as base64 PNG);
- :func:`html_fragments`: the sections for the selection results of a store file (the HTML
  report's hook, :func:`toolbias.report.html.selection_fragments`); it never writes to the file.
"""

from __future__ import annotations

import html
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ToolbiasError
from ..selection.metrics import METRICS, BiasReport
from ..selection.perturb import perturbation_effects
from ..selection.records import GroupKey
from ..selection.results import (
    BASE,
    MITIGATED,
    MITIGATED_CONDITIONS,
    agreements,
    filter_scores_from,
    reports_from,
)
from ..selection.store import SelectionStore
from .figures import png_base64

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from .features import Explanation
    from .metrics import Agreement
    from .mitigate import FilterScores
    from .perturb import PerturbationEffect
    from .types import Benchmark

COLORS = {"api": "#4C72B0", "pos": "#DD8452", "model": "#55A868", "base": "#8172B3", "uniform": "#C44E52"}


def _figure(width: float, height: float) -> Figure:
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100)


def _finish(fig: Figure, rect: tuple[float, float, float, float] = (0, 0, 1, 1)) -> Figure:
    """Lay the figure out once it is complete (tight layout; constrained layout is much slower)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fig.tight_layout(rect=rect)
    return fig


def save(fig: Figure, path: str | Path) -> Path:
    p = Path(path)
    fmt = p.suffix.lower().lstrip(".")
    if fmt not in ("png", "svg"):
        raise ToolbiasError(f"unsupported figure format '{p.suffix}'", where=str(p), fix="use .png or .svg")
    p.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(p, format=fmt)
    return p


def selection_rates_figure(report: BiasReport, bench: Benchmark | None = None, *, title: str = "",
                           max_clusters: int | None = None) -> Figure:
    clusters = list(report.per_cluster)[:max_clusters]
    n = len(clusters)
    cols = min(4, n)
    rows = math.ceil(n / cols)
    fig = _figure(3.6 * cols, 3.1 * rows)
    axes = fig.subplots(rows, cols, squeeze=False)
    names: dict[str, Sequence[str]] = {}
    if bench is not None:
        names = {c.id: c.names for c in bench.clusters}
    for ax, cid in zip(axes.flat, clusters, strict=False):
        v = report.per_cluster[cid]
        k = int(v["k"])
        xs = list(range(k))
        w = 0.4
        ax.bar([x - w / 2 for x in xs], v["api_rates"], w, label="by tool", color=COLORS["api"])
        ax.bar([x + w / 2 for x in xs], v["pos_rates"], w, label="by position", color=COLORS["pos"])
        ax.axhline(1 / k, ls="--", lw=1, color=COLORS["uniform"], label="uniform")
        ax.set_title(f"{cid}  (δapi {v['delta_api']:.2f}, δpos {v['delta_pos']:.2f})", fontsize=8)
        ax.set_ylim(0, 1)
        ax.set_xticks(xs)
        labels = names.get(cid)
        if labels and len(labels) == k:
            ax.set_xticklabels([f"{i}:{s[:14]}" for i, s in enumerate(labels)], rotation=35, ha="right",
                               fontsize=6)
        else:
            ax.set_xticklabels([str(x) for x in xs], fontsize=7)
        ax.tick_params(axis="y", labelsize=7)
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    axes.flat[0].legend(fontsize=6, loc="upper right")
    fig.suptitle(title or f"selection rates by tool (x: canonical index) and by list position{_label(report)}",
                 fontsize=9)
    return _finish(fig, (0, 0, 1, 0.97))


def _label(report: BiasReport) -> str:
    return f" - {report.label}" if report.label else ""


def tv_by_model_figure(reports: Mapping[str, BiasReport], *, title: str = "TV distance from uniform") -> Figure:
    if not reports:
        raise ToolbiasError("no reports to plot")
    labels = list(reports)
    fig = _figure(max(4.0, 1.3 * len(labels) + 2), 3.2)
    ax = fig.subplots()
    w = 0.26
    for j, (m, color) in enumerate(zip(METRICS, (COLORS["api"], COLORS["pos"], COLORS["model"]), strict=True)):
        xs = [i + (j - 1) * w for i in range(len(labels))]
        ax.bar(xs, [getattr(reports[lb], m) for lb in labels], w, yerr=[reports[lb].std[m] for lb in labels],
               capsize=2, color=color, label=m.replace("delta_", "δ "))
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels([lb[:40] for lb in labels], rotation=20, ha="right", fontsize=7)
    ax.set_ylim(0, 1)
    ax.set_ylabel("TV distance")
    ax.legend(fontsize=7)
    ax.set_title(title, fontsize=9)
    return _finish(fig)


def perturbation_figure(effects: Sequence[PerturbationEffect], base: BiasReport | None = None, *,
                        title: str = "metadata perturbations") -> Figure:
    if not effects:
        raise ToolbiasError("no perturbation effects to plot")
    labels = [e.condition for e in effects]
    fig = _figure(max(4.0, 0.9 * len(labels) + 2), 3.4)
    ax = fig.subplots()
    w = 0.38
    xs = list(range(len(labels)))
    ax.bar([x - w / 2 for x in xs], [e.tv_to_base for e in effects], w, color=COLORS["base"], label="TV to base")
    ax.bar([x + w / 2 for x in xs], [e.tv_to_uniform for e in effects], w, color=COLORS["api"],
           label="TV to uniform (δ api)")
    if base is not None:
        ax.axhline(base.delta_api, ls="--", lw=1, color=COLORS["uniform"], label=f"base δ api {base.delta_api:.2f}")
    ax.set_xticks(xs)
    ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=7)
    ax.set_ylim(0, 1)
    ax.legend(fontsize=7)
    ax.set_title(title, fontsize=9)
    return _finish(fig)


# --- HTML ---------------------------------------------------------------------------------------------------


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _fmt(x: Any) -> str:
    if isinstance(x, float):
        return "n/a" if math.isnan(x) else f"{x:.3f}"
    return _e(x)


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_fmt(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table class=\"selection\"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _img(fig: Figure, alt: str) -> str:
    return f"<img alt=\"{_e(alt)}\" src=\"data:image/png;base64,{png_base64(fig)}\"/>"


def sections(*, reports: Mapping[str, BiasReport] | None = None, bench: Benchmark | None = None,
                   effects: Sequence[PerturbationEffect] | None = None, base: BiasReport | None = None,
                   agreement: Agreement | None = None, filter_scores: FilterScores | None = None,
                   mitigation: Mapping[str, BiasReport] | None = None,
                   explanation: Explanation | None = None) -> list[str]:
    """HTML ``<section>`` strings for whatever is given; text is escaped, images are inline PNG."""
    out = []
    if reports:
        def ci(r: BiasReport, m: str) -> str:
            iv = (r.extra.get("intervals") or {}).get(m) or {}
            return "n/a" if iv.get("low") is None else f"[{iv['low']:.3f}, {iv['high']:.3f}]"

        rows = [[name, r.delta_api, r.std["delta_api"], ci(r, "delta_api"), r.delta_pos, r.std["delta_pos"],
                 ci(r, "delta_pos"), r.delta_model, r.std["delta_model"], ci(r, "delta_model"), r.n_selections,
                 r.n_unparsed, r.n_runs] for name, r in reports.items()]
        parts = ["<section class=\"selection-bias\"><h2>Tool-selection bias</h2>",
                 "<p>TV distance of the selection distribution from uniform, over tools (δ api) and list "
                 "positions (δ pos); mean over runs of the cluster mean, ± population std over runs, and a 95% "
                 "bootstrap interval over queries. Unparsed answers are excluded from the rates.</p>",
                 _table(["model", "δ api", "std", "95% CI", "δ pos", "std", "95% CI", "δ model", "std", "95% CI",
                         "selections", "unparsed", "runs"], rows),
                 _img(tv_by_model_figure(reports), "TV distance per model")]
        for name, r in reports.items():
            crows = [[c, v["k"], v["n"], v["delta_api"], v["delta_pos"], v["delta_model"],
                      " ".join(f"{x:.2f}" for x in v["api_rates"]), " ".join(f"{x:.2f}" for x in v["pos_rates"])]
                     for c, v in r.per_cluster.items()]
            parts.append(f"<h3>{_e(name)}: per cluster</h3>")
            parts.append(_table(["cluster", "k", "n", "δ api", "δ pos", "δ model", "rate by tool",
                                 "rate by position"], crows))
            parts.append(_img(selection_rates_figure(r, bench, title=f"selection rates - {name}"),
                              f"selection rates {name}"))
        parts.append("</section>")
        out.append("".join(parts))
    if agreement is not None:
        rows = [[f"{a} | {b}", v, agreement.spearman[(a, b)]] for (a, b), v in agreement.pearson.items()]
        out.append("<section class=\"selection-agreement\"><h2>Cross-model agreement</h2>"
                   f"<p>Correlation of per-tool selection rates over {agreement.n_tools} tools; mean Pearson "
                   f"{_fmt(agreement.mean_pearson)}.</p>" + _table(["models", "Pearson", "Spearman"], rows)
                   + "</section>")
    if effects:
        rows = [[e.condition, e.tv_to_base, e.tv_to_uniform, e.delta_pos, e.n_selections, e.n_unparsed]
                for e in effects]
        out.append("<section class=\"selection-perturbations\"><h2>Metadata perturbations</h2>"
                   + _table(["condition", "TV to base", "TV to uniform", "δ pos", "selections", "unparsed"], rows)
                   + _img(perturbation_figure(effects, base), "perturbation effects") + "</section>")
    if explanation is not None:
        rows = [[f, explanation.correlations.get(f, {}).get("r", float("nan")),
                 explanation.linear_coefficients.get(f, float("nan")),
                 explanation.permutation_importance.get(f, {}).get("mean", float("nan"))]
                for f in explanation.features]
        absent = ", ".join(explanation.absent) or "none"
        out.append("<section class=\"selection-explain\"><h2>What explains the preferences</h2>"
                   f"<p>{explanation.n_tools} tools, cluster-mean centred; similarity: {_e(explanation.similarity)}; "
                   f"linear R² {_fmt(explanation.linear_r2)}, random forest CV R² {_fmt(explanation.forest_cv_r2)}; "
                   f"features absent: {_e(absent)}.</p>"
                   + _table(["feature", "Pearson r", "linear coef (std.)", "permutation importance"], rows)
                   + "</section>")
    if mitigation:
        rows = [[name, r.delta_api, r.delta_pos, r.delta_model, r.n_selections, r.n_unparsed]
                for name, r in mitigation.items()]
        out.append("<section class=\"selection-mitigation\"><h2>Filter-then-uniform mitigation</h2>"
                   + _table(["", "δ api", "δ pos", "δ model", "selections", "unparsed"], rows)
                   + _img(tv_by_model_figure(mitigation, title="before / after mitigation"), "mitigation")
                   + "</section>")
    if filter_scores is not None:
        rows = [["all", filter_scores.n, filter_scores.micro_precision, filter_scores.micro_recall,
                 filter_scores.exact_match, filter_scores.n_unparsed]]
        rows += [[f"K={k}", int(v["n"]), v["micro_precision"], v["micro_recall"], v["exact_match"],
                  int(v["n_unparsed"])] for k, v in filter_scores.by_k.items()]
        out.append("<section class=\"selection-filter\"><h2>Filter quality</h2>"
                   + _table(["subset", "n", "micro precision", "micro recall", "exact match", "unparsed"], rows)
                   + "</section>")
    return out


def explanation_sections(results: Mapping[str, Any]) -> list[str]:
    """HTML sections of the paper's feature regressions (``results``: model -> :class:`PaperExplanation`): the
    in-sample R² beside adjusted and cross-validated R² and the permutation baseline, each fit no better than
    chance flagged, and per-feature coefficients with 95% CIs and Holm-corrected p-values."""
    out = []
    for model, r in results.items():
        st = r.statistics or {}
        perm = st.get("permutation") or {}
        flag = ("<p class=\"chance\"><strong>No better than chance.</strong> " if st.get("chance")
                else "<p class=\"fit\">") + _e(st.get("verdict", "statistics not computed")) + "</p>"
        summary = _table(["n", "R² (in-sample, as the paper)", "adjusted R²", "CV R² linear", "CV R² forest",
                          "R² shuffled (mean)", "permutation p"],
                         [[r.n, r.r2, st.get("adjusted_r2", float("nan")), st.get("linear_cv_r2", float("nan")),
                           st.get("forest_cv_r2", float("nan")), perm.get("mean_r2", float("nan")),
                           perm.get("p_value", float("nan"))]])
        rows = []
        for f in r.features:
            c = (st.get("coefficients") or {}).get(f, {})
            ci = c.get("ci95") or (float("nan"), float("nan"))
            rows.append([f, f"{r.coefficients[f]:+.3g}", f"[{ci[0]:+.3g}, {ci[1]:+.3g}]",
                         c.get("p", float("nan")), c.get("p_holm", float("nan")),
                         r.correlations.get(f, {}).get("pearson", float("nan"))])
        out.append(f"<section class=\"selection-explain\"><h2>What explains {_e(model)}'s preferences</h2>"
                   + flag + summary
                   + _table(["feature", "coef (raw)", "95% CI", "p", "p (Holm)", "Pearson r"], rows)
                   + "</section>")
    return out


def _safe(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in text)[:120]


def write_store_figures(reports: Mapping[GroupKey, BiasReport], out: Path, fmt: str = "png", *,
                        bench: Benchmark | None = None, html_path: Path | None = None) -> list[Path]:
    """Every group's selection rates; TV per model for the base groups of each setting; perturbation effects per
    setting with a base group; optionally the HTML fragments. Returns the files written."""

    written = [save(selection_rates_figure(rep, bench, title=key.label), out / f"rates_{_safe(key.label)}.{fmt}")
               for key, rep in reports.items()]
    base_reports = {f"{k.model} ({k.presentation}, {k.settings_label})": v for k, v in reports.items()
                    if k.condition == "base"}
    if base_reports:
        written.append(save(tv_by_model_figure(base_reports), out / f"tv_by_model.{fmt}"))
    by_setting: dict[GroupKey, dict[str, BiasReport]] = {}
    for key, rep in reports.items():
        by_setting.setdefault(replace(key, condition=""), {})[key.condition] = rep
    all_effects = []
    for setting, conds in by_setting.items():
        if "base" in conds and len(conds) > 1:
            effects = perturbation_effects(conds["base"], {c: r for c, r in conds.items() if c != "base"})
            all_effects.append((conds["base"], effects))
            written.append(save(perturbation_figure(effects, conds["base"], title=setting.label),
                                out / f"perturbations_{_safe(setting.label)}.{fmt}"))
    written += _sweep_figures(reports, out, fmt)
    if html_path is not None:
        frags = sections(reports=base_reports or {k.label: v for k, v in reports.items()}, bench=bench)
        for base, effects in all_effects:
            frags += sections(effects=effects, base=base)
        html_path.write_text("\n".join(frags), encoding="utf-8")
        written.append(html_path)
    return written


def sweep_figure(points: Sequence[Mapping[str, Any]], *, xlabel: str, title: str = "",
                 keys: Sequence[str] = ("delta_model",)) -> Figure:
    """δ against a swept setting (x labels in order), error bars = the points' ``std_<key>`` when given."""
    if not points:
        raise ToolbiasError("no sweep points to plot")
    fig = _figure(max(4.0, 0.8 * len(points) + 2), 3.2)
    ax = fig.subplots()
    xs = list(range(len(points)))
    colors = {"delta_api": COLORS["api"], "delta_pos": COLORS["pos"], "delta_model": COLORS["model"]}
    for key in keys:
        ys = [float(p[key]) for p in points]
        err = [float(p.get(f"std_{key}", float("nan"))) for p in points]
        ax.errorbar(xs, ys, yerr=[0 if math.isnan(e) else e for e in err], marker="o", capsize=3,
                    color=colors.get(key), label=key.replace("delta_", "δ "))
    ax.set_xticks(xs)
    ax.set_xticklabels([str(p["x"]) for p in points], fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("TV distance")
    ax.legend(fontsize=7)
    ax.set_title(title or f"bias by {xlabel}", fontsize=9)
    return _finish(fig)


def k_sweep_figure(curves: Mapping[str, Mapping[int, Mapping[str, float]]], *, key: str = "api",
                   title: str = "") -> Figure:
    """δ in % of its maximum against K, one line per order (mean ± std over runs)."""
    fig = _figure(4.6, 3.2)
    ax = fig.subplots()
    for order, by_k in curves.items():
        ks = sorted(by_k)
        ax.errorbar(ks, [by_k[k][key] for k in ks], yerr=[0 if math.isnan(by_k[k][f"{key}_std"]) else
                                                           by_k[k][f"{key}_std"] for k in ks],
                    marker="o", capsize=3, label=order)
    ax.set_xlabel("K (tools shown)")
    ax.set_ylabel(f"δ {key} (% of max)")
    ax.legend(fontsize=7)
    ax.set_title(title or f"δ {key} against K", fontsize=9)
    return _finish(fig)


def correlation_heatmap(result: Agreement, *, title: str = "model agreement (Pearson r of per-tool rates)") -> Figure:
    models = list(result.models)
    n = len(models)
    fig = _figure(1.0 + 0.75 * n, 0.8 + 0.7 * n)
    ax = fig.subplots()
    grid = [[1.0 if i == j else float("nan") for j in range(n)] for i in range(n)]
    for (a, b), r in result.pearson.items():
        i, j = models.index(a), models.index(b)
        grid[i][j] = grid[j][i] = r
    im = ax.imshow(grid, vmin=-1, vmax=1, cmap="RdBu_r")
    for i in range(n):
        for j in range(n):
            if not math.isnan(grid[i][j]):
                ax.text(j, i, f"{grid[i][j]:.2f}", ha="center", va="center", fontsize=7)
    ax.set_xticks(range(n))
    ax.set_yticks(range(n))
    ax.set_xticklabels([m[:18] for m in models], rotation=35, ha="right", fontsize=7)
    ax.set_yticklabels([m[:18] for m in models], fontsize=7)
    fig.colorbar(im, ax=ax, fraction=0.046)
    ax.set_title(title, fontsize=9)
    return _finish(fig)


def _sweep_figures(reports: Mapping[GroupKey, BiasReport], out: Path, fmt: str) -> list[Path]:
    """Temperature and top-p sweeps (base groups equal in all else) and the model-correlation heatmap per setting."""

    written = []
    base = {k: r for k, r in reports.items() if k.condition == "base"}
    for field_name, xlabel in (("temperature", "temperature"), ("top_p", "top-p")):
        lines: dict[GroupKey, list[tuple[float, BiasReport]]] = {}
        for k, r in base.items():
            x = getattr(k, field_name)
            if x is not None:
                rest = replace(k, temperature=None) if field_name == "temperature" else replace(k, top_p=None)
                lines.setdefault(rest, []).append((x, r))
        for rest, pts in lines.items():
            if len(pts) < 2:
                continue
            points = [{"x": f"{x:g}", "delta_model": r.delta_model, "std_delta_model": r.std["delta_model"],
                       "delta_api": r.delta_api, "delta_pos": r.delta_pos} for x, r in sorted(pts, key=lambda p: p[0])]
            fig = sweep_figure(points, xlabel=xlabel, title=f"{rest.model} ({rest.presentation})",
                               keys=("delta_api", "delta_pos", "delta_model"))
            written.append(save(fig, out / f"sweep_{field_name}_{_safe(rest.label)}.{fmt}"))
    for setting, result in agreements(reports).items():
        written.append(save(correlation_heatmap(result), out / f"agreement_{_safe(setting.label)}.{fmt}"))
    return written


# --- the HTML report's hook ---------------------------------------------------------------------------


def _bench_for(name: str) -> Benchmark | None:
    if name != "builtin":
        return None
    from ..selection.benchmark import builtin_benchmark

    return builtin_benchmark()


def html_fragments(store: str | Path) -> list[tuple[str, str]]:
    """(title, static HTML) sections for the selection results in a store; [] when there are none."""
    st = SelectionStore.open_existing(store)
    if st is None:
        return []
    with st:
        reports = reports_from(st)
        scores = filter_scores_from(st)
    out: list[tuple[str, str]] = []
    base = {k.label: r for k, r in reports.items() if k.condition == BASE}
    benches = {k.benchmark for k in reports if k.condition == BASE}
    if base:
        bench = _bench_for(next(iter(benches))) if len(benches) == 1 else None
        out.append(("Selection bias", "".join(sections(reports=base, bench=bench))))
        for setting, agree in agreements(reports).items():
            out.append((f"Selection agreement ({setting.label.lstrip(' |')})", "".join(sections(agreement=agree))))
    groups: dict[GroupKey, dict[str, BiasReport]] = defaultdict(dict)
    for k, r in reports.items():
        groups[replace(k, condition="")][k.condition] = r
    for setting, conds in groups.items():
        perturbed = {c: r for c, r in conds.items() if c != BASE and c not in MITIGATED_CONDITIONS}
        if BASE in conds and perturbed:
            effects = perturbation_effects(conds[BASE], perturbed)
            out.append((f"Perturbations: {setting.label}",
                        "".join(sections(effects=effects, base=conds[BASE]))))
    for k, after in reports.items():
        if k.condition not in MITIGATED_CONDITIONS:
            continue
        before = {f"before: {b.model} ({b.presentation})": r for b, r in reports.items()
                  if b.condition == BASE and b.benchmark == k.benchmark}
        how = "uniform draw" if k.condition == MITIGATED else "uniform draw + the model's answer (end to end)"
        pair = {**before, f"after: filter {k.model} + {how}": after}
        out.append((f"Mitigation ({k.benchmark})", "".join(sections(mitigation=pair))))
    for label, s in scores.items():
        out.append((f"Filter quality: {label}", "".join(sections(filter_scores=s))))
    return out
