"""Where the third-party test data lives: ``../shared/data`` beside the repository (never copied into it).

Every test that reads it goes through here, so a missing copy skips with one clear line.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

#: the repository root (this file is tests/support/paths.py)
ROOT = Path(__file__).resolve().parents[2]
#: ``../shared`` beside the repository (``TOOLBIAS_SHARED`` names another place: a worktree's copy
#: of the repository that is not beside it)
SHARED = Path(os.environ.get("TOOLBIAS_SHARED") or ROOT.parent / "shared")
#: ``../shared/data`` beside the repository
SHARED_DATA = SHARED / "data"


def missing_reason(*parts: str) -> str:
    """The one-line skip reason for a missing ``../shared/data/<parts>``."""
    where = "/".join(("../shared/data", *parts))
    return f"needs the third-party data copy {where} (looked at {SHARED_DATA.joinpath(*parts)}); not present"


def has_shared(*parts: str) -> bool:
    return SHARED_DATA.joinpath(*parts).exists()


def needs_shared(*parts: str) -> pytest.MarkDecorator:
    """A skip mark for tests (or modules, via ``pytestmark``) that need ``../shared/data/<parts>``."""
    return pytest.mark.skipif(not has_shared(*parts), reason=missing_reason(*parts))


def shared_path(*parts: str) -> Path:
    """A path under ``../shared/data``; skips the calling test with a clear reason if it is absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(missing_reason(*parts))
    return path
