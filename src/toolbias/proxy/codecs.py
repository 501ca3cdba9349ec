"""Which codec serves a request: the variant built on the request's own tools, or on the
domain of a given catalog whose native tools the request carries.

Codecs are cached by the canonical JSON of the request's tool list, so an agent that
sends the same tools on every turn (every agent) builds its variant once.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..catalog import Catalog, load_catalog
from ..catalog.model import Domain, Tool, canonical_json
from ..catalog.openai_format import parse_tools
from ..catalog.validation import validate_catalog
from ..errors import ToolbiasError, VariantError
from ..variants import VariantSpec, build_codec
from ..variants.codec import Codec

#: the domain name of a catalog made from a request's tool list
LIVE_DOMAIN = "live"


class RequestError(ToolbiasError):
    """A client request the proxy cannot serve (HTTP 400): bad tools, a variant that cannot
    be built on them, a malformed conversation."""


@dataclass(frozen=True)
class Bound:
    """A codec and the domain a request's tools belong to."""

    codec: Codec
    domain: str

    @property
    def tools(self) -> list[dict[str, Any]]:
        return self.codec.schema(self.domain)


class CodecSource:
    """Codecs for requests, built on demand and cached (least recently used first out)."""

    def __init__(self, variant: VariantSpec, catalog: str | None = None, max_cached: int = 64) -> None:
        self.variant = variant
        self.catalog_spec = catalog
        self.catalog: Catalog | None = load_catalog(catalog) if catalog else None
        self.catalog_codec: Codec | None = build_codec(self.catalog, variant) if self.catalog else None
        self.max_cached = max_cached
        #: tool names -> [(the tool list, its codec)]: a list compares equal in C far faster than
        #: it serialises, and agents send the same list every turn
        self._cache: OrderedDict[tuple[str, ...], list[tuple[list[Any], Bound]]] = OrderedDict()

    def for_tools(self, tools: Sequence[Any]) -> Bound:
        """The codec for a request's native tool list; raises :class:`RequestError`."""
        bound = self.cached(tools)
        if bound is None:
            bound = self.build(tools)
            self.remember(tools, bound)
        return bound

    def cached(self, tools: Sequence[Any]) -> Bound | None:
        """The codec already built for this tool list, or None (cheap: the proxy's event loop
        calls it on every request, and runs :meth:`build` in a thread when it says None)."""
        names = tuple(tool_names(tools))
        entries = self._cache.get(names)
        if entries is not None:
            self._cache.move_to_end(names)
            tools = list(tools)
            for known, bound in entries:
                if known == tools:
                    return bound
        return None

    def build(self, tools: Sequence[Any]) -> Bound:
        """Build the codec for a tool list (not cached: :meth:`remember` it); raises :class:`RequestError`."""
        tools = list(tools)
        return self._build(tools, hashlib.sha256(canonical_json(tools).encode()).hexdigest())

    def remember(self, tools: Sequence[Any], bound: Bound) -> None:
        names = tuple(tool_names(tools))
        self._cache.setdefault(names, []).append((list(tools), bound))
        if len(self._cache) > self.max_cached:
            self._cache.popitem(last=False)

    def _build(self, tools: Sequence[Any], key: str) -> Bound:
        try:
            parsed = parse_tools(list(tools), domain=LIVE_DOMAIN, source="request 'tools'")
        except ToolbiasError as exc:
            raise RequestError(exc.what, where=exc.where, fix=exc.fix) from None
        names = {t.name for t in parsed}
        if self.catalog is not None and self.catalog_codec is not None:
            for domain in self.catalog.domains:
                if names <= {t.name for t in domain.tools}:
                    return Bound(self.catalog_codec, domain.name)
            raise RequestError(f"no domain of catalog '{self.catalog_spec}' has all the request's tools "
                               f"({', '.join(sorted(names))})",
                               fix="start the proxy without --catalog to derive the variant from the request's "
                                   "tools, or name the catalog the agent's tools come from")
        try:
            return bind_tools(parsed, self.variant, f"live:{key[:12]}")
        except VariantError as exc:
            raise RequestError(f"variant '{self.variant.name}' cannot be built on the request's tools: {exc.what}",
                               where=exc.where, fix=exc.fix or "choose another --variant") from None
        except ToolbiasError as exc:
            raise RequestError(exc.what, where=exc.where, fix=exc.fix) from None


def bind_tools(tools: Sequence[Tool], variant: VariantSpec, name: str, domain: str = LIVE_DOMAIN) -> Bound:
    """``variant`` built on a tool list an agent or a server gave (one domain, ``domain``): the
    catalog validated, then the codec built (raises :class:`~toolbias.errors.VariantError` or
    another :class:`~toolbias.errors.ToolbiasError`). The HTTP proxy and the MCP proxy both
    bind their tools here."""
    tools = tuple(t if t.domain == domain else replace(t, domain=domain) for t in tools)
    catalog = Catalog(name=name, domains=(Domain(domain, tools, title=domain),))
    validate_catalog(catalog)
    return Bound(build_codec(catalog, variant), domain)


def tool_names(tools: Sequence[Any]) -> list[str]:
    """Each tool's name ("" where there is none: parsing the list names the problem)."""
    out = []
    for t in tools:
        fn = t.get("function", t) if type(t) is dict else None  # exact type: ABC checks cost more
        name = fn.get("name") if type(fn) is dict else None
        out.append(name if type(name) is str else "")
    return out
