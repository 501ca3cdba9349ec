"""The environment of a paper-protocol episode: calls answered as the artifact's ``SimEnv`` answers them.

The artifact (``toolschema/simenv.py``) reads a variant through a *call map*: each tool the model
sees is either a plain tool standing for one native tool (``named``: a renamed, reordered or
stripped one, or the native tool itself), or a dispatcher over several (``execute``: a merge,
in the flat, nested or union encoding). It validates nothing beyond that map: a call to an
exposed tool runs with whatever arguments it has (missing, extra, mistyped), a dispatcher is
checked for its operation only, and only a name the map lacks is rejected.

:class:`PaperCallMap` derives that map from a toolbias codec, one domain at a time, by asking each
layer of the codec how it encodes a call of each tool beneath it (the codec's public ``encode``
contract): a call that comes out under another name with the same arguments is a plain tool;
one that comes out as ``{"operation": op, "op::arg": ...}``, ``{"operation": op, "arguments":
{...}}`` or ``{op: {...}}`` is a dispatcher in the flat, nested or union encoding. A layer whose
calls take any other form (splits, transactions, references, discovery) is not reproduced yet:
:meth:`PaperCallMap.check` refuses such a variant with :class:`ProtocolNotImplemented`.

:class:`PaperEnv` plays one episode on that map, as ``SimEnv`` does:

* a name the map lacks: under hard control (``--control strict``) rejected with
  ``{"error": "Unknown function `x`. Use only the provided tools."}``; under loose control
  (``lenient``) executed as a native action of that name, answered ``{"status": "ok"}``;
* a plain tool: executed as its native tool (fixed values first, then the call's arguments),
  answered ``{"status": "ok", "executed": NAME}``;
* a dispatcher: under hard control, an operation outside its list (and, nested or union, keys
  that belong to no operation) is rejected with the artifact's message; under loose control the
  same problems are flags (``bad_execute``, ``bad_operation``) and the operation it names runs,
  whatever it is; a call that names none is ``{"error": "call could not be executed"}``.

Every text is ``json.dumps`` of the answer with the standard library's defaults (ASCII escapes,
``", "`` and ``": "`` separators), as the artifact writes them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from ..catalog.model import Catalog, NativeAction
from ..operators.base import Call
from ..variants.codec import Codec, Decoded, Outcome
from .paper_protocol import ProtocolNotImplemented, unknown_function

ENCODINGS = ("flat", "nested", "union")
#: the artifact's discriminator and nested-arguments keys
_OPERATION, _ARGUMENTS = "operation", "arguments"


@dataclass(frozen=True)
class Plain:
    """A tool the model sees that stands for one native tool, with ``fixed`` values."""

    native: str
    fixed: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class Dispatch:
    """A dispatcher over native tools: its encoding, its operations (in order, as the model names
    them) and each operation's native tool and parameters."""

    encoding: str
    ops: list[str] = field(default_factory=list)
    native_of: dict[str, str] = field(default_factory=dict)
    params: dict[str, list[str]] = field(default_factory=dict)

    def problem(self, args: Mapping[str, Any]) -> str | None:
        """The artifact's reason to refuse a call of this dispatcher, or None."""
        if self.encoding == "union":
            present = _objects(args)
            extra = [k for k, v in args.items() if k not in self.ops and not _empty_or_object(v)]
            if extra:
                return f"unknown union keys {extra}"
            if not present:
                return "expected exactly one operation object; got none"
            if len(present) > 1:
                return f"expected exactly one operation object; got {present}"
            one = present[0]
            unknown = [k for k in args[one] if k not in self.params.get(one, [])]
            return f"arguments {unknown} do not belong to `{one}`" if unknown else None
        op: Any = args.get(_OPERATION)
        if op not in self.ops:
            return f"operation must be one of {self.ops}"
        if self.encoding == "nested":
            payload = args.get(_ARGUMENTS)
            if not isinstance(payload, dict):
                return "`arguments` must be an object"
            unknown = [k for k in payload if k not in self.params.get(op, [])]
            if unknown:
                return f"arguments {unknown} do not belong to `{op}`"
            extra = [k for k in args if k not in (_OPERATION, _ARGUMENTS)]
            if extra:
                return f"unexpected top-level keys {extra}"
        return None

    def read(self, args: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]:
        """The operation a call names (None: none) and its native arguments, as the artifact reads them."""
        if self.encoding == "union":
            present = _objects(args)
            return (present[0], dict(args[present[0]])) if len(present) == 1 else (None, {})
        if self.encoding == "nested":
            payload = args.get(_ARGUMENTS)
            return args.get(_OPERATION), dict(payload) if isinstance(payload, dict) else {}
        native: dict[str, Any] = {}
        for key, value in args.items():
            if key == _OPERATION or _omitted(value):
                continue
            native[key.split("::", 1)[1] if "::" in key else key] = value
        return args.get(_OPERATION), native


