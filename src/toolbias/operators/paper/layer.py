"""The ``paper`` operator: a schema exactly as the schema-bias paper's artifact renders it.

One step builds one of the artifact's constructions (see :mod:`._build`) on the native catalog:

* ``{"op": "paper", "build": "ladder", "k": K}``: the merge/split ladder (0 fully merged, 5
  native, 9 fully split; 1-4 and 6-8 the partial steps); ``{"op": "paper"}`` is its native step;
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

:meth:`PaperSurface.answer` is the artifact's own answer to a call (``SimEnv.call``, or
``HierEnv.call`` for the hierarchy arms) under hard or loose control: the JSON object the model
reads, the native actions run, whether it counts as a rejection, the flags by the artifact's
names (:mod:`._answers`); a paper-protocol environment plays episodes with it.

Decoding (``decode``, the codec's path) is that answer under hard control: a dispatcher call
whose operation or arguments do not belong together, and a call outside a split tool's interval,
are rejected with the artifact's error text; resolvers answer from their fixed table (exact,
then close matches, else candidates); transactions open, set, commit and roll back as there;
``list_methods`` answers with a class's native schemas. Replies carry the artifact's JSON objects
and a rejection its error object (``Reject.reply``); flags carry the artifact's flag name first
in their detail (``"dangling_txn: txn_1:set_window"``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...base.jsonfile import read_json
from ...catalog.model import Catalog, Tool
from ...errors import VariantError
from ..base import ALL_DOMAINS, Call, Flag, FlagKind, Forward, Layer, Reject, RejectionKind, Reply, Step
from ._answers import TXN_PREFIX, Answer, Transactions, answer
from ._build import (
    HIERARCHY_ARMS,
    NATIVE_K,
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
#: the artifact's flags that toolbias's flag kinds name (the rest arise under loose control only)
FLAG_KINDS = {"set_unknown_txn": FlagKind.UNKNOWN_HANDLE, "commit_unknown_txn": FlagKind.UNKNOWN_HANDLE,
              "set_after_commit": FlagKind.WRITE_AFTER_COMMIT, "double_commit": FlagKind.DOUBLE_COMMIT,
              "commit_missing_required": FlagKind.COMMIT_MISSING_WRITES, "dangling_txn": FlagKind.UNCOMMITTED_HANDLE,
              "bad_handle": FlagKind.BAD_REFERENCE}


def _surfaces(inner: Sequence[Tool], build: str, params: Mapping[str, Any], where: str) -> list[tuple[str, Surface]]:
    """The construction's surfaces: one per domain, or one for the whole catalog (``ALL_DOMAINS``)."""
    by_domain: dict[str, list[Tool]] = {}
    for t in inner:
        by_domain.setdefault(t.domain, []).append(t)
    pairs = [(t.domain, native_shape(t)) for t in inner]
    if build == "ladder":
        k = params.get("k", NATIVE_K)
        if not isinstance(k, int) or isinstance(k, bool) or not 0 <= k <= 9:
            raise VariantError("the ladder step needs 'k', an integer 0-9", where=where, fix='write "k": 0')
        return [(d, ladder(d, [native_shape(t) for t in ts], k)) for d, ts in by_domain.items()]
    if build == "ops":
        ops = params.get("ops")
        if not isinstance(ops, list):
            raise VariantError("the ops step needs 'ops' (a spec file's list) or 'file'", where=where,
                               fix='write "file": "pred.json" and build on the toolschemaspace catalog')
        return [(d, compile_ops(d, [native_shape(t) for t in ts], ops, where)) for d, ts in by_domain.items()]
    if build == "hierarchy":
        arm = str(params.get("arm", ""))
        if arm not in HIERARCHY_ARMS:
            raise VariantError(f"unknown hierarchy arm '{arm}'", where=where,
                               fix=f"use one of: {', '.join(HIERARCHY_ARMS)}")
        return [(ALL_DOMAINS, hierarchy(pairs, arm))]
    groups = params.get("groups")
    if not isinstance(groups, list):
        raise VariantError("the groups step needs 'groups' (a grouping file's list) or 'file'", where=where,
                           fix='write "file": "class_neutral.json" and build on the toolschemaspace catalog')
    return [(ALL_DOMAINS, class_groups(pairs, groups, where))]


