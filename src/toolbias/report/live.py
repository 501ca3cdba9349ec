"""Live conversations: agents run through ``toolbias proxy --store`` (kind ``live``, one row per
conversation, :mod:`toolbias.proxy.records`), compared across the variants they ran under.

One row per (study, model, variant): a proxy serves one variant, so with one proxy per variant
(the same ``--store``, or stores merged) each variant is a row, native first, then the
registry's order. Per row, summed over its conversations:

* agent turns (requests the proxy served) and upstream rounds (requests it made upstream);
* upstream calls: the tool calls the model made, each decoded to native calls handed to the
  agent, a protocol reply (begin/set/commit, resolve, list_methods/invoke ...) or a rejection
  (an off-schema call: unknown tool, arguments off the schema, unparsable JSON);
* the rejection rate: the mean over conversations (those with an upstream call) of rejections
  per upstream call, with a percentile bootstrap interval over conversations (the conversation
  is the unit of resampling, as the task is for success: :func:`toolbias.study.stats.bootstrap_ci`);
* protocol rounds per native call: upstream requests made only to answer protocol calls or
  rejections, per native call (what the variant costs in round trips);
* tokens per turn: upstream prompt + completion tokens per agent turn;
* terminations other than normal (``protocol_round_limit``, ``upstream_error``), counted in
  conversations;
* the most common rejection messages (what the model got wrong), truncated.

There is no gold in a live conversation, so no success: tau2-bench results imported for the
same variants stay in their own section (Table 9).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..store import Store
from ..study.stats import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES, bootstrap_ci

#: the termination of a conversation that ended normally (the proxy's default)
NORMAL_TERMINATION = "live"
#: rejection messages shown per row, and their length
TOP_REJECTIONS = 3
MESSAGE_CHARS = 160
#: what the columns of the live table mean (under the table in text, above it in HTML)
LEGEND = ("conv.: conversations; turns: the agent's requests; rounds: upstream requests; calls: the model's tool "
          "calls, each decoded to native calls for the agent, a protocol reply or a rejection (off-schema); "
          "rejected %: the mean over conversations of rejections per call, with a conversation-bootstrap interval; "
          "protocol/native: upstream requests made only to answer protocol calls or rejections, per native call; "
          "ended early: conversations that hit the proxy's round limit in a turn, an upstream error, or whose last "
          "turn was cancelled (the client left). No gold: "
          "no success.")
#: short labels of the terminations other than normal, for the text tables
ENDED = {"protocol_round_limit": "round limit", "upstream_error": "upstream error", "cancelled": "cancelled"}
#: the columns of :func:`live_table_rows` that hold text (the others hold numbers)
TEXT_COLUMNS = frozenset({"variant", "study", "model", "kind", "message", "ended early"})
#: the counts summed per row, in the order the JSON gives them
COUNTS = ("turns", "rounds", "upstream_calls", "native_calls", "replies", "rejections", "protocol_rounds",
          "rebuilt", "prompt_tokens", "completion_tokens")


def load_conversations(store: Store, study: str | None = None) -> list[dict[str, Any]]:
    """Each live conversation of ``store`` (only ``study``'s when given), reduced to its counts
    and rejection messages (:func:`summarize`)."""
    from ..proxy.records import LIVE_KIND  # lazily: the proxy's server code is not the report's

    return [summarize(r.study, r.model, r.record.get("live") or {})
            for r in store.rows(kind=LIVE_KIND, study=study)]


def summarize(study: str, model: str, log: Mapping[str, Any]) -> dict[str, Any]:
    """One conversation's counts (a :meth:`~toolbias.proxy.conversation.CallLog.to_dict`)."""
    calls = log.get("calls") or []
    rejected: list[tuple[str, str]] = []
    for c in calls:
        decoded = c.get("decoded")
        if decoded is None:  # arguments that were not JSON: rejected before decoding
            rejected.append(("parse_error", str(c.get("message") or "")))
        elif decoded.get("outcome") == "rejection":
            rejected.append((str(decoded.get("rejection_kind") or "rejection"),
                             str(c.get("message") or decoded.get("message") or "")))
    out: dict[str, Any] = {"study": study, "model": model, "variant": str(log.get("variant", "?")),
                           "domain": str(log.get("domain", "")), "catalog": str(log.get("catalog", "")),
                           "termination": str(log.get("termination") or NORMAL_TERMINATION),
                           "upstream_calls": len(calls), "rejected": rejected}
    for key in COUNTS:
        if key != "upstream_calls":
            out[key] = int(log.get(key) or 0)
    return out


def live_table(conversations: Iterable[Mapping[str, Any]], *, order: Sequence[str] = (), seed: int = 0,
               n_resamples: int = DEFAULT_RESAMPLES, confidence: float = DEFAULT_CONFIDENCE) -> list[dict[str, Any]]:
    """One row per (study, model, variant) of :func:`summarize`'d conversations, rows in
    ``order`` of their variants (the others after, as first seen)."""
    groups: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
    for c in conversations:
        groups.setdefault((str(c["study"]), str(c["model"]), str(c["variant"])), []).append(c)
    rank = {v: i for i, v in enumerate(order)}
    first = {k: i for i, k in enumerate(groups)}
    rows = []
    for key in sorted(groups, key=lambda k: (rank.get(k[2], len(rank)), first[k])):
        study, model, variant = key
        convs = groups[key]
        totals = {k: sum(int(c[k]) for c in convs) for k in COUNTS}
        rates = [len(c["rejected"]) / c["upstream_calls"] for c in convs if c["upstream_calls"]]
        rate = bootstrap_ci(rates, confidence=confidence, n_resamples=n_resamples, seed=seed,
                            key=("live-rejections", study, model, variant))
        messages = Counter((kind, msg) for c in convs for kind, msg in c["rejected"])
        kinds = Counter(kind for c in convs for kind, _ in c["rejected"])
        ended = Counter(str(c["termination"]) for c in convs if c["termination"] != NORMAL_TERMINATION)
        rows.append({
            "study": study, "model": model, "variant": variant,
            "domains": sorted({str(c["domain"]) for c in convs}),
            "catalogs": sorted({str(c["catalog"]) for c in convs}),
            "conversations": len(convs), **totals,
            "rejection_rate": rate.to_dict(),
            "protocol_rounds_per_native_call": (totals["protocol_rounds"] / totals["native_calls"]
                                                if totals["native_calls"] else None),
            "tokens_per_turn": ((totals["prompt_tokens"] + totals["completion_tokens"]) / totals["turns"]
                                if totals["turns"] else None),
            "terminations": dict(ended.most_common()),
            "rejection_kinds": dict(kinds.most_common()),
            "top_rejections": [{"kind": kind, "message": truncate(_strip_error(msg)), "count": n}
                               for (kind, msg), n in messages.most_common(TOP_REJECTIONS)],
        })
    return rows


def truncate(text: str, limit: int = MESSAGE_CHARS) -> str:
    """One line of at most ``limit`` characters (an ellipsis where cut)."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit - 1].rstrip() + "…"


def _strip_error(message: str) -> str:
    # every rejection reaches the model as "Error: ..."; the prefix says nothing here
    return message[len("Error: "):] if message.startswith("Error: ") else message


def _num(x: float | None, digits: int = 2) -> str:
    return "-" if x is None or x != x else f"{x:.{digits}f}"


def _pct(x: float | None, digits: int = 1) -> str:
    return "-" if x is None or x != x else f"{100 * x:.{digits}f}"


def live_table_rows(rows: Sequence[Mapping[str, Any]]) -> dict[str, tuple[list[str], list[list[str]]]]:
    """Header and text cells of the live tables (terminal and HTML render the same cells, the
    HTML escaping them: rejection messages are model output). The study and model columns are
    shown where they say more than the variant (a study not named ``proxy|<variant>``, a model
    the proxy was given)."""
    if not rows:
        return {}
    studies = any(r["study"] != f"proxy|{r['variant']}" for r in rows)
    models = any(r["model"] != "proxy" for r in rows)
    who = ["variant", *(["study"] * studies), *(["model"] * models)]

    def label(r: Mapping[str, Any]) -> list[str]:
        return [str(r["variant"]), *([str(r["study"])] * studies), *([str(r["model"])] * models)]

    head = [*who, "conv.", "turns", "rounds", "calls", "native", "replies", "rejected", "rejected % [95% CI]",
            "protocol/native", "tokens/turn", "ended early"]
    body = []
    for r in rows:
        iv = r["rejection_rate"]
        ended = ", ".join(f"{ENDED.get(k, k)} {n}" for k, n in r["terminations"].items()) or "-"
        body.append([*label(r), str(r["conversations"]), str(r["turns"]), str(r["rounds"]),
                     str(r["upstream_calls"]), str(r["native_calls"]), str(r["replies"]), str(r["rejections"]),
                     f"{_pct(iv['estimate'])} [{_pct(iv['low'], 0)}, {_pct(iv['high'], 0)}]" if iv["n"] else "-",
                     _num(r["protocol_rounds_per_native_call"]), _num(r["tokens_per_turn"], 0), ended])
    out = {"Live conversations through toolbias proxy": (head, body)}
    messages = [[*label(r), str(m["count"]), m["kind"], m["message"]] for r in rows for m in r["top_rejections"]]
    if messages:
        out[f"Live conversations: the {TOP_REJECTIONS} most common rejection messages per variant"] = (
            [*who, "count", "kind", "message"], messages)
    return out


__all__ = ["LEGEND", "NORMAL_TERMINATION", "TEXT_COLUMNS", "live_table", "live_table_rows", "load_conversations", "summarize", "truncate"]