def _omitted(value: Any) -> bool:
    """``""`` or null: a flat dispatcher's way of leaving an argument out."""
    return value is None or (isinstance(value, str) and value == "")


def _empty_or_object(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value == "") or (isinstance(value, dict) and not value)


def _objects(args: Mapping[str, Any]) -> list[str]:
    """The keys of a union call whose value is a non-empty object (the operations it names)."""
    return [k for k, v in args.items() if isinstance(v, dict) and v]


@dataclass(frozen=True)
class Begin:
    """``begin_<f>``: opens a transaction of native tool ``native``."""

    native: str


@dataclass(frozen=True)
class Write:
    """``set_<f>__<p>``: sets arguments on an open transaction of ``native``."""

    native: str


@dataclass(frozen=True)
class Commit:
    """``commit_<f>``: runs the transaction's native action, if its ``required`` arguments are set."""

    native: str
    required: tuple[str, ...]


Entry = Plain | Dispatch | Begin | Write | Commit
#: the artifact's transaction handle: its key, and the first handle of an episode
_TXN_KEY, _FIRST_TXN = "txn_id", "txn_1"


class _Probe(str):
    """A stand-in argument value, recognisable wherever a layer moves it."""


def _probe_args(params: list[str]) -> dict[str, Any]:
    return {p: _Probe(f"\x00probe:{p}") for p in params}


def _is_probe(value: Any) -> bool:
    return isinstance(value, str) and value.startswith("\x00probe:")


