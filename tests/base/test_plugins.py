"""The one registry idiom: explicit tables, lazy imports, clear errors for unknown names and
missing extras; every registry of the project is such a table and every entry loads."""

from __future__ import annotations

import subprocess
import sys

import pytest

from toolbias.base.plugins import Plugin, Registry
from toolbias.catalog.loaders import CATALOG_KINDS
from toolbias.catalog.model import EFFECT_KINDS
from toolbias.errors import CatalogError, MissingExtraError, ProviderError, ToolbiasError
from toolbias.operators import OPERATORS, Layer
from toolbias.providers import PROVIDERS, make_provider
from toolbias.study.env import EFFECTS
from toolbias.variants.named import REGISTRY, VARIANT_FAMILIES


def test_an_unknown_name_raises_the_registry_error_listing_the_known_ones() -> None:
    reg: Registry[object] = Registry("widget", {"json_dumps": "json:dumps"}, error=CatalogError)
    assert "nope" not in reg and reg.get("nope") is None
    with pytest.raises(CatalogError) as info:
        reg.resolve("nope", where="spec 'nope:x'")
    assert info.value.what == "unknown widget 'nope'"
    assert info.value.where == "spec 'nope:x'"
    assert info.value.fix == "use one of: json_dumps"


def test_a_target_is_imported_on_first_lookup_and_kept() -> None:
    import json

    reg: Registry[object] = Registry("widget", {"dumps": "json:dumps"})
    assert list(reg) == ["dumps"] and len(reg) == 1
    assert reg["dumps"] is json.dumps
    assert reg.resolve("dumps") is json.dumps


def test_a_missing_third_party_package_names_the_extra_that_installs_it() -> None:
    reg: Registry[object] = Registry("model kind", {
        "fancy": Plugin("toolbias_no_such_package_for_tests.engine:Model", extra="local")})
    with pytest.raises(MissingExtraError) as info:
        reg["fancy"]
    assert "toolbias_no_such_package_for_tests" in info.value.what
    assert "model kind 'fancy'" in info.value.what
    assert info.value.fix == "pip install 'toolbias[local]'"


def test_a_broken_target_without_an_extra_is_not_disguised() -> None:
    reg: Registry[object] = Registry("widget", {"x": "toolbias_no_such_package_for_tests:x"})
    with pytest.raises(ModuleNotFoundError):
        reg["x"]


def test_run_time_registration_and_removal() -> None:
    reg: Registry[int] = Registry("number", {})
    reg["one"] = 1
    assert reg.resolve("one") == 1 and list(reg) == ["one"]
    del reg["one"]
    assert "one" not in reg
    with pytest.raises(ToolbiasError, match="unknown number 'one'"):
        reg.resolve("one")


def test_every_operator_entry_loads_the_layer_of_that_op() -> None:
    assert len(OPERATORS) >= 10
    for op, cls in OPERATORS.items():
        assert issubclass(cls, Layer) and cls.op == op


def test_every_provider_and_catalog_kind_entry_loads() -> None:
    assert {"openai", "local", "oracle", "scripted", "replay"} <= set(PROVIDERS)
    assert all(callable(PROVIDERS[k]) for k in PROVIDERS)
    assert list(CATALOG_KINDS)[:5] == ["builtin", "tools", "mcp", "toolschemaspace", "bfcl"]
    assert all(callable(CATALOG_KINDS[k]) for k in CATALOG_KINDS)


def test_unknown_model_kind_keeps_its_specific_hint() -> None:
    with pytest.raises(ProviderError) as info:
        make_provider("gpt4")
    assert info.value.what == "unknown model kind 'gpt4'"
    assert "openai:<model>" in (info.value.fix or "")


def test_variant_families_give_the_registry_in_family_order() -> None:
    names = [spec.name for family in VARIANT_FAMILIES for spec in VARIANT_FAMILIES[family]]
    assert names == list(REGISTRY)
    assert names[0] == "native"


def test_the_engine_runs_exactly_the_effect_kinds_the_catalog_format_allows() -> None:
    assert tuple(EFFECTS) == EFFECT_KINDS


def test_optional_back_ends_are_not_imported_until_used() -> None:
    code = ("import sys, toolbias; toolbias.load_catalog('builtin'); toolbias.make_provider('oracle'); "
            "print(sorted(m for m in ('toolbias.integrations.bfcl', 'toolbias.providers.local', "
            "'toolbias.providers.openai') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]", out.stderr
