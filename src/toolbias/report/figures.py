"""Figures (matplotlib, object API: no pyplot state, no display needed).

* ``grid`` - the model x variant heatmap of exact success with a per-cell
  failure-mode composition bar (paper Figure 2): the white part of the bar is the
  success rate, coloured segments the absolute rate of each failure mode.
* ``remaining`` - the same grid for the variants outside the representative set (Figure 4),
  drawn when a study has both.
* ``function_ratio`` - change from native success against the variant/native
  function-count ratio (query-weighted over domains), one line per model and the median across
  models (Figure 3); under the paper's protocol over the artifact's ladder only
  (:func:`function_ratio_lines`).
* ``gap`` - the schema-form gap (lenient - strict, pp) heatmap (Figure 5); the colour
  saturates at +-30 pp, the printed number is the true gap.
"""

from __future__ import annotations

import base64
import io
import math
import re
from collections.abc import Collection
from pathlib import Path

import numpy as np
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from ..study.paper_protocol import Protocol, protocol_of
from ..variants.paper import LADDER, PREFIX, ladder_step
from .grid import FAILURE_MODES, ReportData

#: one colour per failure mode, shared by figures and the HTML report
MODE_COLORS: dict[str, str] = {
    "livelock": "#8c564b",
    "transaction_handle": "#9467bd",
    "rejected_and_stuck": "#d62728",
    "wrong_class": "#ff7f0e",
    "under_execution": "#1f77b4",
    "over_execution": "#17becf",
    "wrong_arguments": "#bcbd22",
}
OTHER_COLOR = "#7f7f7f"
GAP_SATURATION = 0.30


def mode_color(mode: str) -> str:
    return MODE_COLORS.get(mode, OTHER_COLOR)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "x"


def representative_names() -> set[str]:
    """Registered variants of the paper's Figure 2 (tag ``representative``)."""
    try:
        from ..variants import registry

        return {name for name, spec in registry().items() if "representative" in spec.tags}
    except Exception:  # a broken registry must not stop a report
        return set()