class PaperSurface(Layer):
    op = "paper"
    PARAMS = ("build", "k", "file", "ops", "arm", "groups", "markers")
    protocol = True  # answers resolver / transaction / discovery calls itself: the last step
    validates = False  # the artifact checks dispatchers and intervals only (its nested schema is unsound)
    long_names = True  # fully split names run to 80 characters there
    LENIENT = "nothing beyond the artifact's own forms (its loose control executes unknown names as native)"

    def __init__(self, inner: Sequence[Tool], params: Mapping[str, Any]) -> None:
        super().__init__(inner, params)
        build = str(params.get("build", "ladder"))
        if build not in BUILDS:
            raise VariantError(f"unknown paper build '{build}'", where="paper step", fix=f"use one of: {', '.join(BUILDS)}")
        where = f"paper {build} {params.get('file') or params.get('arm') or params.get('k', '')}".strip()
        markers = str(params.get("markers", "drop" if build in ("ladder", "ops") else "keep"))
        if markers not in ("drop", "keep"):
            raise VariantError(f"unknown markers '{markers}'", where=where, fix="use drop or keep")
        self._routes: dict[tuple[str, str], Route] = {}
        self._recipes: dict[str, Recipe] = {}
        self._hierarchy = build == "hierarchy"
        tools = []
        for domain, surface in _surfaces(self.inner, build, params, where):
            for s, route in surface.tools:
                if markers == "drop":
                    s = without_markers(s)
                key = (domain, str(s["name"]))
                if key in self._routes:
                    raise VariantError(f"two tools named '{key[1]}' in {domain}", where=where,
                                       fix="check the spec file's renames and dispatcher names")
                self._routes[key] = route
                tools.append(Tool(name=str(s["name"]), description=str(s["description"]), parameters=s["parameters"],
                                  domain=domain, cls=route.domain))
            self._recipes.update(surface.recipes)
        self.tools = tuple(tools)

    def value_domains(self) -> Mapping[str, Mapping[str, Sequence[Any]]]:
        """A referenced argument can only take its resolver table's values."""
        out: dict[str, dict[str, list[Any]]] = {}
        for route in self._routes.values():
            if route.kind == "resolver":
                out.setdefault(f"{route.domain}::{route.op}", {})[route.param] = list(route.table.values())
        return out

    @classmethod
    def prepare(cls, params: Mapping[str, Any], catalog: Catalog) -> dict[str, Any]:
        """Read a ``file`` from the catalog's ``specs/`` folder into ``ops`` / ``groups``."""
        out = dict(params)
        name = out.get("file")
        if name is None or isinstance(out.get("ops" if out.get("build") != "groups" else "groups"), list):
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

    def describe(self) -> str:
        what = self.params.get("file") or self.params.get("arm") or self.params.get("k")
        return f"paper({self.params.get('build')}{'' if what is None else f', {what}'})"

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
        return Transactions()

    def answer(self, domain: str, name: str, arguments: Mapping[str, Any], state: Transactions, *,
               loose: bool = False) -> Answer | None:
        """The artifact's own answer to ``name(arguments)`` in ``domain`` (its ``SimEnv`` or, for the
        hierarchy arms, ``HierEnv``), under hard or ``loose`` control: the JSON object the model
        reads, the native actions executed, whether it is a rejection, the flags. None: the
        variant has no such tool (the artifact rejects it under hard control and executes it as
        a native action under loose)."""
        route = self._routes.get((domain, name)) or self._routes.get((ALL_DOMAINS, name))
        if route is None:
            return None
        return answer(route, name, arguments, state, loose=loose, hierarchy=self._hierarchy)

    def decode(self, call: Call, tool: Tool, state: Any) -> Step:
        route = self._routes[(tool.domain, tool.name)]
        got = answer(route, call.name, call.arguments, state, loose=False, hierarchy=self._hierarchy)
        flags = tuple(Flag(FLAG_KINDS[n], f"{n}: {d}") for n, d in got.flags if n in FLAG_KINDS)
        if got.rejected:
            kind = RejectionKind.INVALID_ARGUMENTS if route.kind in ("named", "execute") else RejectionKind.PROTOCOL
            return Reject(kind, str(got.payload.get("error")), flags, got.payload)
        if got.actions:
            return Forward(tuple(Call(f"{a.domain}::{a.tool}", a.arguments) for a in got.actions),
                           route=tool.name if route.kind in ("execute", "invoke") else None,
                           classes=tuple(a.domain for a in got.actions) if route.kind in ("execute", "invoke") else (),
                           flags=flags)
        return Reply(got.payload, flags)

    def finish(self, state: Any) -> list[Flag]:
        return [Flag(FlagKind.UNCOMMITTED_HANDLE, f"{n}: {d}") for n, d in state.dangling()]


__all__ = ["BUILDS", "FLAG_KINDS", "PaperSurface"]
