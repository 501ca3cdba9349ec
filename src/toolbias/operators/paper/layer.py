"""The ``paper`` operator: a schema exactly as the schema-bias paper's artifact renders it.

One step builds one of the artifact's constructions (see :mod:`._build`) on the native catalog:

* ``{"op": "paper", "build": "ladder", "k": K}``: the merge/split ladder (0 fully merged, 5
  native, 9 fully split; 1-4 and 6-8 the partial steps);
* ``{"op": "paper", "build": "ops", "file": "pred.json"}`` (or ``"ops": [...]`` inline): one of
  the artifact's spec files, read from the catalog's ``specs/`` folder (the ``toolschemaspace``
  catalog kind records it);
* ``{"op": "paper", "build": "hierarchy", "arm": "dispatch"}``: a whole-catalog arm (``flat``,
  ``qualified``, ``dispatch``, ``disclose``), classes = domains;
* ``{"op": "paper", "build": "groups", "file": "class_neutral.json"}`` (or ``"groups": [...]``):
  a whole-catalog grouping file (Table 8).

``markers``: ``drop`` (default for ``ladder`` and ``ops``, as the artifact's agentic runner sends
tools) or ``keep`` (default for the whole-catalog arms, as their runners send them) the
``optional: true`` markers of flat dispatcher arguments.

Decoding is the artifact's under hard control (its ``SimEnv`` / ``HierEnv``): a dispatcher call
whose operation or arguments do not belong together, and a call outside a split tool's interval,
are rejected with the artifact's error text; resolvers answer from their fixed table (exact,
then close matches, else candidates); transactions open, set, commit and roll back as there;
``list_methods`` answers with a class's native schemas. Replies carry the artifact's JSON objects
and a rejection its error object (``Reject.reply``); flags carry the artifact's flag name first
in their detail (``"dangling_txn: txn_1:set_window"``).
"""

from __future__ import annotations

import difflib
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ...base.jsonfile import read_json
from ...catalog.model import Catalog, Tool
from ...errors import VariantError
from ..base import ALL_DOMAINS, Call, Flag, FlagKind, Forward, Layer, Reject, RejectionKind, Reply, Step
from ._build import (
    HIERARCHY_ARMS,
    Recipe,
    Route,
    Surface,
    class_groups,
    compile_ops,
    hierarchy,
    ladder,
    native_shape,
)
from ._shapes import handle, in_interval, suffix_token, without_markers

BUILDS = ("ladder", "ops", "hierarchy", "groups")
#: the reply to ``begin_<f>``
BEGIN_STATUS = "transaction open; set arguments then commit"
SET_HINT = "begin a transaction first and use its txn_id"
TXN_PREFIX = "txn_"


def _flag(kind: FlagKind, name: str, detail: str) -> Flag:
    return Flag(kind, f"{name}: {detail}")


def _error(kind: RejectionKind, message: str, flags: tuple[Flag, ...] = (), **extra: Any) -> Reject:
    return Reject(kind, message, flags, {"error": message, **extra})


def _hashable(value: Any) -> bool:
    return isinstance(value, Hashable)


class _Session:
    """One episode's transactions (the artifact numbers them ``txn_1``, ``txn_2`` ... per episode)."""

    def __init__(self) -> None:
        self.opened = 0
        self.txns: dict[str, dict[str, Any]] = {}