def grid_figure(data: ReportData, control: str = "strict", condition: str = "base",
                only: Collection[str] | None = None, title: str = "Exact success (%) and failure modes") -> Figure | None:
    """The grid over the study's variants, or over those in ``only`` (Figure 2 / Figure 4)."""
    variants = [v for v in data.variants if any(data.cell(m, v, control, condition) for m in data.models)
                and (only is None or v in only)]
    models = [m for m in data.models if any(data.cell(m, v, control, condition) for v in variants)]
    if not variants or not models:
        return None
    cw, ch = 1.5, 0.62
    width = max(6.8, 2.2 + cw * len(models))
    fig = Figure(figsize=(width, 1.9 + ch * len(variants)), layout="constrained")
    ax = fig.add_subplot()
    cmap = _cmap("YlGn")
    present: set[str] = set()
    for i, v in enumerate(variants):
        for j, m in enumerate(models):
            c = data.cell(m, v, control, condition)
            if c is None:
                ax.add_patch(Rectangle((j, i), 1, 1, facecolor="#f4f4f4", edgecolor="white", lw=2))
                continue
            ax.add_patch(Rectangle((j, i), 1, 1, facecolor=cmap(0.15 + 0.6 * c.success), edgecolor="white", lw=2))
            ax.text(j + 0.5, i + 0.36, f"{100 * c.success:.1f}", ha="center", va="center", fontsize=10,
                    fontweight="bold")
            # composition bar: white = success, then each failure mode's absolute rate
            x0, y0, w, h = j + 0.08, i + 0.62, 0.84, 0.24
            ax.add_patch(Rectangle((x0, y0), w, h, facecolor="white", edgecolor="#555555", lw=0.5))
            x = x0 + w * c.success
            total = max(c.episodes, 1)
            for mode in [*FAILURE_MODES, *sorted(set(c.failure_modes) - set(FAILURE_MODES))]:
                k = c.failure_modes.get(mode, 0)
                if not k:
                    continue
                present.add(mode)
                seg = w * k / total
                ax.add_patch(Rectangle((x, y0), seg, h, facecolor=mode_color(mode), edgecolor="none"))
                x += seg
    ax.set_xlim(0, len(models))
    ax.set_ylim(len(variants), 0)
    ax.set_xticks(np.arange(len(models)) + 0.5, labels=models, rotation=20, ha="right")
    ax.set_yticks(np.arange(len(variants)) + 0.5, labels=variants)
    ax.tick_params(length=0)
    for s in ax.spines.values():
        s.set_visible(False)
    ax.set_title(f"{title} - {control}, {condition}", fontsize=11)
    handles = [Patch(facecolor="white", edgecolor="#555555", label="success")]
    handles += [Patch(facecolor=mode_color(m), label=m.replace("_", " "))
                for m in [*FAILURE_MODES, *sorted(present - set(FAILURE_MODES))] if m in present]
    fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), max(2, int(width // 1.7))),
               fontsize=8, frameon=False)
    return fig


def function_ratio_lines(data: ReportData, control: str = "strict",
                         condition: str = "base") -> tuple[str, dict[str, list[tuple[float, float, str]]]]:
    """Figure 3's baseline and, per model, its points ``(ratio, change from baseline in pp, variant)``
    sorted by ratio (models with fewer than two points left out). The ratio is the report's
    :attr:`~ReportData.function_ratios` (query-weighted over domains where the catalog loads).
    Under the paper's protocol (a ``@paper`` condition) the points are the paper's: the artifact's
    merge/split ladder only (:data:`toolbias.variants.paper.LADDER`, or any variant whose steps are
    one ``paper`` ladder step), each against the rendering of native; other variants stay out."""
    base = data.settings.baseline
    ratios = data.function_ratios
    variants = [v for v in data.variants if v in ratios]
    if protocol_of(condition) is Protocol.PAPER:
        if f"{PREFIX}{base}" in data.variants:
            base = f"{PREFIX}{base}"
        variants = [v for v in variants if v in LADDER or ladder_step(data.variant_steps.get(v) or ()) is not None]
    lines: dict[str, list[tuple[float, float, str]]] = {}
    for m in data.models:
        native = data.cell(m, base, control, condition)
        if native is None:
            continue
        pts = []
        for v in variants:
            c = data.cell(m, v, control, condition)
            if c is not None:
                pts.append((ratios[v], 100 * (c.success - native.success), v))
        if len(pts) >= 2:
            lines[m] = sorted(pts)
    return base, lines


def function_ratio_figure(data: ReportData, control: str = "strict", condition: str = "base") -> Figure | None:
    base, lines = function_ratio_lines(data, control, condition)
    ratios = data.function_ratios
    if not lines:
        return None
    ladder = protocol_of(condition) is Protocol.PAPER
    fig = Figure(figsize=(7.5, 4.6), layout="constrained")
    ax = fig.add_subplot()
    colors = _cmap("tab10")
    for k, (m, pts) in enumerate(lines.items()):
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=4, lw=1.2, color=colors(k % 10),
                alpha=0.85, label=m)
    by_variant: dict[str, list[float]] = {}
    for pts in lines.values():
        for _r, d, v in pts:
            by_variant.setdefault(v, []).append(d)
    med = sorted((ratios[v], float(np.median(ds)), v) for v, ds in by_variant.items())
    ax.plot([p[0] for p in med], [p[1] for p in med], color="black", lw=2.6, marker="s", ms=5, label="median")
    for r, d, v in med:
        ax.annotate(v, (r, d), textcoords="offset points", xytext=(3, 5), fontsize=7, color="#333333",
                    rotation=30)
    ax.axhline(0, color="#999999", lw=0.8, ls="--")
    ax.axvline(1, color="#999999", lw=0.8, ls=":")
    if min(p[0] for p in med) > 0:
        ax.set_xscale("log", base=2)
    ax.set_xlabel("function count ratio (variant / native, query-weighted mean over domains)")
    ax.set_ylabel(f"change from {base} success (pp)")
    what = "the artifact's merge/split ladder (Figure 3)" if ladder else "function-count ratio"
    ax.set_title(f"Success change vs {what} - {control}, {condition}", fontsize=11)
    ax.legend(fontsize=8, frameon=False, loc="best")
    return fig


