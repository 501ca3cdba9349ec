"""Native catalogs: the model, validation and loaders."""

from .loaders import CATALOG_KINDS, load_catalog
from .model import Catalog, Domain, NativeAction, Task, Tool, canonical_json
from .openai_format import dump_tools, parse_tools
from .validation import ActionError, ActionErrorKind, validate_action, validate_catalog

__all__ = [
    "CATALOG_KINDS", "ActionError", "ActionErrorKind", "Catalog", "Domain", "NativeAction", "Task", "Tool",
    "canonical_json", "dump_tools", "load_catalog", "parse_tools", "validate_action", "validate_catalog",
]
