"""Equivalence verification: a variant is only worth measuring if it is the same action space.

For every native tool of a catalog, :func:`coverage_actions` builds actions whose
arguments cover every enum value, both booleans and the numeric boundaries
(minimum, maximum, midpoint and each side of every cut point the variant's schema
shows, e.g. an interval split's ranges). :func:`verify_variant` then checks, through
the variant's own codec:

* **round trip**: ``decode(encode(a)) == [a]`` through a fresh session, with no
  rejection and no flag at ``Session.finish()``; also for each domain's actions
  encoded as one sequence (protocol state across actions: handles, references);
* **determinism**: decoding the same calls in two fresh sessions gives identical
  results (every field of every :class:`~toolbias.variants.codec.Decoded`): by default each
  domain's sequence (every tool's first coverage action, in one session), ``"all"``
  every round trip;
* **closure**: every action an accepted call yields is a valid native action
  (``validate_action``), and no rejection carries actions. Besides the encoded
  sequences, seeded *probes* perturb them (drop, repeat or reorder a call, drop an
  argument, put a wrong value in one) and decode those too;
* **schema**: every tool name an agent sees is a valid, unique function name in
  its domain, and the tool list is JSON-serialisable.

:func:`verify_all` runs every registered variant (or a selection).
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..base.canonical import canonical_json, same_json
from ..base.names import is_tool_name
from ..catalog.coverage import coverage_actions, sample_values
from ..catalog.model import Catalog, NativeAction, Tool
from ..catalog.validation import validate_action
from ..errors import ToolbiasError
from ..operators.base import Call
from .codec import Codec, Decoded, Outcome
from .isolated import IsolatedCodec
from .resolve import VariantSpec, build_codec, registry

MAX_EXAMPLES = 5


@dataclass
class VerifyResult:
    """Outcome of verifying one variant on one catalog."""

    name: str
    checked: int = 0
    failed: int = 0
    examples: list[str] = field(default_factory=list)
    seconds: float = 0.0
    functions: int = 0

    @property
    def ok(self) -> bool:
        return self.failed == 0

    def fail(self, message: str) -> None:
        self.failed += 1
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append(message)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "checked": self.checked, "failed": self.failed, "examples": list(self.examples),
                "ok": self.ok, "seconds": round(self.seconds, 4), "functions": self.functions}


def _tool_bounds(tool: Tool) -> dict[str, set[float]]:
    """Numeric bounds in one tool's parameters by argument name (cached: tools are immutable,
    and most tools of a variant are shared with the schema beneath it)."""
    cached = tool.__dict__.get("_verify_bounds")
    if cached is not None:
        return dict(cached)
    found: dict[str, set[float]] = {}

    def walk(schema: Any, name: str) -> None:
        if isinstance(schema, Mapping):
            for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
                v = schema.get(key)
                if isinstance(v, (int, float)) and not isinstance(v, bool) and name:
                    found.setdefault(name, set()).add(v)
            for p, sub in (schema.get("properties") or {}).items():
                walk(sub, str(p).split("::")[-1].split(".")[-1])
            for key in ("items", "oneOf", "anyOf", "allOf"):
                sub = schema.get(key)
                for s in sub if isinstance(sub, list) else [sub] if sub is not None else []:
                    walk(s, name)
        elif isinstance(schema, list):
            for s in schema:
                walk(s, name)

    walk(tool.parameters, "")
    object.__setattr__(tool, "_verify_bounds", found)
    return dict(found)


def schema_cuts(codec: Codec) -> dict[str, list[float]]:
    """Numeric bounds the variant's tools show, by argument name (the last part of a
    ``<op>::<arg>`` key): an interval split's ranges become cut points to test."""
    found: dict[str, set[float]] = {}
    seen: set[int] = set()
    layers = [la for _, c in codec.subs() for la in c.layers] if isinstance(codec, IsolatedCodec) else codec.layers
    for layer in layers:
        for t in layer.tools:
            if id(t) in seen:
                continue
            seen.add(id(t))
            for name, values in _tool_bounds(t).items():
                found.setdefault(name, set()).update(values)
    return {k: sorted(v) for k, v in found.items()}


# -- checks -------------------------------------------------------------------------

def _decode_all(codec: Codec, domain: str, calls: Sequence[Call]) -> tuple[list[Decoded], list[Any]]:
    session = codec.session(domain)
    decoded = [session.decode(c) for c in calls]
    return decoded, [f.to_dict() for f in session.finish()]