class PaperCallMap:
    """The artifact's reading of one codec's tools, built per domain on first use."""

    def __init__(self, codec: Codec) -> None:
        self.codec = codec
        self._domains: dict[str, dict[str, Entry]] = {}

    @property
    def surface(self) -> Any:
        """The codec's layer that renders one of the artifact's own constructions and answers calls
        as the artifact's environment does (``answer(domain, name, args, state, loose=...)``), if
        the codec is that one layer; None for toolbias's own variants, read through the call map."""
        layers = self.codec.layers
        return layers[0] if len(layers) == 1 and callable(getattr(layers[0], "answer", None)) else None

    def check(self, domains: list[str]) -> None:
        """Build the map of every domain now: a variant it cannot read is refused before any work."""
        for d in domains:
            self.for_domain(d)

    def for_domain(self, domain: str) -> dict[str, Entry]:
        found = self._domains.get(domain)
        if found is None:
            found = self._domains[domain] = {} if self.surface is not None else self._build(domain)
        return found

    def reader(self, domain: str, hard: bool) -> Reader:
        """A fresh reader of this variant's tools for one episode in ``domain``."""
        surface = self.surface
        if surface is not None:
            return SurfaceReader(surface, domain, hard)
        return CallMapReader(self.for_domain(domain), domain, hard)

    def _refuse(self, why: str) -> ProtocolNotImplemented:
        return ProtocolNotImplemented(
            what=f"--protocol paper does not reproduce the artifact's reading of variant '{self.codec.name}' "
                 f"yet: {why}",
            where="--variants",
            fix="leave this variant out under --protocol paper, or run it under --protocol toolbias")

    def _build(self, domain: str) -> dict[str, Entry]:
        native_tools = self.codec.catalog.domain(domain).tools
        params = {t.name: list(t.properties) for t in native_tools}
        required = {t.name: tuple(t.required) for t in native_tools}
        level: dict[str, Entry] = {t.name: Plain(t.name) for t in native_tools}
        for layer in self.codec.layers:
            above: dict[str, Entry] = {}
            for name, entry in level.items():
                if not isinstance(entry, Plain):
                    raise self._refuse(f"its {layer.op} step changes a dispatcher or protocol tool (the artifact "
                                       "composes none)")
                args = _probe_args([p for p in params[entry.native] if p not in entry.fixed])
                try:
                    calls = layer.encode(Call(name, args), domain, layer.new_encode_state())
                except Exception as exc:  # noqa: BLE001 - a layer that cannot encode a stand-in is not read
                    raise self._refuse(f"its {layer.op} step ({type(exc).__name__})") from None
                if len(calls) != 1:
                    self._place_transaction(above, calls, entry, args, layer.op, required[entry.native])
                    continue
                self._place(above, calls[0], entry, args, layer.op)
            level = above
        shown = [t.name for t in self.codec.tools_for(domain)]
        if sorted(shown) != sorted(level):
            raise self._refuse(f"its tools in {domain} are not each one native tool or one dispatcher")
        return level

    def _place_transaction(self, above: dict[str, Entry], calls: list[Call], entry: Plain, args: dict[str, Any],
                           op: str, required: tuple[str, ...]) -> None:
        """``begin_<f>()``, one ``set_<f>__<p>(txn_id, p)`` per argument, ``commit_<f>(txn_id)``: the
        artifact's transaction (curry) form; any other sequence is refused."""
        begin, *writes, commit = calls
        handle = {_TXN_KEY: _FIRST_TXN}
        written = [next((k for k in w.arguments if k != _TXN_KEY), "") for w in writes]
        shaped = sorted(written) == sorted(args) and all(
            dict(w.arguments) == {**handle, p: args[p]} for w, p in zip(writes, written, strict=True))
        if entry.fixed or dict(begin.arguments) or dict(commit.arguments) != handle or not shaped:
            raise self._refuse(f"its {op} step writes a protocol the artifact has no reading for")
        readings: list[tuple[Call, Entry]] = [(begin, Begin(entry.native)),
                                              *((w, Write(entry.native)) for w in writes),
                                              (commit, Commit(entry.native, required))]
        for call, reading in readings:
            if call.name in above:
                raise self._refuse(f"its {op} step gives two tools the name '{call.name}'")
            above[call.name] = reading

    def _place(self, above: dict[str, Entry], call: Call, entry: Plain, args: dict[str, Any], op: str) -> None:
        out = dict(call.arguments)
        if out == args and all(_is_probe(v) for v in out.values()):
            if call.name in above:
                raise self._refuse(f"its {op} step gives two tools the name '{call.name}'")
            above[call.name] = entry
            return
        encoding, operation, moved = _dispatch_form(out, args)
        if encoding is None or entry.fixed:
            raise self._refuse(f"its {op} step writes calls in a form the artifact has no reading for")
        d = above.setdefault(call.name, Dispatch(encoding))
        if not isinstance(d, Dispatch) or d.encoding != encoding or operation in d.native_of:
            raise self._refuse(f"its {op} step gives '{call.name}' two readings")
        d.ops.append(operation)
        d.native_of[operation] = entry.native
        d.params[operation] = moved


def _dispatch_form(out: dict[str, Any], args: dict[str, Any]) -> tuple[str | None, str, list[str]]:
    """(encoding, operation, native parameters) of a dispatcher call encoding ``args``; encoding
    None when the call has none of the artifact's three forms."""
    names = {v: k for k, v in args.items()}
    if isinstance(out.get(_OPERATION), str) and not _is_probe(out[_OPERATION]):
        op = out[_OPERATION]
        rest = {k: v for k, v in out.items() if k != _OPERATION}
        if set(rest) == {_ARGUMENTS} and isinstance(rest[_ARGUMENTS], dict) and rest[_ARGUMENTS] == args:
            return "nested", op, list(args)
        if not args and not rest:
            return "flat", op, []
        if all(_is_probe(v) and k == f"{op}::{names[v]}" for k, v in rest.items()) and len(rest) == len(args):
            return "flat", op, list(args)
        return None, "", []
    if len(out) == 1:
        op, inner = next(iter(out.items()))
        if isinstance(inner, dict) and inner == args and not _is_probe(op):
            return "union", op, list(args)
    return None, "", []


def _text(payload: Mapping[str, Any]) -> str:
    """An answer as the artifact writes it: ``json.dumps`` with the standard library's defaults."""
    return json.dumps(payload)


