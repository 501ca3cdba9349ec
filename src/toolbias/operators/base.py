"""The one small interface every schema operator implements.

A variant is a stack of :class:`Layer` s. Each layer is one operator step bound to
the schema beneath it (the native catalog for the first step): it exposes an
*outer* tool list, maps inner calls to outer calls (``encode``) and outer calls
back to inner calls (``decode``). The :class:`~toolbias.variants.codec.Codec` composes the
layers, validates every call against each layer's schema with ``jsonschema``, and
handles lenient repair; layers only do their own structural mapping.

Outcomes are values: a layer's ``decode`` returns :class:`Forward` (inner calls),
:class:`Reply` (a protocol answer such as a transaction handle) or :class:`Reject`
(off-schema or protocol misuse, with a message the agent can act on).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType
from typing import Any, ClassVar, NamedTuple

from ..base.names import ALL_DOMAINS as ALL_DOMAINS  # the catalog scope, re-exported for the operators
from ..catalog.model import Catalog, Tool
from ..errors import VariantError


class Call(NamedTuple):
    """A tool call at some layer: a tool name and its (parsed) JSON arguments.

    An immutable value (a named tuple: the codec makes several per decoded call)."""

    name: str
    arguments: Mapping[str, Any] = MappingProxyType({})

    def to_dict(self) -> dict[str, Any]:
        args = dict(self.arguments) if isinstance(self.arguments, Mapping) else self.arguments  # a malformed call
        return {"name": self.name, "arguments": args}


class RejectionKind(str, Enum):
    PARSE_ERROR = "parse_error"            # arguments were not a JSON object
    UNKNOWN_TOOL = "unknown_tool"          # no such tool in the variant
    INVALID_ARGUMENTS = "invalid_arguments"  # fails the variant's JSON schema
    INVALID_ACTION = "invalid_action"      # decodes to a native action that is not valid
    PROTOCOL = "protocol"                  # transaction / reference / discovery misuse


class FlagKind(str, Enum):
    UNKNOWN_HANDLE = "unknown_handle"
    WRITE_AFTER_COMMIT = "write_after_commit"
    DOUBLE_COMMIT = "double_commit"
    COMMIT_MISSING_WRITES = "commit_missing_writes"
    UNCOMMITTED_HANDLE = "uncommitted_handle"
    BAD_REFERENCE = "bad_reference"
    UNDISCOVERED_TOOL = "undiscovered_tool"

    @property
    def is_transaction(self) -> bool:
        return self in TRANSACTION_FLAGS


TRANSACTION_FLAGS = frozenset({FlagKind.UNKNOWN_HANDLE, FlagKind.WRITE_AFTER_COMMIT, FlagKind.DOUBLE_COMMIT,
                               FlagKind.COMMIT_MISSING_WRITES, FlagKind.UNCOMMITTED_HANDLE})


@dataclass(frozen=True)
class Flag:
    kind: FlagKind
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "detail": self.detail}


class Forward(NamedTuple):
    """The outer call stands for these inner calls (usually one).

    ``route`` names the dispatcher / namespace the call went through and ``classes``
    the classes that route serves, so wrong-class routing can be scored later.
    """

    calls: tuple[Call, ...]
    route: str | None = None
    classes: tuple[str, ...] = ()
    #: flags raised by the call even though it executes (e.g. an unknown handle passed on as is)
    flags: tuple[Flag, ...] = ()


class Reply(NamedTuple):
    """A protocol answer returned to the agent as the tool message (nothing executes)."""

    payload: Mapping[str, Any]
    flags: tuple[Flag, ...] = ()


class Reject(NamedTuple):
    kind: RejectionKind
    message: str
    flags: tuple[Flag, ...] = ()
    #: the error object a layer that reproduces another system's replies words (the paper
    #: artifact's ``{"error": ..., "hint": ...}``); kept as the rejection's ``Decoded.reply``
    reply: Mapping[str, Any] | None = None


#: what a layer's ``decode`` returns; named tuples (immutable, and cheap: one per call per layer)
Step = Forward | Reply | Reject


class Layer:
    """One operator step. Subclasses set ``op`` and build ``self.tools`` in ``__init__``.

    ``inner`` is the schema beneath (every domain's tools); ``params`` the step's
    parameters from the variant spec. Constructors raise :class:`VariantError` for
    parameters that cannot give an equivalent schema.
    """

    op: ClassVar[str] = ""
    #: the step parameters this operator understands; any other is refused when the variant
    #: is built (a typo would otherwise silently give another variant). None: not declared.
    PARAMS: ClassVar[tuple[str, ...] | None] = None
    #: Table 11 instruction appended to the system prompt when instructions are on
    #: (a class default; a layer whose wording depends on its method sets its own).
    instruction: str | None = None
    #: a cross-call protocol (transaction, reference, discovery): answers calls itself, so it
    #: must be the last step of a variant
    protocol: ClassVar[bool] = False
    #: False: the codec does not check calls against this layer's JSON schemas; the layer checks
    #: them itself, as the system it reproduces does (the paper artifact's surfaces). The native
    #: level still validates every action a call decodes to.
    validates: ClassVar[bool] = True
    #: True: tool names reproduce another system's rendering and may run past OpenAI's 64
    #: characters (the paper artifact's fully split names; vLLM accepts them)
    long_names: ClassVar[bool] = False
    #: the values of the ``method`` parameter, the default first (empty: no ``method``)
    METHODS: ClassVar[tuple[str, ...]] = ()
    #: what lenient control executes for this operator beyond the schema-valid forms (one line)
    LENIENT: ClassVar[str] = "calls in the form of a lower level (e.g. a native tool name with native arguments)"

    def __init__(self, inner: Sequence[Tool], params: Mapping[str, Any]) -> None:
        self.inner = tuple(inner)
        self.params = dict(params)
        unknown = sorted(set(self.params) - set(self.PARAMS)) if self.PARAMS is not None else []
        if unknown:
            raise VariantError(f"unknown parameter(s) {', '.join(map(repr, unknown))} for operator '{self.op}'",
                               fix=f"use: {', '.join(sorted(self.PARAMS or ())) or 'no parameters'}")
        self.tools: tuple[Tool, ...] = self.inner

    def chosen_method(self, params: Mapping[str, Any]) -> str:
        """The step's ``method`` (the first of ``METHODS`` when not given); an unknown one is refused."""
        method = str(params.get("method", self.METHODS[0]))
        if method not in self.METHODS:
            raise VariantError(f"unknown {self.op} method '{method}'", where=f"{self.op} step",
                               fix=f"use one of: {', '.join(self.METHODS)}")
        return method

    @classmethod
    def prepare(cls, params: Mapping[str, Any], catalog: Catalog) -> dict[str, Any]:
        """Resolve catalog-dependent defaults into explicit step parameters before the layer
        is built (e.g. interval cut points from the tasks' gold values). Identity by default."""
        return dict(params)

    # -- encoding (oracle, training data) ------------------------------------
    def new_encode_state(self) -> Any:
        return None

    def encode(self, call: Call, domain: str, state: Any) -> list[Call]:
        """Outer calls that stand for one inner call (the identity by default)."""
        return [call]

    # -- decoding (agent calls) ----------------------------------------------
    def new_state(self) -> Any:
        return None

    def decode(self, call: Call, tool: Tool, state: Any) -> Step:
        """Decode a call already validated against ``tool`` (one of ``self.tools``). Never mutate
        ``call.arguments``: forward it as is, or a new dict (the codec reuses the verdict for an
        unchanged arguments object)."""
        return Forward((call,))

    def repair(self, call: Call, domain: str) -> Call | None:
        """Lenient mode: an outer-schema call for an off-schema call that unambiguously means it."""
        return None

    def lenient_decode(self, call: Call, tool: Tool, state: Any, domain: str) -> Forward | None:
        """Lenient control, after this layer rejected ``call`` as protocol misuse: the inner
        calls it unambiguously means (a raw value where a handle is expected, an undiscovered
        method), or None. Each protocol operator documents what it accepts (``LENIENT``)."""
        return None

    def value_domains(self) -> Mapping[str, Mapping[str, Sequence[Any]]]:
        """Native uid -> {argument: the only values this layer can express} (a resolver's fixed
        table); verification covers those values instead of its own samples. Empty by default."""
        return {}

    def finish(self, state: Any) -> list[Flag]:
        """Flags raised at episode end (e.g. transactions never committed)."""
        return []

    def describe(self) -> str:
        args = ", ".join(f"{k}={v}" for k, v in self.params.items())
        return f"{self.op}({args})"


def outer_tool(template: Tool, **changes: Any) -> Tool:
    """A copy of ``template`` with some fields changed (tools are frozen)."""
    from dataclasses import replace

    return replace(template, **changes)