def same_actions(got: Sequence[NativeAction], want: Sequence[NativeAction]) -> bool:
    return len(got) == len(want) and all(
        g.domain == w.domain and g.tool == w.tool and same_json(dict(g.arguments), dict(w.arguments))
        for g, w in zip(got, want, strict=True))


def _executed(decoded: Sequence[Decoded]) -> list[NativeAction]:
    return [a for d in decoded if d.outcome is Outcome.NATIVE for a in d.actions]


def _closure_problem(catalog: Catalog, domain: str, decoded: Sequence[Decoded]) -> str | None:
    for d in decoded:
        if d.outcome is Outcome.REJECTION and d.actions:
            return f"rejection of {d.call.name} carries actions {[str(a) for a in d.actions]}"
        if d.outcome is not Outcome.NATIVE and d.actions:
            return f"{d.outcome.value} of {d.call.name} carries actions"
        for a in d.actions:
            if a.domain != domain:
                return f"{d.call.name} executed {a} in domain {a.domain}, session is {domain}"
            err = validate_action(catalog, a)
            if err is not None:
                return f"{d.call.name} decoded to a non-native action {a}: {err.message}"
    return None


def _fmt(calls: Sequence[Call]) -> str:
    text = "; ".join(f"{c.name}({canonical_json(dict(c.arguments))})" for c in calls)
    return text if len(text) < 400 else text[:397] + "..."


def check_roundtrip(codec: Codec, catalog: Catalog, domain: str, actions: Sequence[NativeAction],
                    result: VerifyResult, determinism: bool = True) -> list[Call] | None:
    """One round trip (encode, decode, finish; with ``determinism`` a second decode in another
    fresh session must agree on everything); records failures; returns the calls."""
    result.checked += 1
    try:
        calls = codec.encode(actions)
    except Exception as exc:  # an encoder crash is a verification failure, not an abort
        result.fail(f"encode({_what(actions)}) raised {type(exc).__name__}: {exc}")
        return None
    try:
        first, flags = _decode_all(codec, domain, calls)
        second, flags2 = _decode_all(codec, domain, calls) if determinism else (first, flags)
    except Exception as exc:
        result.fail(f"decoding {_fmt(calls)} raised {type(exc).__name__}: {exc}")
        return None
    got = _executed(first)
    if not determinism and not flags and same_actions(got, actions) and all(
            d.outcome is Outcome.NATIVE or (d.outcome is Outcome.REPLY and not d.actions) for d in first):
        return calls  # the common case, decided without building messages: every check below passes
    what = _what(actions)
    rejected = [d for d in first if d.outcome is Outcome.REJECTION]
    if rejected:
        result.fail(f"{what}: {rejected[0].call.name} rejected ({rejected[0].message}) in {_fmt(calls)}")
    elif not same_actions(got, actions):
        result.fail(f"decode(encode({what})) gave {[str(a) for a in got]} via {_fmt(calls)}")
    elif flags:
        result.fail(f"{what}: finish() raised flags {flags} after {_fmt(calls)}")
    elif determinism and (flags != flags2 or len(first) != len(second)
                          or not all(_same_decoded(a, b) for a, b in zip(first, second, strict=True))):
        result.fail(f"{what}: decoding is not deterministic for {_fmt(calls)}")
    elif any(d.actions for d in first if d.outcome is not Outcome.NATIVE):
        # the executed actions equal the (valid) coverage actions, so only stray actions remain to check
        result.fail(_closure_problem(catalog, domain, first) or f"{what}: a non-native outcome carries actions")
    return calls


def _what(actions: Sequence[NativeAction]) -> str:
    return ", ".join(str(a) for a in actions[:3]) + (" ..." if len(actions) > 3 else "")


def _same_decoded(a: Decoded, b: Decoded) -> bool:
    """Everything two Decoded say agrees (the determinism check); values compare exactly."""
    return (a.call.name == b.call.name and a.outcome is b.outcome and a.rejection_kind is b.rejection_kind
            and a.message == b.message and a.flags == b.flags and a.routes == b.routes
            and a.route_classes == b.route_classes and a.lenient == b.lenient
            and same_json(dict(a.call.arguments), dict(b.call.arguments))
            and same_json(None if a.reply is None else dict(a.reply), None if b.reply is None else dict(b.reply))
            and same_actions(a.actions, b.actions))


