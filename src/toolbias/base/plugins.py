"""The one registry idiom: a kind of plugin is one explicit table of names and lazy targets.

Operators, variant families, model providers, catalog kinds and selection perturbations each
keep one :class:`Registry`, written out in the module that owns the kind::

    PROVIDERS = Registry("model kind", {
        "openai": "toolbias.providers.openai:OpenAIProvider",
        "local": Plugin("toolbias.providers.local:LocalProvider", extra="local"),
    }, error=ProviderError)

A target (``"module:attribute"``) is imported the first time its name is looked up, so an
optional back-end costs nothing until used; when that import fails for want of a third-party
package, the lookup raises :class:`~toolbias.errors.MissingExtraError` naming the extra that
installs it. Adding a plugin is adding a line to its table (or ``registry[name] = value`` at
run time); nothing is found by scanning packages or by side-effect imports.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ..errors import MissingExtraError, ToolbiasError

T = TypeVar("T")


@dataclass(frozen=True)
class Plugin:
    """Where a plugin lives (``"module:attribute"``) and the extra that installs what it imports."""

    target: str
    extra: str | None = None

    def load(self, kind: str, name: str) -> Any:
        module_name, _, attr = self.target.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            missing = (exc.name or "").split(".")[0]
            if self.extra and missing and missing != "toolbias":
                raise MissingExtraError(missing, self.extra, f"The {kind} '{name}'") from exc
            raise
        return getattr(module, attr)


class Registry(MutableMapping[str, T], Generic[T]):
    """Name -> plugin, in table order; values are imported on first lookup and kept.

    A mapping, so ``name in reg``, ``reg.get(name)``, ``sorted(reg)`` read the table without
    importing anything; :meth:`resolve` is the lookup that explains an unknown name."""

    def __init__(self, kind: str, entries: Mapping[str, str | Plugin], *,
                 error: type[ToolbiasError] = ToolbiasError) -> None:
        self.kind = kind
        self.error = error
        self._entries: dict[str, Plugin] = {k: v if isinstance(v, Plugin) else Plugin(v) for k, v in entries.items()}
        self._loaded: dict[str, T] = {}

    def __getitem__(self, name: str) -> T:
        try:
            return self._loaded[name]
        except KeyError:
            value: T = self._entries[name].load(self.kind, name)  # KeyError: an unknown name
            self._loaded[name] = value
            return value

    def __setitem__(self, name: str, value: T) -> None:
        """Register ``value`` under ``name`` at run time (a plugin of the user's own, a test's)."""
        self._entries[name] = Plugin(f"<registered at run time>:{name}")
        self._loaded[name] = value

    def __delitem__(self, name: str) -> None:
        del self._entries[name]
        self._loaded.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def resolve(self, name: str, *, where: str | None = None, fix: str | None = None) -> T:
        """The plugin ``name`` names; an unknown name raises this registry's error listing the known ones."""
        if name not in self._entries:
            raise self.error(f"unknown {self.kind} '{name}'", where=where,
                             fix=fix or f"use one of: {', '.join(self._entries)}")
        return self[name]

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {list(self._entries)})"


__all__ = ["Plugin", "Registry"]
