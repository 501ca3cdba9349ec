"""Query phrasings: the same tasks asked in other words.

The paper's artifact gives each query in several phrasings: ``query`` (colloquial, used in
all its experiments and the default here), ``query_base`` (the templated source),
``query_easy``, ``query_llm`` and ``query_hard``. Loaders keep the alternatives in
``catalog.meta["phrasings"]`` ({task id: {phrasing: text}}), outside the catalog's
fingerprint; :func:`with_phrasing` gives the catalog whose tasks ask in one phrasing (a new
fingerprint, so a study in another phrasing never resumes into this one's episodes).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from ..errors import CatalogError
from .model import Catalog

#: the phrasings of the paper's artifact; ``query`` is its default
PHRASINGS = ("query", "query_base", "query_easy", "query_llm", "query_hard")
DEFAULT_PHRASING = "query"


def with_phrasing(catalog: Catalog, phrasing: str) -> Catalog:
    """``catalog`` with every task's query in ``phrasing`` (the default leaves it as it is)."""
    if phrasing not in PHRASINGS:
        raise CatalogError(f"unknown phrasing {phrasing!r}", where=catalog.name, fix=f"use one of: {', '.join(PHRASINGS)}")
    if phrasing == DEFAULT_PHRASING:
        return catalog
    table = catalog.meta.get("phrasings") if isinstance(catalog.meta, Mapping) else None
    table = table if isinstance(table, Mapping) else {}
    if phrasing == "query_base" and not table:  # the templated source: the built-in catalog's query_templated
        table = {t.id: {phrasing: t.query_templated} for t in catalog.tasks}
    missing = [t.id for t in catalog.tasks if not (table.get(t.id) or {}).get(phrasing)]
    if missing:
        raise CatalogError(f"{len(missing)} of {len(catalog.tasks)} task(s) have no '{phrasing}' phrasing "
                           f"(first: {missing[0]})", where=catalog.name,
                           fix="phrasings come with the paper's artifact (toolschemaspace:DIR; the built-in catalog has "
                               "query_base); use --phrasing query")
    return catalog.with_tasks(replace(t, query=table[t.id][phrasing]) for t in catalog.tasks)


__all__ = ["DEFAULT_PHRASING", "PHRASINGS", "with_phrasing"]
