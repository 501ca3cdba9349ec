"""The codec reuses a level's verdict for the level below only when it is provably the same:
the very same arguments object reaching a tool whose schema validates the same way."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tests.support.catalogs import mini_catalog
from toolbias.catalog.model import Tool
from toolbias.operators import Call, Forward, Layer
from toolbias.operators.base import RejectionKind, outer_tool
from toolbias.operators.strip import StripDescriptions
from toolbias.variants.codec import Codec, Outcome, validation_key


def _loosen(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The same object schema with every enum dropped: it accepts more than the native one."""
    props = {p: {k: v for k, v in s.items() if k != "enum"} for p, s in schema["properties"].items()}
    return {**schema, "properties": props}


class LooseForward(Layer):
    """Outer tools accept any string where the native ones list an enum, and forward the
    arguments object unchanged (no copy): the native check must still run."""

    op = "test_loose_forward"

    def __init__(self, inner: Sequence[Tool], params: Mapping[str, Any]) -> None:
        super().__init__(inner, params)
        self.tools = tuple(outer_tool(t, parameters=_loosen(t.parameters)) for t in self.inner)

    def decode(self, call: Call, tool: Tool, state: Any) -> Forward:
        return Forward((call,))


def test_forwarded_arguments_are_rechecked_against_a_stricter_schema() -> None:
    catalog = mini_catalog()
    codec = Codec(catalog, [LooseForward(catalog.tools, {})], name="loose")
    call = Call("set_light", {"room": "garage", "state": "on"})  # fits the outer schema, not the native one
    d = codec.session("home").decode(call)
    assert d.outcome is Outcome.REJECTION
    assert d.rejection_kind is RejectionKind.INVALID_ARGUMENTS
    assert "garage" in d.message and not d.actions
    ok = codec.session("home").decode(Call("set_light", {"room": "office", "state": "on"}))
    assert ok.outcome is Outcome.NATIVE


def test_validation_key_ignores_annotations_and_key_order_only() -> None:
    native = mini_catalog().tools[0]
    stripped = StripDescriptions([native], {}).tools[0]
    assert stripped.parameters != native.parameters  # descriptions are gone ...
    assert validation_key(stripped) == validation_key(native)  # ... which never changes a verdict
    reordered = outer_tool(native, parameters={**native.parameters, "properties": dict(
        reversed(list(native.properties.items())))})
    assert validation_key(reordered) == validation_key(native)
    loose = outer_tool(native, parameters=_loosen(native.parameters))
    assert validation_key(loose) != validation_key(native)
    # a parameter *named* description is a property, not an annotation
    with_param = outer_tool(native, parameters={**native.parameters, "properties": {
        **native.properties, "description": {"type": "string"}}})
    assert validation_key(with_param) != validation_key(native)


def test_a_used_catalog_still_pickles() -> None:
    """Checks compiled and cached on tools during decoding are closures; pickling a catalog
    (e.g. to send it to a spawned process) leaves them out and still works."""
    import pickle

    catalog = mini_catalog()
    codec = Codec(catalog, [LooseForward(catalog.tools, {})], name="loose")
    codec.session("home").decode(Call("set_light", {"room": "office", "state": "on"}))
    assert "_schema_checks" in catalog.tools[0].__dict__
    again = pickle.loads(pickle.dumps(catalog))
    assert again == catalog
    assert Codec(again, []).session("home").decode(Call("set_light", {"room": "garage", "state": "on"})).outcome \
        is Outcome.REJECTION
