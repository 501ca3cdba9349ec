"""A variant on a catalog whose domains are separate worlds (``Catalog.meta["isolated_domains"]``).

BFCL shows each question only its own function list, so its importer makes every entry a
domain of its own. A variant on such a catalog is built once per domain, on a one-domain
catalog: a catalog-scope operator (class dispatch, whole-catalog names, schema discovery)
then spans the entry's functions only, as the catalog an agent sees is the entry. The
per-domain codecs are built lazily (an episode needs one) and cached.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..catalog.model import ISOLATED_DOMAINS, Catalog, NativeAction, Tool
from ..operators.base import Call, Layer
from .codec import Codec, Control, Session


def isolated(catalog: Catalog) -> bool:
    return bool(catalog.meta.get(ISOLATED_DOMAINS))


def domain_catalog(catalog: Catalog, domain: str) -> Catalog:
    """The one-domain catalog of ``domain`` (its tools and tasks)."""
    d = catalog.domain(domain)
    return Catalog(catalog.name, (d,), tuple(t for t in catalog.tasks if t.domain == domain))


class IsolatedCodec(Codec):
    """The same variant built per domain (see the module doc); every method of :class:`Codec`
    answers for the domain it is asked about."""

    def __init__(self, catalog: Catalog, name: str, build: Callable[[Catalog], Codec]) -> None:
        # no Codec.__init__: the levels live in the per-domain codecs
        self.catalog = catalog
        self.name = name
        self._build = build
        self._subs: dict[str, Codec] = {}
        self._schemas: dict[str, list[dict[str, Any]]] = {}
        #: the first domain's layers: the steps every domain's codec applies (a spec that cannot
        #: be built fails here, not in the middle of a run)
        self.layers: tuple[Layer, ...] = self.sub(catalog.domains[0].name).layers if catalog.domains else ()

    def sub(self, domain: str) -> Codec:
        """The variant built on ``domain`` alone."""
        codec = self._subs.get(domain)
        if codec is None:
            codec = self._subs[domain] = self._build(domain_catalog(self.catalog, domain))
        return codec

    def subs(self) -> list[tuple[str, Codec]]:
        return [(d.name, self.sub(d.name)) for d in self.catalog.domains]

    @property
    def tools(self) -> tuple[Tool, ...]:
        return tuple(t for _, c in self.subs() for t in c.tools)

    def tools_for(self, domain: str) -> list[Tool]:
        return self.sub(domain).tools_for(domain)

    def schema(self, domain: str) -> list[dict[str, Any]]:
        return self.sub(domain).schema(domain)

    def function_count(self, domains: Iterable[str] | None = None) -> int:
        """The functions of every domain's variant, or of ``domains``' only (only those are built)."""
        if domains is None:
            return sum(c.function_count() for _, c in self.subs())
        return sum(self.sub(d).function_count() for d in domains)

    def instructions(self) -> list[str]:
        return [layer.instruction for layer in self.layers if layer.instruction]

    def encode(self, actions: Iterable[NativeAction]) -> list[Call]:
        """Each run of same-domain actions through its domain's codec (an episode has one)."""
        out: list[Call] = []
        run: list[NativeAction] = []
        for a in actions:
            if run and a.domain != run[0].domain:
                out.extend(self.sub(run[0].domain).encode(run))
                run = []
            run.append(a)
        if run:
            out.extend(self.sub(run[0].domain).encode(run))
        return out

    def session(self, domain: str, control: Control | str = Control.STRICT) -> Session:
        return self.sub(domain).session(domain, control)


__all__ = ["IsolatedCodec", "domain_catalog", "isolated"]
