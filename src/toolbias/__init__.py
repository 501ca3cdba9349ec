"""toolbias: measure and mitigate interface bias in tool-using LLM agents.

The public, typed API is re-exported here; submodules hold the implementation.
"""

from __future__ import annotations

from .catalog import (
    ActionError,
    ActionErrorKind,
    Catalog,
    Domain,
    NativeAction,
    Task,
    Tool,
    load_catalog,
    validate_action,
    validate_catalog,
)
from .codec import Codec, Control, Decoded, Outcome, Session
from .env import Environment
from .errors import CatalogError, ProviderError, StoreError, ToolbiasError, VariantError
from .operators import OPERATORS, Call, Flag, FlagKind, Layer, RejectionKind
from .variants import VariantSpec, build_codec, get_variant, registry, resolve_variants

__version__ = "0.1.0"

__all__ = [
    "OPERATORS", "ActionError", "ActionErrorKind", "Call", "Catalog", "CatalogError", "Codec", "Control",
    "Decoded", "Domain", "Environment", "Flag", "FlagKind", "Layer", "NativeAction", "Outcome", "ProviderError",
    "RejectionKind", "Session", "StoreError", "Task", "Tool", "ToolbiasError", "VariantError", "VariantSpec",
    "build_codec", "get_variant", "load_catalog", "registry", "resolve_variants", "validate_action",
    "validate_catalog",
]
