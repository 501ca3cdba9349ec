"""The schema-bias paper's artifact's own code, imported from ``../shared/reference/ToolSchemaSpace``
as a test oracle (never by toolbias itself). A missing copy skips with one clear line."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.support.paths import SHARED

#: the artifact's repository beside this one
ARTIFACT = SHARED / "reference" / "ToolSchemaSpace"
#: its rendered schemas of the representative variants
SCHEMAS = ARTIFACT / "benchmarks" / "synthetic" / "data" / "schemas"


def missing_reason(path: Path) -> str:
    return f"needs the paper artifact ../shared/reference/ToolSchemaSpace (looked at {path}); not present"


def needs_artifact() -> pytest.MarkDecorator:
    return pytest.mark.skipif(not (ARTIFACT / "toolschema").is_dir(), reason=missing_reason(ARTIFACT))


def artifact_module(name: str) -> ModuleType:
    """``toolschema.<name>`` of the artifact (its root put on ``sys.path``), or a skip."""
    if not (ARTIFACT / "toolschema" / f"{name}.py").is_file():
        pytest.skip(missing_reason(ARTIFACT / "toolschema" / f"{name}.py"))
    if str(ARTIFACT) not in sys.path:
        sys.path.append(str(ARTIFACT))
    return importlib.import_module(f"toolschema.{name}")
