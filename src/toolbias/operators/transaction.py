"""Transaction: one native action becomes ``begin`` -> writes -> ``commit``.

Two methods (step parameter ``method``):

* ``"per_function"`` -- the paper's construction (its ``curry`` op, Figure 2's
  *transaction* row): per wrapped native function ``f``, ``begin_<f>()`` returns a
  transaction id, one ``set_<f>__<arg>(txn_id, <arg>)`` per argument writes it, and
  ``commit_<f>(txn_id)`` executes ``f``. Functions with fewer than ``min_args``
  arguments (default 2: a one-argument function is already its own setter; the
  artifact leaves those native) and functions whose arguments are not a plain
  properties object stay as they are. 168 native functions of the artifact become
  727 (3 kept + 165 x (begin + commit) + 394 setters).
* ``"shared"`` (default, toolbias's own design, kept for old variant files) -- described
  below.

``begin(tool)`` opens a transaction on one operation and returns a handle
(``txn_1``, ``txn_2`` ... numbered per session, so ``encode`` is exact through a
fresh session). ``write_<tool>(handle, ...)`` sets some of the operation's
arguments; ``commit(handle)`` executes the native action.

Write API: one typed write tool per operation, every native argument optional.
Why not one generic ``write(handle, arguments: object)``: its schema could not
type the arguments, so the variant would also hide the argument schemas (that is
the schema-discovery operator, not this one) and the codec could not validate a
write. Why not one setter per argument: the tool list would grow to the number of
parameters (about 2.4x native here), confounding the protocol with list length.
A typed write per operation keeps every type, enum and range in front of the agent
and under validation, adds only ``begin`` and ``commit`` per domain, and still lets
an agent write one argument per call: ``encode`` does exactly that
(``writes="per_argument"``, the default; ``"single"`` writes all in one call).

Flags (:class:`FlagKind`): a write or commit naming a handle never opened
(``unknown_handle``), a write after commit, a second commit, a commit before all
required arguments were written (the handle stays open, so the agent can finish
the writes), and handles never committed at episode end (``finish``).

The module also holds small helpers the other cross-call protocols share:
tool scopes (a domain or :data:`ALL_DOMAINS`), an index that looks inner tools up
like the codec does (outer names come from :class:`toolbias.base.names.NameAllocator`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..base.names import NameAllocator
from ..catalog.model import Tool
from ..errors import VariantError
from .base import ALL_DOMAINS, Call, Flag, FlagKind, Forward, Layer, Reject, RejectionKind, Reply, Step

# -- helpers shared by the protocol layers ------------------------------------------



class InnerIndex:
    """Inner tools looked up the way the codec does (own domain, then catalog scope, or a uid)."""

    def __init__(self, tools: Sequence[Tool]) -> None:
        self.by_key: dict[tuple[str, str], Tool] = {}
        for t in tools:
            self.by_key.setdefault((t.domain, t.name), t)

    def lookup(self, domain: str, name: str) -> Tool | None:
        if "::" in name:
            d, _, n = name.partition("::")
            return self.by_key.get((d, n))
        return self.by_key.get((domain, name)) or self.by_key.get((ALL_DOMAINS, name))


def scopes(tools: Sequence[Tool]) -> list[str]:
    """The distinct ``Tool.domain`` values, in first-seen order."""
    seen: dict[str, None] = {}
    for t in tools:
        seen.setdefault(t.domain, None)
    return list(seen)


def visible_in(scope: str, tools: Sequence[Tool]) -> list[Tool]:
    """Tools an agent working in ``scope`` can call (a domain sees catalog-scope tools too);
    a name is served by the domain's own tool first, as in the codec."""
    if scope == ALL_DOMAINS:
        return [t for t in tools if t.domain == ALL_DOMAINS]
    own = [t for t in tools if t.domain == scope]
    names = {t.name for t in own}
    return own + [t for t in tools if t.domain == ALL_DOMAINS and t.name not in names]


def select_tools(layer: Layer, inner: Sequence[Tool], key: str = "tools") -> set[str]:
    """uids of the inner tools a step applies to: ``"all"`` (default) or names / ``domain::name`` uids."""
    chosen = layer.params.get(key, "all")
    if chosen == "all" or chosen is None:
        return {t.uid for t in inner}
    if isinstance(chosen, str) or not isinstance(chosen, Sequence):
        raise VariantError(f"'{key}' must be \"all\" or a list of tool names", where=f"operator '{layer.op}'")
    wanted = {str(x) for x in chosen}
    out = {t.uid for t in inner if t.name in wanted or t.uid in wanted}
    known = {t.name for t in inner} | {t.uid for t in inner}
    missing = sorted(wanted - known)
    if missing:
        raise VariantError(f"'{key}' names unknown tool(s): {', '.join(missing[:10])}",
                           where=f"operator '{layer.op}'", fix="use names of the schema this step applies to")
    return out


