"""How the artifact's environments answer a call of one of its tools, under hard or loose control.

:func:`answer` is the artifact's ``SimEnv.call`` (the agentic and class-grouping runners) and
``HierEnv.call`` (the hierarchy runner) for a tool the variant exposes: the JSON object the model
reads, the native actions it executed, whether it counts as a rejection, and the flags its
decoder raised, each as the artifact words them. A name the variant lacks is the caller's
(``{"error": "Unknown function ..."}`` under hard control, executed as native under loose).
"""

from __future__ import annotations

import difflib
from collections.abc import Hashable, Mapping
from typing import Any, NamedTuple

from ._build import Route
from ._shapes import in_interval

#: the reply to ``begin_<f>``, the hint of a refused ``set_<f>__<p>``, the handle prefix
BEGIN_STATUS = "transaction open; set arguments then commit"
SET_HINT = "begin a transaction first and use its txn_id"
TXN_PREFIX = "txn_"


class Action(NamedTuple):
    """One executed native action: its domain ("" where the artifact names no class), tool, arguments."""

    domain: str
    tool: str
    arguments: dict[str, Any]


class Answer(NamedTuple):
    """The artifact's answer to one call."""

    payload: dict[str, Any]
    actions: tuple[Action, ...] = ()
    rejected: bool = False
    #: (the artifact's flag name, its detail: a string, or the operation a bad_operation named)
    flags: tuple[tuple[str, Any], ...] = ()


class Transactions:
    """One episode's transactions (``txn_1``, ``txn_2`` ... in the order they were begun)."""

    def __init__(self) -> None:
        self.opened = 0
        self.txns: dict[str, dict[str, Any]] = {}

    def dangling(self) -> list[tuple[str, str]]:
        return [("dangling_txn", f"{tid}:{t['op']}") for tid, t in self.txns.items() if not t["done"]]


def _hashable(value: Any) -> bool:
    return isinstance(value, Hashable)


def _error(message: str, flags: list[tuple[str, Any]] | None = None, **extra: Any) -> Answer:
    return Answer({"error": message, **extra}, rejected=True, flags=tuple(flags or ()))


def answer(route: Route, name: str, args: Mapping[str, Any], state: Transactions, *, loose: bool,
           hierarchy: bool) -> Answer:
    """The artifact's answer to ``name(args)``, a tool of the variant (``route``); ``hierarchy``:
    the hierarchy runner's environment (``HierEnv``), else ``SimEnv``."""
    args = dict(args)
    kind = route.kind
    if kind == "resolver":
        return Answer(_resolve(route, args))
    if kind in ("begin", "set", "commit"):
        return _transaction(route, name, args, state, loose)
    if kind in ("list", "invoke"):
        return _discovery(route, args, loose)
    if kind == "execute":
        return _hier_execute(route, args, loose) if hierarchy else _execute(route, args, loose)
    return _named(route, name, args, loose, hierarchy)


def _named(route: Route, name: str, args: dict[str, Any], loose: bool, hierarchy: bool) -> Answer:
    flags: list[tuple[str, Any]] = []
    for p, lo, hi in route.preds:
        if not in_interval(args.get(p), lo, hi):
            if not loose:
                low = "-inf" if lo is None else lo
                high = "inf" if hi is None else hi
                return _error(f"`{name}` only handles {p} in [{low}, {high}); got {args.get(p)!r}. "
                              "Call the right variant.")
            flags.append(("pred_mismatch", f"{name}({p}={args.get(p)!r})"))
    native = dict(route.fixed)
    native.update(_unpack(route, args, flags))
    return Answer({"status": "ok", "executed": route.op}, (Action(route.domain, route.op, native),), flags=tuple(flags))