class Reading(NamedTuple):
    """The artifact's answer to a call of a tool the variant has: the object the model reads, the
    native actions run, whether it counts as a rejection, the flags it raises (the artifact's names)."""

    payload: Mapping[str, Any]
    actions: tuple[NativeAction, ...] = ()
    rejected: bool = False
    flags: tuple[tuple[str, Any], ...] = ()


class Reader(Protocol):
    """How one episode's calls of the variant's own tools are answered (None: not one of its tools)."""

    def read(self, name: str, args: dict[str, Any]) -> Reading | None: ...

    def finish(self) -> list[tuple[str, Any]]: ...


@dataclass
class _Txn:
    native: str
    args: dict[str, Any] = field(default_factory=dict)
    done: bool = False


@dataclass
class CallMapReader:
    """The artifact's answers over a :class:`PaperCallMap` of one domain (toolbias's own variants
    whose tools the artifact's reading covers)."""

    calls: Mapping[str, Entry]
    domain: str
    hard: bool
    #: open and committed transactions by handle (``txn_1``, ``txn_2``, ... in the order begun)
    txns: dict[str, _Txn] = field(default_factory=dict)

    def read(self, name: str, args: dict[str, Any]) -> Reading | None:
        entry = self.calls.get(name)
        if entry is None:
            return None
        if isinstance(entry, Plain):
            return self._run(entry.native, {**entry.fixed, **args})
        if isinstance(entry, (Begin, Write, Commit)):
            return self._transaction(name, entry, args)
        problem = entry.problem(args)
        if problem and self.hard:
            return Reading({"error": problem}, rejected=True)
        flags: list[tuple[str, Any]] = [("bad_execute", problem)] if problem else []
        op, native_args = entry.read(args)
        if op not in entry.ops:
            flags.append(("bad_operation", op))
        if op is None:
            return Reading({"error": "call could not be executed"}, rejected=True, flags=tuple(flags))
        tool = entry.native_of.get(op, op) if isinstance(op, str) else op
        return self._run(tool, native_args, tuple(flags))

    def _run(self, tool: Any, args: dict[str, Any], flags: tuple[tuple[str, Any], ...] = (),
             payload: Mapping[str, Any] | None = None) -> Reading:
        action = NativeAction(self.domain, tool if isinstance(tool, str) else json.dumps(tool), args)
        return Reading(payload or {"status": "ok", "executed": tool}, (action,), flags=flags)

    def _transaction(self, name: str, entry: Begin | Write | Commit, args: dict[str, Any]) -> Reading:
        """The artifact's transaction: handles ``txn_<n>`` per episode; a write to no open transaction
        of its tool, or after its commit, is refused under both controls; a commit that lacks required
        arguments is refused and stays open under hard control, and runs under loose control."""
        if isinstance(entry, Begin):
            opened = f"txn_{len(self.txns) + 1}"
            self.txns[opened] = _Txn(entry.native)
            return Reading({_TXN_KEY: opened, "status": "transaction open; set arguments then commit"})
        rest = dict(args)
        handle: Any = rest.pop(_TXN_KEY, None) if isinstance(entry, Write) else rest.get(_TXN_KEY)
        txn = self.txns.get(handle) if isinstance(handle, str) else None
        if isinstance(entry, Write):
            if txn is None or txn.native != entry.native:
                flag = ("set_unknown_txn", f"{name}({handle})")
            elif txn.done:
                flag = ("set_after_commit", f"{name}({handle})")
            else:
                txn.args.update(rest)
                return Reading({"status": "set"})
            return Reading({"error": flag[1], "hint": "begin a transaction first and use its txn_id"}, rejected=True,
                           flags=(flag,))
        if txn is None or txn.native != entry.native or txn.done:
            flag = ("double_commit" if txn is not None and txn.native == entry.native else "commit_unknown_txn",
                    f"{name}({handle})")
            return Reading({"error": flag[1]}, rejected=True, flags=(flag,))
        txn.done = True
        missing = [r for r in entry.required if r not in txn.args]
        flags = (("commit_missing_required", f"{handle}:{missing}"),) if missing else ()
        if missing and self.hard:
            txn.done = False
            return Reading({"error": f"cannot commit: missing required arguments {missing}"}, rejected=True,
                           flags=flags)
        return self._run(entry.native, dict(txn.args), flags, {"status": "committed"})

    def finish(self) -> list[tuple[str, Any]]:
        """A ``dangling_txn`` for each transaction never committed."""
        return [("dangling_txn", f"{h}:{t.native}") for h, t in self.txns.items() if not t.done]


