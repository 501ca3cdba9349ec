"""The ``paper`` operator package's public names, and no private module used from outside its package."""

from __future__ import annotations

import ast
from pathlib import Path
from types import ModuleType

import toolbias
import toolbias.operators.paper as paper
from toolbias.operators.paper import _answers, _build, _shapes

SRC = Path(toolbias.__file__).resolve().parent.parent


def test_what_other_packages_use_is_exported_by_the_package() -> None:
    assert paper.OP_KINDS is _build.OP_KINDS and paper.Route is _build.Route
    assert paper.compile_ops is _build.compile_ops and paper.hierarchy is _build.hierarchy
    assert paper.answer is _answers.answer and paper.Transactions is _answers.Transactions
    assert paper.merged_call is _answers.merged_call and paper.merged_problem is _answers.merged_problem
    assert paper.in_interval is _shapes.in_interval
    exported = [n for n, v in vars(paper).items() if not n.startswith("_") and not isinstance(v, ModuleType)]
    assert sorted(paper.__all__) == sorted(exported)  # its submodules (layer) aside


def _imported_modules(path: Path, package: str) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                out.append(".".join(base + ([node.module] if node.module else [])))
            else:
                out.append(node.module or "")
        elif isinstance(node, ast.Import):
            out.extend(alias.name for alias in node.names)
    return out


def test_no_module_imports_a_private_module_of_another_package() -> None:
    crossing = []
    for path in sorted((SRC / "toolbias").rglob("*.py")):
        parts = path.with_suffix("").relative_to(SRC).parts
        package = ".".join(parts[:-1])  # the package a module (or an __init__) belongs to
        for target in _imported_modules(path, package):
            names = target.split(".")
            private = next((i for i, n in enumerate(names) if n.startswith("_") and not n.startswith("__")), None)
            if private is None:
                continue
            owner = ".".join(names[:private])
            if package != owner and not package.startswith(owner + "."):
                crossing.append(f"{'.'.join(parts)} imports {target}")
    assert not crossing, crossing
