"""Old import paths kept working: modules that moved into a package of their concern.

``toolbias.runner`` became ``toolbias.study.runner`` and so on (:data:`MOVED`). A finder on
``sys.meta_path`` answers an old name with the module at its new home (the same module object,
so ``toolbias.runner.StudyConfig is toolbias.study.runner.StudyConfig``); nothing is imported
until an old name is.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from types import ModuleType

MOVED: dict[str, str] = {
    "toolbias.canonical": "toolbias.base.canonical",
    "toolbias.database": "toolbias.base.database",
    "toolbias.engine": "toolbias.base.engine",
    "toolbias.forked": "toolbias.base.forked",
    "toolbias.jsonfile": "toolbias.base.jsonfile",
    "toolbias.wirejson": "toolbias.base.wirejson",
    "toolbias.plugins": "toolbias.base.plugins",
    "toolbias.names": "toolbias.base.names",
    "toolbias.stats": "toolbias.study.stats",
    "toolbias.codec": "toolbias.variants.codec",
    "toolbias.variant_spec": "toolbias.variants.spec",
    "toolbias.recipes": "toolbias.variants.recipes",
    "toolbias.compose": "toolbias.variants.compose",
    "toolbias.isolated": "toolbias.variants.isolated",
    "toolbias.artifact": "toolbias.variants.artifact",
    "toolbias.instructions": "toolbias.variants.instructions",
    "toolbias.verify": "toolbias.variants.verify",
    "toolbias.registry": "toolbias.variants.named",
    "toolbias.defaults": "toolbias.study.defaults",
    "toolbias.runner": "toolbias.study.runner",
    "toolbias.episode": "toolbias.study.episode",
    "toolbias.env": "toolbias.study.env",
    "toolbias.scoring": "toolbias.study.scoring",
    "toolbias.success": "toolbias.study.success",
    "toolbias.splits": "toolbias.study.splits",
    "toolbias.probes": "toolbias.study.probes",
    "toolbias.recommend": "toolbias.study.recommend",
    "toolbias.env_bfcl": "toolbias.integrations.bfcl_env",
    "toolbias.catalog.bfcl": "toolbias.integrations.bfcl",
    "toolbias.catalog.bfcl_multi": "toolbias.integrations.bfcl_multi",
    "toolbias.registry.merge": "toolbias.variants.named.merge",
    "toolbias.registry.protocol": "toolbias.variants.named.protocol",
    "toolbias.registry.representation": "toolbias.variants.named.representation",
    "toolbias.registry.split": "toolbias.variants.named.split",
}


class MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old module name of :data:`MOVED` and loads it as its new module."""

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(MOVED[spec.name])

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module at its new home is already executed."""


def install() -> None:
    """Put the finder first on ``sys.meta_path``, once."""
    if not any(isinstance(f, MovedModules) for f in sys.meta_path):
        sys.meta_path.insert(0, MovedModules())  # before the path finder: an old submodule path must not load a copy


__all__ = ["MOVED", "MovedModules", "install"]