@dataclass
class SurfaceReader:
    """The answers of a layer that renders the artifact's own construction (see
    :attr:`PaperCallMap.surface`): its ``answer`` under hard or loose control, its transactions'
    ``dangling()`` flags at the end."""

    layer: Any
    domain: str
    hard: bool
    state: Any = None

    def __post_init__(self) -> None:
        self.state = self.layer.new_state()

    def read(self, name: str, args: dict[str, Any]) -> Reading | None:
        got = self.layer.answer(self.domain, name, args, self.state, loose=not self.hard)
        if got is None:
            return None
        actions = tuple(NativeAction(a.domain, a.tool, dict(a.arguments)) for a in got.actions)
        return Reading(dict(got.payload), actions, bool(got.rejected), tuple(got.flags))

    def finish(self) -> list[tuple[str, Any]]:
        dangling = getattr(self.state, "dangling", None)
        return list(dangling()) if callable(dangling) else []


@dataclass
class PaperEnv:
    """One paper-protocol episode: the artifact's ``SimEnv`` bookkeeping (calls, rejections, flags,
    executed actions) around a :class:`Reader` of the variant's tools. A name the variant lacks is
    rejected under hard control, and under loose control executed as a native action of that name
    (in ``unknown_domain``: the episode's, or ``""`` where the artifact's runner qualifies native
    names by class and an unqualified one never matches)."""

    reader: Reader
    domain: str
    hard: bool
    unknown_domain: str | None = None
    executed: list[NativeAction] = field(default_factory=list)
    n_calls: int = 0
    n_rejected: int = 0
    #: (flag, detail) in the order raised, as the artifact's decoder keeps them
    flags: list[tuple[str, Any]] = field(default_factory=list)

    def call(self, name: str, args: Any) -> tuple[str, Decoded]:
        """Answer one model call: the tool message's text, and how it decoded (for the record)."""
        self.n_calls += 1
        args = dict(args) if isinstance(args, dict) else {}
        call = Call(name, args)
        got = self.reader.read(name, args)
        if got is None:
            if self.hard:
                got = Reading(unknown_function(name), rejected=True)
            else:
                domain = self.domain if self.unknown_domain is None else self.unknown_domain
                got = Reading({"status": "ok"}, (NativeAction(domain, name, args),))
        self.flags.extend(got.flags)
        self.executed.extend(got.actions)
        text = _text(got.payload)
        if got.rejected:
            self.n_rejected += 1
            return text, Decoded(call, Outcome.REJECTION, message=text, reply=got.payload)
        if got.actions:
            return text, Decoded(call, Outcome.NATIVE, actions=got.actions)
        return text, Decoded(call, Outcome.REPLY, reply=got.payload)

    def finish(self) -> list[tuple[str, Any]]:
        """The episode's flags, then those the reader raises at the end (transactions never committed)."""
        self.flags.extend(self.reader.finish())
        return list(self.flags)


def check_paper_catalog(catalog: Catalog) -> None:
    """Refuse a catalog whose tasks run in an environment of their own (BFCL multi-turn, MCP): the
    paper's protocol plays the state engine's catalogs (the artifact's, the builtin one), and tau2's
    under the artifact's tau2 adapter (:mod:`toolbias.study.paper_seam`; not checked here)."""
    from .env import Environment, environment_kind

    if environment_kind(catalog) is not Environment:
        raise ProtocolNotImplemented(
            what=f"--protocol paper does not reproduce the artifact's adapter for catalog '{catalog.name}' yet "
                 "(it runs its own environment)", where="--catalog",
            fix="run the paper's protocol on the artifact's catalog (toolschemaspace:DIR) or the builtin one")


__all__ = ["CallMapReader", "Dispatch", "PaperCallMap", "PaperEnv", "Plain", "Reader", "Reading", "SurfaceReader", "check_paper_catalog"]