def gap_figure(data: ReportData, condition: str = "base") -> Figure | None:
    gaps = [g for g in data.gap if g.a["condition"] == condition]
    if not gaps:
        return None
    variants = [v for v in data.variants if any(g.a["variant"] == v for g in gaps)]
    models = [m for m in data.models if any(g.a["model"] == m for g in gaps)]
    grid = np.full((len(variants), len(models)), np.nan)
    for g in gaps:
        grid[variants.index(g.a["variant"]), models.index(g.a["model"])] = g.diff
    fig = Figure(figsize=(2.4 + 1.3 * len(models), 1.4 + 0.5 * len(variants)), layout="constrained")
    ax = fig.add_subplot()
    norm = Normalize(-GAP_SATURATION, GAP_SATURATION)
    im = ax.imshow(np.ma.masked_invalid(grid), cmap=_cmap("RdBu"), norm=norm, aspect="auto")
    for i in range(len(variants)):
        for j in range(len(models)):
            val = grid[i, j]
            text = "" if math.isnan(val) else f"{100 * val:+.1f}"
            ax.text(j, i, text, ha="center", va="center", fontsize=9,
                    color="white" if not math.isnan(val) and abs(val) > 0.7 * GAP_SATURATION else "black")
    ax.set_xticks(range(len(models)), labels=models, rotation=20, ha="right")
    ax.set_yticks(range(len(variants)), labels=variants)
    ax.tick_params(length=0)
    cb = fig.colorbar(im, ax=ax, shrink=0.8)
    cb.set_label(f"lenient - strict (pp, saturates at +-{100 * GAP_SATURATION:.0f})")
    cb.set_ticks([-GAP_SATURATION, 0, GAP_SATURATION], labels=[f"-{100 * GAP_SATURATION:.0f}", "0",
                                                               f"+{100 * GAP_SATURATION:.0f}"])
    ax.set_title(f"Schema-form gap (lenient - strict) - {condition}", fontsize=11)
    return fig


def _cmap(name: str):  # type: ignore[no-untyped-def]
    from matplotlib import colormaps

    return colormaps[name]


def all_figures(data: ReportData) -> dict[str, Figure]:
    """name -> figure for every figure the data supports (names are file stems)."""
    out: dict[str, Figure] = {}
    pairs = data.conditions
    rep = representative_names() | {data.settings.baseline}
    rest = {v for v in data.variants if v not in rep} | {data.settings.baseline}
    split = any(v in rep for v in data.variants if v != data.settings.baseline) and len(rest) > 1
    for control, condition in pairs:
        # Figure 2: the representative variants; Figure 4: the remaining methods (native in both)
        fig = grid_figure(data, control, condition, only=rep if split else None,
                          title="Representative variants (Figure 2)" if split else "Exact success (%) and failure modes")
        if fig is not None:
            out[f"grid_{_slug(control)}_{_slug(condition)}"] = fig
        fig = grid_figure(data, control, condition, only=rest, title="Remaining methods (Figure 4)") if split else None
        if fig is not None:
            out[f"remaining_{_slug(control)}_{_slug(condition)}"] = fig
    for control, condition in pairs:
        fig = function_ratio_figure(data, control, condition)
        if fig is not None:
            out[f"function_ratio_{_slug(control)}_{_slug(condition)}"] = fig
    for condition in dict.fromkeys(g.a["condition"] for g in data.gap):
        fig = gap_figure(data, condition)
        if fig is not None:
            out[f"gap_{_slug(condition)}"] = fig
    return out


def save_figures(data: ReportData, directory: str | Path, formats: tuple[str, ...] = ("png", "svg")) -> list[Path]:
    """Write every figure as PNG and SVG into ``directory``; returns the paths written."""
    out_dir = Path(directory)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, fig in all_figures(data).items():
        for fmt in formats:
            path = out_dir / f"{name}.{fmt}"
            fig.savefig(path, dpi=150, metadata=_metadata(fmt))
            written.append(path)
    return written


def _metadata(fmt: str) -> dict[str, str | None]:
    return {"Date": None} if fmt == "svg" else {"Software": None} if fmt == "png" else {}


def png_base64(fig: Figure, dpi: int = 110) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None})
    return base64.b64encode(buf.getvalue()).decode("ascii")


__all__ = ["MODE_COLORS", "all_figures", "function_ratio_figure", "function_ratio_lines", "gap_figure", "grid_figure", "mode_color",
           "png_base64", "save_figures"]