class PaperSurface(Layer):
    op = "paper"
    PARAMS = ("build", "k", "file", "ops", "arm", "groups", "markers")
    protocol = True  # answers resolver / transaction / discovery calls itself: the last step
    validates = False  # the artifact checks dispatchers and intervals only (its nested schema is unsound)
    long_names = True  # fully split names run to 80 characters there

    def value_domains(self) -> Mapping[str, Mapping[str, Sequence[Any]]]:
        """A referenced argument can only take its resolver table's values."""
        out: dict[str, dict[str, list[Any]]] = {}
        for route in self._routes.values():
            if route.kind == "resolver":
                out.setdefault(f"{route.domain}::{route.op}", {})[route.param] = list(route.table.values())
        return out
    LENIENT = "nothing beyond the artifact's own forms (its loose control executes unknown names as native)"

    def __init__(self, inner: Sequence[Tool], params: Mapping[str, Any]) -> None:
        super().__init__(inner, params)
        build = str(params.get("build", ""))
        if build not in BUILDS:
            raise VariantError(f"unknown paper build '{build}'", where="paper step", fix=f"use one of: {', '.join(BUILDS)}")
        where = f"paper {build} {params.get('file') or params.get('arm') or params.get('k', '')}".strip()
        by_domain: dict[str, list[Tool]] = {}
        for t in self.inner:
            by_domain.setdefault(t.domain, []).append(t)
        pairs = [(t.domain, native_shape(t)) for t in self.inner]
        surfaces: list[tuple[str, Surface]] = []
        if build == "ladder":
            k = params.get("k")
            if not isinstance(k, int) or not 0 <= k <= 9:
                raise VariantError("the ladder step needs 'k', an integer 0-9", where=where, fix='write "k": 0')
            surfaces = [(d, ladder(d, [native_shape(t) for t in ts], k)) for d, ts in by_domain.items()]
        elif build == "ops":
            ops = params.get("ops")
            if not isinstance(ops, list):
                raise VariantError("the ops step needs 'ops' (a spec file's list) or 'file'", where=where,
                                   fix='write "file": "pred.json" and build on the toolschemaspace catalog')
            surfaces = [(d, compile_ops(d, [native_shape(t) for t in ts], ops, where)) for d, ts in by_domain.items()]
        elif build == "hierarchy":
            arm = str(params.get("arm", ""))
            if arm not in HIERARCHY_ARMS:
                raise VariantError(f"unknown hierarchy arm '{arm}'", where=where, fix=f"use one of: {', '.join(HIERARCHY_ARMS)}")
            surfaces = [(ALL_DOMAINS, hierarchy(pairs, arm))]
        else:
            groups = params.get("groups")
            if not isinstance(groups, list):
                raise VariantError("the groups step needs 'groups' (a grouping file's list) or 'file'", where=where,
                                   fix='write "file": "class_neutral.json" and build on the toolschemaspace catalog')
            surfaces = [(ALL_DOMAINS, class_groups(pairs, groups, where))]
        markers = str(params.get("markers", "drop" if build in ("ladder", "ops") else "keep"))
        if markers not in ("drop", "keep"):
            raise VariantError(f"unknown markers '{markers}'", where=where, fix="use drop or keep")
        self._routes: dict[tuple[str, str], Route] = {}
        self._recipes: dict[str, Recipe] = {}
        self._disclose = build == "hierarchy" and params.get("arm") == "disclose"
        tools = []
        for domain, surface in surfaces:
            for s, route in surface.tools:
                if markers == "drop":
                    s = without_markers(s)
                key = (domain, str(s["name"]))
                if key in self._routes:
                    raise VariantError(f"two tools named '{key[1]}' in {domain}", where=where,
                                       fix="check the spec file's renames and dispatcher names")
                self._routes[key] = route
                tools.append(Tool(name=str(s["name"]), description=str(s["description"]), parameters=s["parameters"],
                                  domain=domain, cls=route.domain or domain))
            self._recipes.update(surface.recipes)
        self.tools = tuple(tools)

    @classmethod
    def prepare(cls, params: Mapping[str, Any], catalog: Catalog) -> dict[str, Any]:
        """Read a ``file`` from the catalog's ``specs/`` folder into ``ops`` / ``groups``."""
        out = dict(params)
        name = out.pop("file", None)
        if name is None:
            return out
        folder = catalog.meta.get("specs_dir")
        if not folder:
            raise VariantError(f"the paper's spec file '{name}' needs the artifact's specs/ folder",
                               where=catalog.name,
                               fix="build on the artifact's catalog (--catalog toolschemaspace:DIR, DIR/specs/)")
        data = read_json(Path(str(folder)) / str(name), error=VariantError,
                         missing_fix="use the artifact's data folder (its specs/ holds every spec file)")
        key = "groups" if out.get("build") == "groups" else "ops"
        if not isinstance(data, Mapping) or not isinstance(data.get(key), list):
            raise VariantError(f"'{name}' has no '{key}' list", where=str(Path(str(folder)) / str(name)),
                               fix=f"name a spec file with '{key}'")
        out[key] = data[key]
        return out

    # -- encoding (the artifact's oracle) ---------------------------------------------------
    def new_encode_state(self) -> Any:
        return {"txn": 0, "listed": False}

    def encode(self, call: Call, domain: str, state: Any) -> list[Call]:
        recipe = self._recipes.get(f"{domain}::{call.name}")
        if recipe is None:
            return [call]
        args = dict(call.arguments)
        if recipe.kind == "merged":
            if recipe.encoding == "nested":
                return [Call(recipe.entry, {"operation": call.name, "arguments": args})]
            if recipe.encoding == "union":
                return [Call(recipe.entry, {call.name: args})]
            return [Call(recipe.entry, {"operation": call.name, **{f"{call.name}::{k}": v for k, v in args.items()}})]
        if recipe.kind == "invoke":
            out = [] if state["listed"] else [Call("list_methods", {"class": recipe.cls})]
            state["listed"] = True
            return [*out, Call("invoke", {"class": recipe.cls, "method": call.name, "arguments": args})]
        out = []
        for p, (ref, resolver) in recipe.refs.items():
            if p in args:
                raw = args.pop(p)
                out.append(Call(resolver, {"query": str(raw)}))
                args[ref] = handle(call.name, p, raw)
        if recipe.kind == "curry":
            state["txn"] += 1
            tid = f"{TXN_PREFIX}{state['txn']}"
            out.append(Call(f"begin_{recipe.base}", {}))
            out.extend(Call(f"set_{recipe.base}__{k}", {"txn_id": tid, k: v}) for k, v in args.items())
            out.append(Call(f"commit_{recipe.base}", {"txn_id": tid}))
            return out
        name = recipe.base
        for p in recipe.baked:
            name += f"__{p}_{suffix_token(args.pop(p))}"
        for p, grid in recipe.preds.items():
            label = next((lab for lab, lo, hi in grid if in_interval(args.get(p), lo, hi)), None)
            if label is None:
                raise VariantError(f"{call.name}.{p}={args.get(p)!r} is outside the interval split's ranges")
            name += f"__{p}_{label}"
        for into, inner in recipe.pack.items():
            group = {p: args.pop(p) for p in inner if p in args}
            if group:
                args[into] = group
        out.append(Call(name, args))
        return out

    # -- decoding (the artifact's hard control) -------------------------------------------------
    def new_state(self) -> Any:
        return _Session()

    def decode(self, call: Call, tool: Tool, state: Any) -> Step:
        route = self._routes[(tool.domain, tool.name)]
        args = dict(call.arguments)
        kind = route.kind
        if kind == "named":
            return self._named(call.name, route, args)
        if kind == "execute":
            return self._execute(tool.name, route, args)
        if kind == "resolver":
            return Reply(_resolve(route, args))
        if kind in ("begin", "set", "commit"):
            return self._transaction(call.name, route, args, state)
        return self._discovery(route, args)

    def _target(self, route: Route, op: str, domain: str | None = None) -> str:
        return f"{domain or route.domain}::{op}"

    def _named(self, name: str, route: Route, args: dict[str, Any]) -> Step:
        for p, lo, hi in route.preds:
            if not in_interval(args.get(p), lo, hi):
                low = "-inf" if lo is None else lo
                high = "inf" if hi is None else hi
                return _error(RejectionKind.INVALID_ARGUMENTS,
                              f"`{name}` only handles {p} in [{low}, {high}); got {args.get(p)!r}. "
                              "Call the right variant.")
        flags: list[Flag] = []
        native = dict(route.fixed)
        native.update(_unpack(route, args, flags))
        return Forward((Call(self._target(route, route.op), native),), flags=tuple(flags))

    def _execute(self, name: str, route: Route, args: dict[str, Any]) -> Step:
        problem = merged_problem(route, args)
        if problem is not None:
            return _error(RejectionKind.INVALID_ARGUMENTS, problem)
        op, native = merged_call(route, args)
        domain = route.owners.get(op) if route.owners else None
        return Forward((Call(self._target(route, str(op), domain), native),), route=name,
                       classes=(domain or route.domain,))

    def _transaction(self, name: str, route: Route, args: dict[str, Any], state: _Session) -> Step:
        if route.kind == "begin":
            state.opened += 1
            opened = f"{TXN_PREFIX}{state.opened}"
            state.txns[opened] = {"op": route.op, "args": {}, "done": False}
            return Reply({"txn_id": opened, "status": BEGIN_STATUS})
        tid: Any = args.pop("txn_id", None) if route.kind == "set" else args.get("txn_id")
        if route.kind == "set":
            txn = state.txns.get(tid) if _hashable(tid) else None
            if txn is None or txn["op"] != route.op:
                detail = f"{name}({tid})"
                return _error(RejectionKind.PROTOCOL, detail, (_flag(FlagKind.UNKNOWN_HANDLE, "set_unknown_txn", detail),),
                              hint=SET_HINT)
            if txn["done"]:
                detail = f"{name}({tid})"
                return _error(RejectionKind.PROTOCOL, detail,
                              (_flag(FlagKind.WRITE_AFTER_COMMIT, "set_after_commit", detail),), hint=SET_HINT)
            flags: list[Flag] = []
            txn["args"].update(_resolved(route, args, flags))
            if flags:  # an unknown handle: stored as unresolved, and the call is refused
                return _error(RejectionKind.PROTOCOL, flags[-1].detail.partition(": ")[2], tuple(flags), hint=SET_HINT)
            return Reply({"status": "set"})
        txn = state.txns.get(tid) if _hashable(tid) else None
        if txn is None or txn["op"] != route.op:
            detail = f"{name}({tid})"
            return _error(RejectionKind.PROTOCOL, detail, (_flag(FlagKind.UNKNOWN_HANDLE, "commit_unknown_txn", detail),))
        if txn["done"]:
            detail = f"{name}({tid})"
            return _error(RejectionKind.PROTOCOL, detail, (_flag(FlagKind.DOUBLE_COMMIT, "double_commit", detail),))
        missing = [r for r in route.required if r not in txn["args"]]
        if missing:  # hard control rolls the commit back
            flag = _flag(FlagKind.COMMIT_MISSING_WRITES, "commit_missing_required", f"{tid}:{missing}")
            return _error(RejectionKind.PROTOCOL, f"cannot commit: missing required arguments {missing}", (flag,))
        txn["done"] = True
        return Forward((Call(self._target(route, route.op), dict(txn["args"])),))

    def _discovery(self, route: Route, args: dict[str, Any]) -> Step:
        cls: Any = args.get("class")
        known = route.classes.get(cls) if _hashable(cls) else None
        if known is None:
            return _error(RejectionKind.PROTOCOL, f"unknown class {cls!r}; classes: {sorted(route.classes)}")
        if route.kind == "list":
            return Reply({"class": cls, "methods": known})
        method = args.get("method")
        if method not in known:
            return _error(RejectionKind.PROTOCOL, f"class `{cls}` has no method {method!r}; call list_methods first. "
                                                  f"Methods: {known}")
        arguments = args.get("arguments")
        return Forward((Call(f"{cls}::{method}", dict(arguments) if isinstance(arguments, dict) else {}),),
                       route="invoke", classes=(str(cls),))

    def finish(self, state: Any) -> list[Flag]:
        return [_flag(FlagKind.UNCOMMITTED_HANDLE, "dangling_txn", f"{tid}:{t['op']}")
                for tid, t in state.txns.items() if not t["done"]]


