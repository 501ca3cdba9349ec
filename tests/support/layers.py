"""A test-local namespace operator (``<class>__<tool>``) that routes each call through its
class, so tests can produce wrong-class routing without depending on a registered operator.
Tests register it for one test with ``monkeypatch.setitem(OPERATORS, NamespaceByClass.op, ...)``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from toolbias.catalog.model import Tool
from toolbias.operators import Call, Forward, Layer
from toolbias.operators.base import outer_tool


class NamespaceByClass(Layer):
    op = "test_class_namespace"

    def __init__(self, inner: Sequence[Tool], params: Mapping[str, Any]) -> None:
        super().__init__(inner, params)
        self.tools = tuple(outer_tool(t, name=f"{t.cls}__{t.name}") for t in self.inner)
        self._inner = {(t.domain, f"{t.cls}__{t.name}"): t for t in self.inner}
        self._outer = {(t.domain, t.name): f"{t.cls}__{t.name}" for t in self.inner}

    def encode(self, call: Call, domain: str, state: Any) -> list[Call]:
        return [Call(self._outer[(domain, call.name)], dict(call.arguments))]

    def decode(self, call: Call, tool: Tool, state: Any) -> Forward:
        inner = self._inner[(tool.domain, tool.name)]
        return Forward((Call(inner.name, dict(call.arguments)),), route=inner.cls, classes=(inner.cls,))
