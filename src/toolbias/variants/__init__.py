"""Variants: equivalent rewrites of a tool catalog, as data.

A :class:`VariantSpec` is an ordered list of operator steps (:mod:`toolbias.operators`);
:func:`build_codec` composes it on a catalog into a :class:`~toolbias.variants.codec.Codec`, the
single source of truth for what the model sees and how its calls decode. Named variants live in
:mod:`toolbias.variants.named` (one module per operator family); :func:`resolve_variants` finds
them by name, tag (``all``, ``representative``) or spec file. The paper artifact's own renderings
are ``paper.<name>`` (:mod:`toolbias.variants.paper`; :func:`paper_rendering` maps a paper variant
to one). The rest of the package: the codec, composition (``compose``), rule-driven recipes, per-entry building for isolated catalogs, the
paper's spec files (``artifact``), variant instructions and verification (``verify``).
"""

from .codec import Codec, Control, Decoded, Outcome, Session
from .paper import paper_rendering, paper_renderings
from .resolve import build_codec, get_variant, registry, resolve_variant, resolve_variants
from .spec import VariantSpec

__all__ = ["Codec", "Control", "Decoded", "Outcome", "Session", "VariantSpec", "build_codec", "get_variant",
           "paper_rendering", "paper_renderings", "registry", "resolve_variant", "resolve_variants"]
