"""What the studies of a store stored about their catalogs and variants when they ran
(:class:`~toolbias.store.StudyMeta`): function-count ratios, classes and variant steps, read
instead of rebuilt from the catalog and the variant registry (so a variant given as a spec
file keeps its ratio and steps). Studies stored before toolbias kept this have none: the
report rebuilds what it can for them."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from ..store import StudyMeta, VariantMeta
from .paper_tables import weighted_ratio

V = TypeVar("V", bound=Hashable)


def _by_variant(metas: Mapping[str, StudyMeta], studies: Iterable[str], variants: Sequence[str],
                value: Callable[[StudyMeta, VariantMeta], V | None]) -> dict[str, dict[V, list[str]]]:
    """variant -> {stored value -> the studies that stored it}, in ``variants`` order."""
    found: dict[str, dict[V, list[str]]] = {}
    for name in studies:
        meta = metas.get(name)
        for v in variants:
            vm = meta.variants.get(v) if meta is not None else None
            x = value(meta, vm) if meta is not None and vm is not None else None
            if x is not None:
                found.setdefault(v, {}).setdefault(x, []).append(name)
    return {v: found[v] for v in variants if v in found}


def _first(found: Mapping[str, Mapping[V, list[str]]], what: str,
           show: Callable[[V], str]) -> tuple[dict[str, V], list[str]]:
    """The first stored value per variant, and a note for each variant whose studies disagree."""
    out = {v: next(iter(values)) for v, values in found.items()}
    notes = [f"variant '{v}' has different {what} in different studies ("
             + "; ".join(f"{show(x)}: {', '.join(sorted(n))}" for x, n in values.items())
             + f"): {show(out[v])} is shown" for v, values in found.items() if len(values) > 1]
    return out, notes


def stored_function_ratios(metas: Mapping[str, StudyMeta], studies: Iterable[str],
                           variants: Sequence[str]) -> tuple[dict[str, float], list[str]]:
    """variant -> ``function_count(variant) / function_count(native)`` as the ``studies``
    stored them; variants no study stored are left out (the caller rebuilds those). Studies
    disagreeing on a variant (another catalog, an edited spec file under the same name) are
    named in a note; the first is shown."""
    found = _by_variant(metas, studies, variants, lambda m, vm: vm.function_count / m.native_function_count
                        if m.native_function_count else None)
    return _first(found, "function-count ratios", lambda r: f"{r:.3f}")


def stored_weighted_ratios(metas: Mapping[str, StudyMeta], studies: Sequence[str], variants: Sequence[str],
                           weights: Mapping[str, float]) -> dict[str, float]:
    """variant -> Figure 3's query-weighted ratio (:func:`~toolbias.report.paper_tables.weighted_ratio`)
    from the per-domain function counts the ``studies`` stored (a domain's first study that stored
    it counts), with no codec built; variants missing a weighted domain's count are left out (the
    caller rebuilds those)."""
    out: dict[str, float] = {}
    stored = [m.domains for n in studies if (m := metas.get(n)) is not None and m.domains]
    for v in variants:
        counts: dict[str, tuple[int, int]] = {}
        for d, w in weights.items():
            if w <= 0:
                continue
            found = next(((dm.native_function_count, dm.function_counts[v]) for domains in stored
                          if (dm := domains.get(d)) is not None and v in dm.function_counts), None)
            if found is None:
                break
            counts[d] = found
        else:
            ratio = weighted_ratio(counts.__getitem__, weights)
            if ratio is not None:
                out[v] = ratio
    return out


def stored_steps(metas: Mapping[str, StudyMeta], studies: Iterable[str],
                 variants: Sequence[str]) -> tuple[dict[str, list[Any]], list[str]]:
    """variant -> its steps (``[[op, params], ...]``) as the ``studies`` ran them."""
    steps: dict[str, list[Any]] = {}

    def remember(m: StudyMeta, vm: VariantMeta) -> str:
        steps.setdefault(vm.steps_hash, vm.steps)
        return vm.steps_hash

    first, notes = _first(_by_variant(metas, studies, variants, remember), "steps",
                          lambda h: format_steps(steps[h]))
    return {v: steps[h] for v, h in first.items()}, notes


def stored_classes(metas: Mapping[str, StudyMeta], studies: Iterable[str]) -> dict[str, str] | None:
    """Native uid -> class from the studies' stored catalogs, if they stored one catalog."""
    catalogs = {(m.catalog, m.fingerprint): m.classes for n in studies if (m := metas.get(n)) is not None}
    return next(iter(catalogs.values())) if len(catalogs) == 1 else None


def format_steps(steps: Sequence[Any]) -> str:
    """``[["merge", {}], ["rename", {"style": "opaque"}]]`` -> ``merge -> rename(style=opaque)``."""
    parts = []
    for op, params in steps:
        args = ", ".join(f"{k}={v}" for k, v in sorted((params or {}).items()))
        parts.append(f"{op}({args})" if args else str(op))
    return " -> ".join(parts) if parts else "(none: the native schema)"


__all__ = ["format_steps", "stored_classes", "stored_function_ratios", "stored_steps", "stored_weighted_ratios"]
