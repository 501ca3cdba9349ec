"""A variant of an MCP server's tools, apart from any transport (``toolbias mcp-proxy``).

:func:`build_mcp_variant` reads the upstream's ``tools/list`` entries through the one tool-list
reader (:func:`~toolbias.catalog.formats.read_tools`), binds the variant on them as the HTTP proxy
does (:func:`~toolbias.proxy.codecs.bind_tools`) and verifies it (:func:`~toolbias.variants.verify.verify_codec`:
the same action space, or it is refused). The result lists the variant's tools as MCP entries:

- a tool the variant keeps as it is (same name, the calls it decodes go to that tool alone) keeps
  its ``title``, ``outputSchema`` and ``annotations``;
- any other tool (merged, split, renamed, a dispatcher, a protocol tool that executes) gets the
  ``annotations`` of the native tools it reaches, combined conservatively
  (:func:`combine_annotations`), and no ``outputSchema`` (its results follow several schemas, or
  are protocol replies);
- a protocol tool that reaches no native tool (``begin``, ``list_methods``, ``resolve`` ...) gets
  no annotations.

:class:`McpConversation` is one client session: a decoding session of the codec (protocol state:
open transactions, references, discovered methods) and the :class:`~toolbias.proxy.conversation.CallLog`
the store keeps. :meth:`McpConversation.decode` says what a ``tools/call`` is: native actions to
run on the upstream, or the answer the proxy gives itself (a protocol reply, or an ``Error: ...``
rejection worded as the HTTP proxy and episodes word it).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..catalog.coverage import coverage_actions
from ..catalog.formats import read_tools, tool_entry
from ..catalog.model import NativeAction, Tool, json_copy
from ..errors import VariantError
from ..operators.base import Call
from ..variants.codec import Control, Decoded, Outcome
from ..variants.spec import VariantSpec
from ..variants.verify import schema_cuts, verify_codec
from .codecs import Bound, bind_tools
from .conversation import CallLog

#: the MCP tool hints and the value the specification gives each when a server leaves it out
HINT_DEFAULTS: dict[str, bool] = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False,
                                  "openWorldHint": True}


def combine_annotations(members: Sequence[Mapping[str, Any] | None]) -> dict[str, Any] | None:
    """The hints of a tool that reaches ``members`` (each native tool's ``annotations``),
    conservatively: read-only only if every member is, destructive if any member is (a read-only
    member is never destructive), idempotent only if every member is, open-world if any member is.
    A hint a member leaves out takes the specification's default. None when no member has
    annotations (nothing is claimed for a server that claims nothing)."""
    if not members or all(m is None for m in members):
        return None
    hints = [{k: m[k] if isinstance(m.get(k), bool) else d for k, d in HINT_DEFAULTS.items()}
             for m in (m or {} for m in members)]
    read_only = all(h["readOnlyHint"] for h in hints)
    return {"readOnlyHint": read_only,
            "destructiveHint": any(h["destructiveHint"] and not h["readOnlyHint"] for h in hints),
            "idempotentHint": all(h["idempotentHint"] for h in hints),
            "openWorldHint": any(h["openWorldHint"] for h in hints)}


def reached_tools(bound: Bound) -> dict[str, list[str]]:
    """For each variant tool, the native tools its calls execute (in catalog order), found by
    encoding every native tool's coverage actions and decoding them in a fresh session: a variant
    call that decodes to native actions reaches their tools (protocol calls reach none)."""
    codec, domain = bound.codec, bound.domain
    cuts = schema_cuts(codec)
    natives = [t for d in codec.catalog.domains for t in d.tools]
    reached: dict[str, set[str]] = {t.name: set() for t in codec.tools_for(domain)}
    for tool in natives:
        for action in coverage_actions(tool, {p: cuts[p] for p in tool.properties if p in cuts}):
            session = codec.session(domain)
            for call in codec.encode([action]):
                decoded = session.decode(call)
                if decoded.outcome is Outcome.NATIVE:
                    reached.setdefault(call.name, set()).update(a.tool for a in decoded.actions)
    order = {t.name: i for i, t in enumerate(natives)}
    return {name: sorted(found, key=order.__getitem__) for name, found in reached.items()}


@dataclass(frozen=True)
class McpVariant:
    """A variant bound to an upstream's tools: the codec and the MCP tool list it serves."""

    bound: Bound
    natives: tuple[Tool, ...]
    tools: tuple[dict[str, Any], ...]      # the variant's tools as MCP tools/list entries
    reached: Mapping[str, tuple[str, ...]]  # variant tool -> native tools its calls execute

    @property
    def name(self) -> str:
        return self.bound.codec.name

    def instructions(self) -> list[str]:
        return self.bound.codec.instructions()


def build_mcp_variant(entries: Sequence[Any], variant: VariantSpec, *, server: str = "upstream",
                      domain: str = "live", verify: bool = True) -> McpVariant:
    """``variant`` on an MCP server's ``tools/list`` entries; raises :class:`~toolbias.errors.ToolbiasError`
    when the entries cannot be read, the variant cannot be built on them or fails verification."""
    source = f"tools/list of the MCP server '{server}'"
    natives = read_tools({"tools": list(entries)}, domain, source)
    try:
        bound = bind_tools(natives, variant, f"mcp:{server}", domain)
    except VariantError as exc:
        raise VariantError(f"variant '{variant.name}' cannot be built on {source}: {exc.what}", where=exc.where,
                           fix=exc.fix or "choose another --variant") from None
    if verify:
        result = verify_codec(bound.codec, bound.codec.catalog)
        if not result.ok:
            raise VariantError(f"variant '{variant.name}' on {source} is not the same action space "
                               f"({result.failed} of {result.checked} checks failed: {'; '.join(result.examples[:2])})",
                               fix="choose another --variant (toolbias verify --catalog ... lists what each one keeps)")
    reached = {k: tuple(v) for k, v in reached_tools(bound).items()}
    by_name = {t.name: t for t in bound.codec.catalog.domains[0].tools}
    tools = tuple(_entry(t, reached.get(t.name, ()), by_name) for t in bound.codec.tools_for(bound.domain))
    return McpVariant(bound, tuple(bound.codec.catalog.domains[0].tools), tools, reached)


def _entry(tool: Tool, reached: Sequence[str], natives: Mapping[str, Tool]) -> dict[str, Any]:
    entry = tool_entry(tool, "mcp")
    for key in ("title", "outputSchema", "annotations"):
        entry.pop(key, None)
    native = natives.get(tool.name)
    if native is not None and tuple(reached) == (tool.name,):  # kept as it is: the server's own words
        if native.title is not None:
            entry["title"] = native.title
        if native.output_schema is not None and tool.parameters == native.parameters:
            entry["outputSchema"] = json_copy(native.output_schema)
        if native.annotations is not None:
            entry["annotations"] = json_copy(native.annotations)
        return entry
    combined = combine_annotations([natives[n].annotations for n in reached if n in natives])
    if combined is not None:
        entry["annotations"] = combined
    return entry


@dataclass(frozen=True)
class Answer:
    """What the proxy answers a ``tools/call`` with itself: a protocol reply or a rejection."""

    text: str
    is_error: bool


@dataclass
class McpConversation:
    """One MCP client session under the variant (see the module doc)."""

    variant: McpVariant
    control: Control = Control.STRICT
    log: CallLog = field(init=False)

    def __post_init__(self) -> None:
        bound = self.variant.bound
        self.log = CallLog(conv_id=uuid.uuid4().hex, variant=self.variant.name, domain=bound.domain,
                           catalog=bound.codec.catalog.name)
        self.session = bound.codec.session(bound.domain, self.control)
        self._seq = 0

    def rebind(self, variant: McpVariant) -> None:
        """The upstream's tools changed: decode with the rebuilt variant from now on (protocol state
        such as an open transaction does not survive a changed tool list)."""
        self.variant = variant
        self.session = variant.bound.codec.session(variant.bound.domain, self.control)

    def decode(self, name: str, arguments: Mapping[str, Any] | None) -> tuple[Decoded, list[NativeAction] | Answer]:
        """Decode one ``tools/call`` and log it: the native actions to run upstream, or the proxy's
        own answer."""
        self._seq += 1
        self.log.turns += 1
        self.log.rounds += 1
        args = dict(arguments) if arguments is not None else {}
        decoded = self.session.decode(Call(name, args))
        entry: dict[str, Any] = {"round": self.log.rounds,
                                 "tool_call": {"id": f"mcp_{self.log.conv_id[:12]}_{self._seq}", "name": name,
                                               "arguments": args, "raw_arguments": None, "parse_error": None},
                                 "decoded": decoded.to_dict()}
        self.log.calls.append(entry)
        if decoded.outcome is Outcome.NATIVE:
            entry["native_ids"] = [f"{entry['tool_call']['id']}_{i}" for i in range(len(decoded.actions))]
            self.log.native_calls += len(decoded.actions)
            return decoded, list(decoded.actions)
        text = decoded.protocol_text() or ""
        entry["message"] = text
        self.log.protocol_rounds += 1
        if decoded.outcome is Outcome.REPLY:
            self.log.replies += 1
        else:
            self.log.rejections += 1
        return decoded, Answer(text, decoded.outcome is Outcome.REJECTION)

    def upstream_failed(self, message: str) -> None:
        """A forwarded call the upstream could not answer (it crashed, hung or refused)."""
        self.log.termination = "upstream_error"
        if self.log.calls:
            self.log.calls[-1]["upstream_error"] = message


__all__ = ["HINT_DEFAULTS", "Answer", "McpConversation", "McpVariant", "build_mcp_variant", "combine_annotations",
           "reached_tools"]