def classify(route: Route | None, name: str, args: Mapping[str, Any], *, hard: bool
             ) -> tuple[str, Any, dict[str, Any]]:
    """The artifact's reading of one call of a stateless surface without running it (its
    ``schema_adapter.classify_call``, which its proxy and its tau2 adapter share): ``(action,
    native name, native arguments)``, ``action`` one of ``"exec"``, ``"reject"`` (hard control
    only: a name the variant lacks, a dispatcher call :func:`merged_problem` refuses, a split
    tool's value outside its interval) or ``"meta"`` (a resolver, ``begin`` or ``set`` step, named
    as called; a ``commit`` step, named by its native tool). A name the variant lacks (``route``
    None) runs as called under loose control; a dispatcher call naming no operation has native
    name None."""
    args = dict(args)
    if route is None:
        return ("reject" if hard else "exec"), name, args
    if route.kind in ("resolver", "begin", "set", "commit"):
        return "meta", route.op if route.kind == "commit" else name, args
    if route.kind == "execute":
        if hard and merged_problem(route, args) is not None:
            return "reject", name, args
        op, native = merged_call(route, args)
        return "exec", op, native
    if hard and not all(in_interval(args.get(p), lo, hi) for p, lo, hi in route.preds):
        return "reject", route.op, args
    native = dict(route.fixed)
    for k, v in args.items():
        if k in route.pack and isinstance(v, dict):
            native.update(v)
        else:
            native[k] = v
    return "exec", route.op, native


def merged_problem(route: Route, args: Mapping[str, Any]) -> str | None:
    """The artifact's hard-control check of a dispatcher call (None: accepted)."""
    ops = route.ops
    if route.encoding == "union":
        present = [k for k, v in args.items() if _present(v)]
        extra = [k for k, v in args.items() if k not in ops and v not in ("", None, {})]
        if extra:
            return f"unknown union keys {extra}"
        if not present:
            return "expected exactly one operation object; got none"
        if len(present) > 1:
            return f"expected exactly one operation object; got {present}"
        unknown = [k for k in args[present[0]] if k not in route.op_params.get(present[0], [])]
        return f"arguments {unknown} do not belong to `{present[0]}`" if unknown else None
    op = args.get("operation")
    if op not in ops:
        return f"operation must be one of {ops}"
    if route.encoding == "nested":
        payload = args.get("arguments")
        if not isinstance(payload, dict):
            return "`arguments` must be an object"
        unknown = [k for k in payload if k not in route.op_params.get(op, [])]
        if unknown:
            return f"arguments {unknown} do not belong to `{op}`"
        extra = [k for k in args if k not in ("operation", "arguments")]
        if extra:
            return f"unexpected top-level keys {extra}"
    return None