def _wrong_value(value: Any) -> Any:
    if isinstance(value, bool):
        return "yes"
    if isinstance(value, (int, float)):
        return value + 10**6
    if isinstance(value, str):
        return value + "_x" if not value.startswith("ref_") and not value.startswith("txn_") else "txn_99"
    if isinstance(value, list):
        return [{"bad": True}]
    if isinstance(value, dict):
        return {"bad": True}
    return "bad"


def probe_sequences(calls: Sequence[Call], rng: random.Random, limit: int) -> list[list[Call]]:
    """Perturbed variants of an accepted call sequence (seeded, at most ``limit``): drop,
    repeat, drop one argument of, or put a wrong value in, one call; or reverse them all.
    The perturbations are listed as small descriptions, shuffled, and only the chosen ones built."""
    kinds: list[tuple[str, int, str]] = []
    for i, c in enumerate(calls):
        kinds.append(("drop", i, ""))
        kinds.append(("repeat", i, ""))
        for k in c.arguments:
            kinds.append(("without", i, k))
            kinds.append(("wrong", i, k))
    if len(calls) > 1:
        kinds.append(("reverse", 0, ""))
    rng.shuffle(kinds)
    out: list[list[Call]] = []
    for kind, i, k in kinds[:limit]:
        before, c, after = list(calls[:i]), calls[i], list(calls[i + 1:])
        if kind == "drop":
            out.append(before + after)
        elif kind == "repeat":
            out.append(before + [c, c] + after)
        elif kind == "reverse":
            out.append(list(reversed(calls)))
        else:
            args = dict(c.arguments)
            if kind == "without":
                del args[k]
            else:
                args[k] = _wrong_value(args[k])
            out.append(before + [Call(c.name, args)] + after)
    return out


def check_probes(codec: Codec, catalog: Catalog, domain: str, calls: Sequence[Call], result: VerifyResult,
                 rng: random.Random, limit: int) -> None:
    for seq in probe_sequences(calls, rng, limit):
        result.checked += 1
        try:
            decoded, _ = _decode_all(codec, domain, seq)
        except Exception as exc:
            result.fail(f"decoding probe {_fmt(seq)} raised {type(exc).__name__}: {exc}")
            continue
        problem = _closure_problem(catalog, domain, decoded)
        if problem:
            result.fail(f"probe {_fmt(seq)}: {problem}")


def check_schema(codec: Codec, catalog: Catalog, result: VerifyResult) -> None:
    """Names an agent sees are valid and unique per domain; the tool list is JSON."""
    result.checked += 1
    try:
        json.dumps([[t.name, t.description, t.parameters] for t in codec.tools])
    except (TypeError, ValueError) as exc:
        result.fail(f"the variant's tools are not JSON-serialisable: {exc}")
    layers = [la for _, c in codec.subs() for la in c.layers] if isinstance(codec, IsolatedCodec) else codec.layers
    long_names = any(la.long_names for la in layers)
    for d in catalog.domains:
        result.checked += 1
        names = [t.name for t in codec.tools_for(d.name)]
        bad = [n for n in names if not is_tool_name(n, any_length=long_names)]
        if bad:
            result.fail(f"domain {d.name}: invalid function name(s) {bad[:5]}")
        elif len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            result.fail(f"domain {d.name}: tool name(s) listed twice {dup[:5]}")


#: coverage actions of a tool under some cut points (and value domains), shared by the variants of one run
_Coverage = dict[tuple[str, tuple[tuple[str, tuple[float, ...]], ...], str], list[NativeAction]]


def _coverage(tool: Tool, cuts: Mapping[str, Sequence[float]], cache: _Coverage | None,
              values: Mapping[str, Sequence[Any]] | None = None) -> list[NativeAction]:
    mine = {p: tuple(cuts[p]) for p in tool.properties if p in cuts}
    key = (tool.uid, tuple(mine.items()), canonical_json(values) if values else "")
    if cache is not None and key in cache:
        return cache[key]
    actions = coverage_actions(tool, mine, values)
    if cache is not None:
        cache[key] = actions
    return actions


def value_domains(codec: Codec) -> dict[str, dict[str, list[Any]]]:
    """Native uid -> {argument: values} the variant's layers can express at all."""
    layers = [la for _, c in codec.subs() for la in c.layers] if isinstance(codec, IsolatedCodec) else codec.layers
    out: dict[str, dict[str, list[Any]]] = {}
    for layer in layers:
        for uid, params in layer.value_domains().items():
            for p, vals in params.items():
                out.setdefault(uid, {})[p] = list(vals)
    return out