def object_schema(properties: Mapping[str, Any], required: Sequence[str] = (), **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": dict(properties), "required": list(required)}
    out.update(extra)
    return out


def has_plain_properties(tool: Tool) -> bool:
    """True when a tool's parameters are a plain properties object (no top-level combinators)."""
    extra = set(tool.parameters) - {"type", "properties", "required", "additionalProperties", "description",
                                    "title"}
    return not extra


# -- the transaction layer ------------------------------------------------------------

@dataclass
class _Txn:
    tool: Tool            # the inner tool the transaction executes
    write: str            # uid of the outer write tool that belongs to it
    args: dict[str, Any] = field(default_factory=dict)
    committed: bool = False


@dataclass
class _TxnState:
    counter: int = 0
    open: dict[str, _Txn] = field(default_factory=dict)


class Transaction(Layer):
    """``begin(tool)`` -> handle, ``write_<tool>(handle, ...)``, ``commit(handle)``.

    Params: ``tools`` (``"all"`` or names/uids of the inner tools to wrap, others pass
    through), ``writes`` (``"per_argument"`` or ``"single"``: how ``encode`` writes).
    """

    op = "transaction"
    PARAMS = ("method", "tools", "writes", "min_args")
    METHODS = ("shared", "per_function")
    LENIENT = ("nothing beyond the native call itself: a begin, write or commit out of order names no complete "
               "native action (a commit lacking required arguments stays rejected)")
    protocol: ClassVar[bool] = True
    instruction = ("Every action runs as a transaction. Call begin with the operation you need to get a "
                   "handle, set the operation's arguments with write_<operation> (pass the handle; one or "
                   "several arguments per call), then call commit with the handle to execute it. Commit each "
                   "transaction exactly once, after writing all required arguments.")

    def __init__(self, inner: Sequence[Tool], params: Mapping[str, Any]) -> None:
        super().__init__(inner, params)
        self.method = self.chosen_method(self.params)
        self._pf: PerFunction | None = None
        if self.method == "per_function":
            if "writes" in self.params:
                raise VariantError("'writes' applies to method 'shared' only (per_function sets one argument "
                                   "per call)", where="operator 'transaction'", fix="drop 'writes'")
            self._pf = PerFunction(self.inner, select_tools(self, self.inner), self._min_args())
            self.tools = self._pf.tools
            self.instruction = PerFunction.instruction
            return
        if "min_args" in self.params:
            raise VariantError("'min_args' applies to method 'per_function' only", where="operator 'transaction'",
                               fix="drop 'min_args', or set method: per_function")
        self.writes = str(self.params.get("writes", "per_argument"))
        if self.writes not in ("per_argument", "single"):
            raise VariantError(f"writes must be 'per_argument' or 'single', got {self.writes!r}",
                               where="operator 'transaction'")
        chosen = select_tools(self, self.inner)
        self._index = InnerIndex(self.inner)
        wrapped = [t for t in self.inner if t.uid in chosen]
        self.handle_key = next(k for k in ("handle", "txn_handle", "transaction_handle", "_handle")
                               if all(k not in t.properties for t in wrapped))
        names = NameAllocator()
        for t in self.inner:
            if t.uid not in chosen:
                names.add(t.domain, t.name)  # pass-through tools keep their names
        #: outer uid -> role
        self._begin: dict[str, dict[str, Tool]] = {}   # begin uid -> {operation name: inner tool}
        self._commit: set[str] = set()
        self._write: dict[str, Tool] = {}               # write uid -> inner tool
        self._whole: set[str] = set()                   # write uids taking one 'arguments' object
        self._write_of: dict[str, Tool] = {}            # inner uid -> outer write tool
        self._begin_for: dict[str, Tool] = {}           # scope -> begin tool
        self._commit_for: dict[str, Tool] = {}          # scope -> commit tool
        proto: dict[str, list[Tool]] = {}
        hk = self.handle_key
        handle_schema = {"type": "string", "description": "The handle returned by begin."}
        for scope in scopes(self.inner):
            targets = {t.name: t for t in visible_in(scope, wrapped)}
            if not targets:
                continue
            begin = Tool(names.add(scope, "begin"),
                         "Open a transaction for one operation and return its handle. Then write the "
                         "operation's arguments and commit the handle to execute it.",
                         object_schema({"tool": {"type": "string", "enum": list(targets),
                                                 "description": "The operation to run."}}, ["tool"]),
                         domain=scope, cls="transaction")
            commit = Tool(names.add(scope, "commit"),
                          "Execute the operation of an open transaction with the arguments written to it.",
                          object_schema({hk: handle_schema}, [hk]), domain=scope, cls="transaction")
            self._begin[begin.uid] = targets
            self._commit.add(commit.uid)
            self._begin_for[scope] = begin
            self._commit_for[scope] = commit
            proto[scope] = [begin, commit]
        out: list[Tool] = []
        emitted: set[str] = set()
        for t in self.inner:
            if t.domain in proto and t.domain not in emitted:
                emitted.add(t.domain)
                out.extend(proto[t.domain])
            if t.uid not in chosen:
                out.append(t)
                continue
            if has_plain_properties(t):
                props = {hk: handle_schema, **{k: v for k, v in t.properties.items()}}
                extra = {k: v for k, v in t.parameters.items() if k == "additionalProperties"}
                params = object_schema(props, [hk], **extra)
            else:
                params = object_schema({hk: handle_schema, "arguments": dict(t.parameters)}, [hk, "arguments"])
            desc = f"Write arguments of '{t.name}' to an open transaction. {t.description}".strip()
            write = Tool(names.add(t.domain, f"write_{t.name}"), desc, params, domain=t.domain, cls=t.cls)
            if not has_plain_properties(t):
                self._whole.add(write.uid)
            self._write[write.uid] = t
            self._write_of[t.uid] = write
            out.append(write)
        for scope, tools in proto.items():  # scopes whose own tools all come from elsewhere
            if scope not in emitted:
                out.extend(tools)
        self.tools = tuple(out)

    # -- encoding -------------------------------------------------------------------
    def _min_args(self) -> int:
        n = self.params.get("min_args", 2)
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise VariantError(f"'min_args' must be a non-negative integer, got {n!r}", where="operator 'transaction'")
        return n

    def new_encode_state(self) -> Any:
        return _TxnState()

    def encode(self, call: Call, domain: str, state: Any) -> list[Call]:
        if self._pf is not None:
            return self._pf.encode(call, domain, state)
        inner = self._index.lookup(domain, call.name)
        write = self._write_of.get(inner.uid) if inner is not None else None
        if inner is None or write is None:
            return [call]
        scope = domain if domain in self._begin_for else ALL_DOMAINS
        begin, commit = self._begin_for[scope], self._commit_for[scope]
        state.counter += 1
        handle = f"txn_{state.counter}"
        hk = self.handle_key
        out = [Call(begin.name, {"tool": inner.name})]
        args = dict(call.arguments)
        if write.uid in self._whole:
            out.append(Call(write.name, {hk: handle, "arguments": args}))
        elif self.writes == "single":
            if args:
                out.append(Call(write.name, {hk: handle, **args}))
        else:
            out.extend(Call(write.name, {hk: handle, k: v}) for k, v in args.items())
        out.append(Call(commit.name, {hk: handle}))
        return out

    # -- decoding -------------------------------------------------------------------
    def new_state(self) -> Any:
        return _TxnState()

    def decode(self, call: Call, tool: Tool, state: Any) -> Step:
        if self._pf is not None:
            return self._pf.decode(call, tool, state)
        uid = tool.uid
        if uid in self._begin:
            inner = self._begin[uid][call.arguments["tool"]]
            state.counter += 1
            handle = f"txn_{state.counter}"
            write = self._write_of[inner.uid]
            state.open[handle] = _Txn(inner, write.uid)
            return Reply({"handle": handle, "tool": inner.name, "required": list(inner.required),
                          "next": f"write the arguments with {write.name}({self.handle_key}='{handle}', ...), "
                                  f"then commit({self.handle_key}='{handle}')"})
        if uid in self._write:
            return self._decode_write(call, tool, state)
        if uid in self._commit:
            return self._decode_commit(call, state)
        return Forward((call,))

    def _lookup_handle(self, call: Call, state: _TxnState, verb: str) -> _Txn | Reject:
        handle = call.arguments.get(self.handle_key)
        txn = state.open.get(handle) if isinstance(handle, str) else None
        if txn is None:
            opened = ", ".join(h for h, t in state.open.items() if not t.committed) or "none"
            return Reject(RejectionKind.PROTOCOL,
                          f"'{handle}' is not a handle returned by begin, so there is nothing to {verb}. "
                          f"Open handles: {opened}. Call begin(tool=...) first and use the handle it returns.",
                          (Flag(FlagKind.UNKNOWN_HANDLE, f"{call.name}: {handle}"),))
        return txn

    def _decode_write(self, call: Call, tool: Tool, state: _TxnState) -> Step:
        txn = self._lookup_handle(call, state, "write to")
        if isinstance(txn, Reject):
            return txn
        handle = call.arguments[self.handle_key]
        if txn.committed:
            return Reject(RejectionKind.PROTOCOL,
                          f"transaction '{handle}' was already committed; writes after commit are not applied. "
                          f"Begin a new transaction to run '{txn.tool.name}' again.",
                          (Flag(FlagKind.WRITE_AFTER_COMMIT, f"{call.name}: {handle}"),))
        if txn.write != tool.uid:
            owner = self._write_of[txn.tool.uid].name
            return Reject(RejectionKind.PROTOCOL,
                          f"transaction '{handle}' was opened for '{txn.tool.name}'; write its arguments with "
                          f"{owner}, or begin a transaction for '{self._write[tool.uid].name}'.")
        if tool.uid in self._whole:
            txn.args = dict(call.arguments["arguments"])
        else:
            txn.args.update({k: v for k, v in call.arguments.items() if k != self.handle_key})
        missing = [r for r in txn.tool.required if r not in txn.args]
        return Reply({"handle": handle, "written": sorted(txn.args), "missing_required": missing})

    def _decode_commit(self, call: Call, state: _TxnState) -> Step:
        txn = self._lookup_handle(call, state, "commit")
        if isinstance(txn, Reject):
            return txn
        handle = call.arguments[self.handle_key]
        if txn.committed:
            return Reject(RejectionKind.PROTOCOL,
                          f"transaction '{handle}' was already committed; it is not executed twice. Begin a new "
                          f"transaction to run '{txn.tool.name}' again.",
                          (Flag(FlagKind.DOUBLE_COMMIT, f"{call.name}: {handle}"),))
        missing = [r for r in txn.tool.required if r not in txn.args]
        if missing:
            write = self._write_of[txn.tool.uid].name
            return Reject(RejectionKind.PROTOCOL,
                          f"transaction '{handle}' lacks required argument(s) {', '.join(missing)}; write them "
                          f"with {write}({self.handle_key}='{handle}', ...) and commit again.",
                          (Flag(FlagKind.COMMIT_MISSING_WRITES, f"{handle}: {', '.join(missing)}"),))
        txn.committed = True
        return Forward((Call(txn.tool.name, dict(txn.args)),))

    def finish(self, state: Any) -> list[Flag]:
        return [Flag(FlagKind.UNCOMMITTED_HANDLE, f"{h} ({t.tool.name}) was never committed")
                for h, t in state.open.items() if not t.committed]


# -- the paper's construction: begin_<f> / set_<f>__<arg> / commit_<f> -----------------------

@dataclass
class _Roles:
    begin: dict[str, Tool] = field(default_factory=dict)                # outer uid -> inner tool
    setter: dict[str, tuple[Tool, str]] = field(default_factory=dict)   # outer uid -> (inner tool, argument)
    commit: dict[str, Tool] = field(default_factory=dict)               # outer uid -> inner tool
    names: dict[str, tuple[str, dict[str, str], str]] = field(default_factory=dict)  # inner uid -> names


class PerFunction:
    """The ``per_function`` method of :class:`Transaction` (see the module doc)."""

    instruction = ("Every operation with several arguments runs as a transaction: call begin_<operation>() to "
                   "get a txn_id, call set_<operation>__<argument>(txn_id, <argument>) once for each argument, "
                   "then call commit_<operation>(txn_id) to execute it. Commit each transaction exactly once, "
                   "after setting all required arguments.")

    def __init__(self, inner: Sequence[Tool], chosen: set[str], min_args: int) -> None:
        wrapped = [t for t in inner if t.uid in chosen and has_plain_properties(t) and len(t.properties) >= min_args]
        self.wrapped = {t.uid for t in wrapped}
        self.key = next(k for k in ("txn_id", "transaction_id", "txn_handle", "_txn_id")
                        if all(k not in t.properties for t in wrapped))
        self._index = InnerIndex(inner)
        self.roles = _Roles()
        names = NameAllocator()
        for t in inner:
            if t.uid not in self.wrapped:
                names.add(t.domain, t.name)
        id_schema = {"type": "string", "description": "The txn_id returned by begin."}
        out: list[Tool] = []
        for t in inner:
            if t.uid not in self.wrapped:
                out.append(t)
                continue
            begin = Tool(names.add(t.domain, f"begin_{t.name}"),
                         f"Open a transaction for '{t.name}' and return its txn_id. {t.description}".strip(),
                         object_schema({}, []), domain=t.domain, cls=t.cls)
            out.append(begin)
            self.roles.begin[begin.uid] = t
            setters: dict[str, str] = {}
            for arg, schema in t.properties.items():
                desc = schema.get("description", "") if isinstance(schema, Mapping) else ""
                s = Tool(names.add(t.domain, f"set_{t.name}__{arg}"),
                         f"Set '{arg}' of an open '{t.name}' transaction. {desc}".strip(),
                         object_schema({self.key: id_schema, arg: dict(schema)}, [self.key, arg]),
                         domain=t.domain, cls=t.cls)
                out.append(s)
                self.roles.setter[s.uid] = (t, arg)
                setters[arg] = s.name
            commit = Tool(names.add(t.domain, f"commit_{t.name}"),
                          f"Execute the open '{t.name}' transaction with the arguments set on it.",
                          object_schema({self.key: id_schema}, [self.key]), domain=t.domain, cls=t.cls)
            out.append(commit)
            self.roles.commit[commit.uid] = t
            self.roles.names[t.uid] = (begin.name, setters, commit.name)
        self.tools = tuple(out)

    def encode(self, call: Call, domain: str, state: _TxnState) -> list[Call]:
        inner = self._index.lookup(domain, call.name)
        if inner is None or inner.uid not in self.wrapped:
            return [call]
        begin, setters, commit = self.roles.names[inner.uid]
        state.counter += 1
        txn = f"txn_{state.counter}"
        out = [Call(begin, {})]
        out.extend(Call(setters[k], {self.key: txn, k: v}) for k, v in call.arguments.items() if k in setters)
        out.append(Call(commit, {self.key: txn}))
        return out

    def decode(self, call: Call, tool: Tool, state: _TxnState) -> Step:
        uid = tool.uid
        if uid in self.roles.begin:
            inner = self.roles.begin[uid]
            state.counter += 1
            txn = f"txn_{state.counter}"
            state.open[txn] = _Txn(inner, uid)
            _, setters, commit = self.roles.names[inner.uid]
            return Reply({self.key: txn, "function": inner.name,
                          "next": f"set the arguments with {', '.join(setters.values())} "
                                  f"({self.key}='{txn}'), then {commit}({self.key}='{txn}')"})
        if uid in self.roles.setter:
            inner, arg = self.roles.setter[uid]
            got = self._open(call, inner, state, "set an argument of")
            if isinstance(got, Reject):
                return got
            got.args[arg] = call.arguments[arg]
            return Reply({self.key: call.arguments[self.key], "set": arg,
                          "missing_required": [r for r in inner.required if r not in got.args]})
        if uid in self.roles.commit:
            inner = self.roles.commit[uid]
            got = self._open(call, inner, state, "commit")
            if isinstance(got, Reject):
                return got
            txn = call.arguments[self.key]
            missing = [r for r in inner.required if r not in got.args]
            if missing:
                setters = self.roles.names[inner.uid][1]
                return Reject(RejectionKind.PROTOCOL,
                              f"transaction '{txn}' lacks required argument(s) {', '.join(missing)}; set them with "
                              f"{', '.join(setters[m] for m in missing)} and commit again.",
                              (Flag(FlagKind.COMMIT_MISSING_WRITES, f"{txn}: {', '.join(missing)}"),))
            got.committed = True
            return Forward((Call(inner.name, dict(got.args)),))
        return Forward((call,))

    def _open(self, call: Call, inner: Tool, state: _TxnState, verb: str) -> _Txn | Reject:
        txn = call.arguments.get(self.key)
        entry = state.open.get(txn) if isinstance(txn, str) else None
        begin = self.roles.names[inner.uid][0]
        if entry is None:
            return Reject(RejectionKind.PROTOCOL,
                          f"'{txn}' is not a txn_id returned by {begin}, so there is nothing to {verb}. Call "
                          f"{begin}() first and pass the {self.key} it returns.",
                          (Flag(FlagKind.UNKNOWN_HANDLE, f"{call.name}: {txn}"),))
        if entry.tool.uid != inner.uid:
            return Reject(RejectionKind.PROTOCOL,
                          f"transaction '{txn}' was opened for '{entry.tool.name}', not '{inner.name}'; call "
                          f"{begin}() to open a '{inner.name}' transaction.")
        if entry.committed:
            kind = FlagKind.DOUBLE_COMMIT if verb == "commit" else FlagKind.WRITE_AFTER_COMMIT
            return Reject(RejectionKind.PROTOCOL,
                          f"transaction '{txn}' was already committed; call {begin}() to run '{inner.name}' again.",
                          (Flag(kind, f"{call.name}: {txn}"),))
        return entry
