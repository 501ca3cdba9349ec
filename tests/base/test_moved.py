"""Old import paths keep working after the move into packages: the same module objects."""

from __future__ import annotations

import importlib

import pytest

from toolbias.base.moved import MOVED


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_is_the_module_at_its_new_home(old: str) -> None:
    if old.endswith(("bfcl_multi", "bfcl_env")):
        pytest.importorskip("bfcl_eval", reason="BFCL multi-turn needs toolbias[bfcl]")
    assert importlib.import_module(old) is importlib.import_module(MOVED[old])


def test_names_from_old_paths_are_the_new_objects() -> None:
    from toolbias.runner import StudyConfig as old

    from toolbias.study import StudyConfig as new

    assert old is new
    from toolbias.registry import REGISTRY

    from toolbias.variants.named import REGISTRY as named

    assert REGISTRY is named


def test_the_top_level_api_is_lazy_and_complete() -> None:
    import toolbias

    for name in toolbias.__all__:
        assert getattr(toolbias, name) is not None, name
    with pytest.raises(AttributeError):
        _ = toolbias.no_such_name  # type: ignore[attr-defined]