# -- the artifact's decoding rules (pure functions of a route and arguments) ------------------

def _resolved(route: Route, args: Mapping[str, Any], flags: list[Flag]) -> dict[str, Any]:
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
            flags.append(_flag(FlagKind.BAD_REFERENCE, "bad_handle", f"{k}={v!r}"))
            out[param] = f"<UNRESOLVED:{v}>"
    return out


def _unpack(route: Route, args: Mapping[str, Any], flags: list[Flag]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in _resolved(route, args, flags).items():
        if k in route.pack and isinstance(v, dict):
            out.update(v)
        else:
            out[k] = v
    return out


def _present(value: Any) -> bool:
    return isinstance(value, dict) and len(value) > 0


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
    if not _hashable(op) or op not in ops:
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
    """The native operation and arguments a dispatcher call stands for."""
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


def _resolve(route: Route, args: Mapping[str, Any]) -> dict[str, Any]:
    """A resolver's answer: the handle of the value the query names (case-insensitive), else of
    its one close match (or a close match of ratio 0.85 or more), else up to three candidates."""
    query = str(args.get("query", "")).strip().lower()
    by_value = {str(v).lower(): h for h, v in route.table.items()}
    if query in by_value:
        return {"handle": by_value[query]}
    close = difflib.get_close_matches(query, list(by_value), n=3, cutoff=0.6)
    if close and (len(close) == 1 or difflib.SequenceMatcher(None, query, close[0]).ratio() >= 0.85):
        return {"handle": by_value[close[0]], "matched": route.table[by_value[close[0]]]}
    if close:
        return {"error": "ambiguous or no exact match", "candidates": [route.table[by_value[c]] for c in close]}
    return {"error": f"no {route.param} matching {str(args.get('query', '')).strip()!r}"}


__all__ = ["BUILDS", "PaperSurface", "merged_call", "merged_problem"]