def verify_codec(codec: Codec, catalog: Catalog | None = None, *, probes: int = 2, seed: int = 0,
                 max_actions_per_tool: int | None = None, determinism: str = "first",
                 cache: _Coverage | None = None) -> VerifyResult:
    """Verify an already built codec (see the module doc).

    ``probes``: perturbed sequences decoded per tool (0 turns closure probing off).
    ``determinism``: ``"first"`` (default) decodes each domain's sequence of every tool's first
    coverage action twice (so every tool's decoding is compared, with protocol state carried
    across its actions), ``"all"`` also every single round trip. ``cache``: a dict shared by
    several calls on one catalog (coverage actions are computed once)."""
    catalog = catalog or codec.catalog
    start = time.perf_counter()
    result = VerifyResult(codec.name, functions=codec.function_count())
    rng = random.Random(seed)
    cuts = schema_cuts(codec)
    domains = value_domains(codec)
    check_schema(codec, catalog, result)
    for domain in catalog.domains:
        firsts: list[NativeAction] = []
        for tool in domain.tools:
            actions = _coverage(tool, cuts, cache, domains.get(tool.uid))
            if max_actions_per_tool is not None:
                actions = actions[:max_actions_per_tool]
            for i, a in enumerate(actions):
                calls = check_roundtrip(codec, catalog, domain.name, [a], result, determinism=determinism == "all")
                if i == 0:
                    firsts.append(a)
                    if calls is not None and probes > 0:
                        check_probes(codec, catalog, domain.name, calls, result, rng, probes)
        if firsts:  # the domain's actions as one episode, twice: state carried across actions, determinism
            check_roundtrip(codec, catalog, domain.name, firsts + firsts[:1] if len(firsts) > 1 else firsts, result)
    result.seconds = time.perf_counter() - start
    return result


def verify_variant(catalog: Catalog, spec: VariantSpec, *, probes: int = 2, seed: int = 0,
                   max_actions_per_tool: int | None = None, determinism: str = "first",
                   cache: _Coverage | None = None) -> VerifyResult:
    """Build ``spec`` on ``catalog`` and verify it; a variant that cannot be built fails."""
    start = time.perf_counter()
    try:
        codec = build_codec(catalog, spec)
    except ToolbiasError as exc:
        r = VerifyResult(spec.name, checked=1)
        r.fail(f"cannot build: {exc.what}")
        r.seconds = time.perf_counter() - start
        return r
    result = verify_codec(codec, catalog, probes=probes, seed=seed, max_actions_per_tool=max_actions_per_tool,
                          determinism=determinism, cache=cache)
    result.seconds = time.perf_counter() - start
    return result


_WORKER_CATALOG: Catalog | None = None


_WORKER_CACHE: _Coverage = {}


def _verify_in_worker(spec: VariantSpec, kwargs: dict[str, Any]) -> VerifyResult:
    assert _WORKER_CATALOG is not None
    return verify_variant(_WORKER_CATALOG, spec, cache=_WORKER_CACHE, **kwargs)


def verify_all(catalog: Catalog, specs: Iterable[VariantSpec] | None = None, *, jobs: int = 1,
               **kwargs: Any) -> list[VerifyResult]:
    """Verify ``specs`` (default: every registered variant) on ``catalog``, in order.

    ``jobs`` > 1 verifies variants in that many forked worker processes (where forking is safe,
    see :func:`toolbias.base.forked.fork_available`; elsewhere, and for one variant, in this process)."""
    global _WORKER_CATALOG
    chosen = list(registry().values()) if specs is None else list(specs)
    jobs = min(jobs, len(chosen))
    if jobs > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        from ..base.forked import fork_available

        if fork_available():
            kwargs.pop("cache", None)
            _WORKER_CATALOG = catalog  # inherited by the forked workers, never pickled
            try:
                with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("fork")) as pool:
                    return list(pool.map(_verify_in_worker, chosen, [kwargs] * len(chosen)))
            finally:
                _WORKER_CATALOG = None
    kwargs.setdefault("cache", {})
    return [verify_variant(catalog, s, **kwargs) for s in chosen]


__all__ = ["VerifyResult", "coverage_actions", "sample_values", "schema_cuts", "verify_all", "verify_codec",
           "verify_variant"]
