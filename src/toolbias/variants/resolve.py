"""Variants as data: an ordered list of operator steps, composed into a codec.

A :class:`~toolbias.variants.spec.VariantSpec` is JSON-serialisable (``{"name", "steps":
[{"op", ...params}]}``); :func:`build_codec` turns a spec plus a catalog into a
:class:`~toolbias.variants.codec.Codec`. Named variants live in the registry (``toolbias.variants.named``),
one file per operator family; :func:`resolve_variants` finds them by name.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..catalog.model import Catalog
from ..errors import VariantError
from .codec import Codec
from .compose import compose
from .isolated import IsolatedCodec, isolated
from .named import REGISTRY
from .paper import GROUPS as PAPER_GROUPS
from .paper import PAPER_VARIANTS, paper_renderings
from .recipes import expand
from .spec import VariantSpec


def build_codec(catalog: Catalog, spec: VariantSpec) -> Codec:
    """Apply ``spec``'s steps to ``catalog`` (a recipe step first expanded into the steps its rule
    gives on this catalog); refuse unknown ops and impossible compositions. On a catalog of
    isolated domains (BFCL entries) the variant is built per domain (:mod:`toolbias.variants.isolated`)."""
    if isolated(catalog):
        return IsolatedCodec(catalog, spec.name, lambda one: _build_codec(one, spec))
    return _build_codec(catalog, spec)


def _build_codec(catalog: Catalog, spec: VariantSpec) -> Codec:
    where = f"{spec.source}: variant '{spec.name}'" if spec.source else f"variant '{spec.name}'"
    steps = spec.steps
    if any(s.get("op") == "recipe" for s in steps):  # steps a rule gives on this catalog (the paper's composed)
        steps = expand(steps, catalog, where)
    return compose(catalog, steps, name=spec.name, where=where)


def registry() -> dict[str, VariantSpec]:
    """All named variants, by stable name."""
    return REGISTRY


def get_variant(name: str) -> VariantSpec:
    """A registered variant, or one of the paper artifact's renderings (``paper.<name>``)."""
    reg = registry()
    if name in reg:
        return reg[name]
    if name in PAPER_VARIANTS:
        return PAPER_VARIANTS[name]
    raise VariantError(f"unknown variant '{name}'",
                       fix=f"use one of: {', '.join(reg)}; or an artifact rendering (paper.<name>, group "
                           f"{', '.join(PAPER_GROUPS)})")


def resolve_variants(selector: str | Sequence[str]) -> list[VariantSpec]:
    """``all``, ``representative``, a paper group (``paper-representative`` ...: the artifact's
    renderings, :mod:`toolbias.variants.paper`), a comma list of names, or spec files (``*.json``)."""
    reg = registry()
    names = selector.split(",") if isinstance(selector, str) else list(selector)
    out: list[VariantSpec] = []
    for raw in names:
        name = raw.strip()
        if not name:
            continue
        if name == "all":
            out.extend(reg.values())
        elif name == "representative":
            out.extend(v for v in reg.values() if "representative" in v.tags)
        elif name in PAPER_GROUPS:  # the paper artifact's renderings (not in "all")
            out.extend(paper_renderings(name))
        elif name.endswith(".json"):
            out.append(VariantSpec.from_file(name))
        else:
            out.append(get_variant(name))
    seen: dict[str, VariantSpec] = {}
    for v in out:
        seen.setdefault(v.name, v)
    return list(seen.values())


def resolve_variant(selector: str) -> VariantSpec:
    """Exactly one variant: a registered name or a spec file (``*.json``), as :func:`resolve_variants`
    reads it; a selector naming several (``all``, a comma list) is refused."""
    specs = resolve_variants(selector)
    if len(specs) != 1:
        raise VariantError(f"'{selector}' names {len(specs)} variants, not one",
                           fix="name one registered variant or one spec file (*.json)")
    return specs[0]


__all__ = ["VariantSpec", "build_codec", "get_variant", "registry", "resolve_variant", "resolve_variants"]
