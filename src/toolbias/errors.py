"""User-facing errors: each says what went wrong, where, and how to fix it.

The CLI prints these without a traceback. Model misbehaviour is never an
exception: rejections, parse errors and flags are recorded results.
"""

from __future__ import annotations

from typing import Any


class ToolbiasError(Exception):
    """An error caused by user input (files, specs, options), printed without a traceback."""

    def __init__(self, what: str, *, where: str | None = None, fix: str | None = None) -> None:
        self.what = what
        self.where = where
        self.fix = fix
        super().__init__(self.render())

    def render(self) -> str:
        parts = [f"{self.where}: {self.what}" if self.where else self.what]
        if self.fix:
            parts.append(f"fix: {self.fix}")
        return "\n".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """The error as data (``--json`` output): its kind (the class name), what, where and fix."""
        return {"kind": type(self).__name__, "what": self.what, "where": self.where, "fix": self.fix}


class CatalogError(ToolbiasError):
    """A catalog file or tool schema that toolbias cannot load or rewrite."""


class VariantError(ToolbiasError):
    """A variant spec that is unknown, malformed, or cannot be equivalent."""


class ProviderError(ToolbiasError):
    """A model provider that cannot be reached or configured."""


class StoreError(ToolbiasError):
    """A results store that cannot be opened, resumed or merged."""


class MissingExtraError(ToolbiasError):
    """An optional dependency is needed: names the extra that installs it."""

    def __init__(self, package: str, extra: str, purpose: str, fix: str | None = None) -> None:
        super().__init__(
            f"{purpose} needs the optional package '{package}', which is not installed",
            fix=fix or f"pip install 'toolbias[{extra}]'",
        )