def merged_call(route: Route, args: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The native operation (None: none) and arguments a dispatcher call stands for."""
    if route.encoding == "nested":
        payload = args.get("arguments")
        return args.get("operation"), dict(payload) if isinstance(payload, dict) else {}
    if route.encoding == "union":
        present = [k for k, v in args.items() if _present(v)]
        return (present[0], dict(args[present[0]])) if len(present) == 1 else (None, {})
    native = {}
    for k, v in args.items():
        if k != "operation" and v not in ("", None):
            native[k.split("::", 1)[1] if "::" in k else k] = v
    return args.get("operation"), native


def _owner(route: Route, op: Any) -> str:
    if route.owners:
        return route.owners.get(op, "") if _hashable(op) else ""
    return route.domain


def _execute(route: Route, args: dict[str, Any], loose: bool) -> Answer:
    problem = merged_problem(route, args)
    flags: list[tuple[str, Any]] = []
    if problem is not None:
        if not loose:
            return _error(problem)
        flags.append(("bad_execute", problem))
    op, native = merged_call(route, args)
    if op not in route.ops:
        flags.append(("bad_operation", op))
    if op is None:
        return Answer({"error": "call could not be executed"}, rejected=True, flags=tuple(flags))
    return Answer({"status": "ok", "executed": op}, (Action(_owner(route, op), str(op), native),), flags=tuple(flags))


def _hier_execute(route: Route, args: dict[str, Any], loose: bool) -> Answer:
    op = args.pop("operation", None)
    if op not in route.ops:
        if not loose:
            return _error(f"operation must be one of {route.ops}")
        op = op or "<missing_operation>"
    native = {(k.split("::", 1)[1] if "::" in k else k): v for k, v in args.items() if v not in ("", None)}
    return Answer({"status": "ok", "executed": op}, (Action(route.domain, str(op), native),))


def _transaction(route: Route, name: str, args: dict[str, Any], state: Transactions, loose: bool) -> Answer:
    if route.kind == "begin":
        state.opened += 1
        opened = f"{TXN_PREFIX}{state.opened}"
        state.txns[opened] = {"op": route.op, "args": {}, "done": False}
        return Answer({"txn_id": opened, "status": BEGIN_STATUS})
    tid: Any = args.pop("txn_id", None) if route.kind == "set" else args.get("txn_id")
    txn = state.txns.get(tid) if _hashable(tid) else None
    detail = f"{name}({tid})"
    if route.kind == "set":
        if txn is None or txn["op"] != route.op:
            return _error(detail, [("set_unknown_txn", detail)], hint=SET_HINT)
        if txn["done"]:
            return _error(detail, [("set_after_commit", detail)], hint=SET_HINT)
        flags: list[tuple[str, Any]] = []
        txn["args"].update(_resolved(route, args, flags))
        if flags:  # an unknown handle: stored unresolved, and the call refused
            return _error(flags[-1][1], flags, hint=SET_HINT)
        return Answer({"status": "set"})
    if txn is None or txn["op"] != route.op:
        return _error(detail, [("commit_unknown_txn", detail)])
    if txn["done"]:
        return _error(detail, [("double_commit", detail)])
    missing = [r for r in route.required if r not in txn["args"]]
    flag = [("commit_missing_required", f"{tid}:{missing}")] if missing else []
    if missing and not loose:  # hard control rolls the commit back
        return _error(f"cannot commit: missing required arguments {missing}", flag)
    txn["done"] = True
    return Answer({"status": "committed"}, (Action(route.domain, route.op, dict(txn["args"])),), flags=tuple(flag))


def _discovery(route: Route, args: dict[str, Any], loose: bool) -> Answer:
    cls: Any = args.get("class")
    known = route.classes.get(cls) if _hashable(cls) else None
    if route.kind == "list" or (known is None and not loose):
        if known is None:
            return _error(f"unknown class {cls!r}; classes: {sorted(route.classes)}")
        return Answer({"class": cls, "methods": known})
    method = args.get("method")
    if not loose and method not in (known or []):
        return _error(f"class `{cls}` has no method {method!r}; call list_methods first. Methods: {known}")
    arguments = args.get("arguments")
    return Answer({"status": "ok", "executed": method},
                  (Action(str(cls), str(method), dict(arguments) if isinstance(arguments, dict) else {}),))


def _resolved(route: Route, args: Mapping[str, Any], flags: list[tuple[str, Any]]) -> dict[str, Any]:
    """Handles swapped for their values; an unknown handle stays as ``<UNRESOLVED:...>``, flagged."""
    out: dict[str, Any] = {}
    for k, v in args.items():
        ref = route.refs.get(k)
        if ref is None:
            out[k] = v
            continue
        param, table = ref
        if _hashable(v) and v in table:
            out[param] = table[v]
        else:
            flags.append(("bad_handle", f"{k}={v!r}"))
            out[param] = f"<UNRESOLVED:{v}>"
    return out


def _unpack(route: Route, args: Mapping[str, Any], flags: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in _resolved(route, args, flags).items():
        if k in route.pack and isinstance(v, dict):
            out.update(v)
        else:
            out[k] = v
    return out


def _present(value: Any) -> bool:
    return isinstance(value, dict) and len(value) > 0


def _resolve(route: Route, args: Mapping[str, Any]) -> dict[str, Any]:
    """A resolver's answer: the handle of the value the query names (case-insensitive), else of
    its one close match (or a close match of ratio 0.85 or more), else up to three candidates."""
    raw = str(args.get("query", "")).strip()
    query = raw.lower()
    by_value = {str(v).lower(): h for h, v in route.table.items()}
    if query in by_value:
        return {"handle": by_value[query]}
    close = difflib.get_close_matches(query, list(by_value), n=3, cutoff=0.6)
    if close and (len(close) == 1 or difflib.SequenceMatcher(None, query, close[0]).ratio() >= 0.85):
        return {"handle": by_value[close[0]], "matched": route.table[by_value[close[0]]]}
    if close:
        return {"error": "ambiguous or no exact match", "candidates": [route.table[by_value[c]] for c in close]}
    return {"error": f"no {route.param} matching {raw!r}"}


__all__ = ["Action", "Answer", "BEGIN_STATUS", "SET_HINT", "TXN_PREFIX", "Transactions", "answer", "classify", "merged_call",
           "merged_problem"]
