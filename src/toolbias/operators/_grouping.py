"""Partitions of a tool list into groups, for the merge operator.

Pure functions over item positions: no schemas, no names. Every rule is
deterministic (random rules take an explicit seed), so a variant spec always
builds the same schema.

* :func:`apportion` splits a total group count over scopes (domains).
* :func:`semantic` groups by class, then merges the most similar groups (shared
  name tokens, smallest result first) or halves the largest ones until the target
  count is reached: the class-semantic rule and the granularity ladder.
* :func:`random_like` and :func:`anti_class` keep a size profile (the class-semantic
  one) and fill it with a seeded random partition, or spread every class over as
  many groups as possible.
"""

from __future__ import annotations

import heapq
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

#: verbs and glue words that say nothing about what a tool acts on
STOPWORDS = frozenset({
    "set", "get", "start", "stop", "toggle", "enable", "disable", "add", "remove", "delete", "create",
    "update", "list", "open", "close", "run", "cancel", "adjust", "activate", "deactivate", "turn", "check",
    "reset", "clear", "select", "change", "show", "send", "find", "search", "make", "move", "configure",
    "control", "to", "of", "and", "the", "a", "an", "for", "on", "off", "by", "with",
})
_SPLIT = re.compile(r"[^a-zA-Z0-9]+|(?<=[a-z0-9])(?=[A-Z])")


@lru_cache(maxsize=4096)
def tokens(text: str) -> frozenset[str]:
    """Content words of an identifier: ``set_fanSpeed`` -> {fan, speed}."""
    return frozenset(w.lower() for w in _SPLIT.split(text) if w) - STOPWORDS


@dataclass(frozen=True)
class Item:
    """One tool as the grouping rules see it: its class key and the words it is about."""

    key: str
    words: frozenset[str]


Partition = list[list[int]]


def apportion(sizes: Sequence[int], total: int) -> list[int]:
    """Split ``total`` groups over scopes of ``sizes`` items, proportionally (largest
    remainder, ties to the earlier scope), each scope getting between 1 and its size."""
    n = sum(sizes)
    if not sizes or not len(sizes) <= total <= n:
        raise ValueError(f"total {total} outside [{len(sizes)}, {n}]")
    quotas = [total * s / n for s in sizes]
    counts = [min(s, max(1, int(q))) for s, q in zip(sizes, quotas, strict=True)]
    while sum(counts) != total:
        grow = sum(counts) < total
        best = None
        for i, (s, q, c) in enumerate(zip(sizes, quotas, counts, strict=True)):
            if (grow and c < s) or (not grow and c > 1):
                score = q - c if grow else c - q
                if best is None or score > best[0]:
                    best = (score, i)
        assert best is not None
        counts[best[1]] += 1 if grow else -1
    return counts


def by_key(items: Sequence[Item]) -> Partition:
    """One group per key, in order of first appearance."""
    groups: dict[str, list[int]] = {}
    for i, it in enumerate(items):
        groups.setdefault(it.key, []).append(i)
    return list(groups.values())


def semantic(items: Sequence[Item], k: int | None = None) -> Partition:
    """Class groups, brought to ``k`` groups (default: one per class).

    Too many classes: repeatedly merge the two groups whose words overlap most
    (Jaccard over the items' words and class names), preferring the smallest merged group, then the earliest. Too few:
    repeatedly halve the largest group (earliest first). Groups keep item order and
    are ordered by their first item."""
    if k is None:
        return by_key(items)
    if not 1 <= k <= len(items):
        raise ValueError(f"k={k} outside [1, {len(items)}]")
    return [list(g) for g in _semantic(tuple(items), k)]


@lru_cache(maxsize=1024)
def _semantic(items: tuple[Item, ...], k: int) -> tuple[tuple[int, ...], ...]:
    groups = by_key(items)
    if len(groups) > k:
        groups = _agglomerate(items, groups, k)
    while len(groups) < k:
        big = max(range(len(groups)), key=lambda g: (len(groups[g]), -g))
        members = groups[big]
        half = (len(members) + 1) // 2
        groups[big:big + 1] = [members[:half], members[half:]]
    return tuple(tuple(g) for g in sorted(groups, key=lambda g: g[0]))


def _agglomerate(items: Sequence[Item], groups: Partition, k: int) -> Partition:
    words: list[frozenset[str]] = []
    for g in groups:
        acc: set[str] = set()
        for i in g:
            acc |= items[i].words | tokens(items[i].key)
        words.append(frozenset(acc))
    members: list[list[int] | None] = [sorted(g) for g in groups]
    version = [0] * len(groups)

    def entry(a: int, b: int) -> tuple[float, int, int, int, int, int, int, int]:
        ma, mb = members[a], members[b]
        assert ma is not None and mb is not None
        union = words[a] | words[b]
        sim = len(words[a] & words[b]) / len(union) if union else 0.0
        first, second = sorted((ma[0], mb[0]))
        return (-sim, len(ma) + len(mb), first, second, a, b, version[a], version[b])

    heap = [entry(a, b) for a in range(len(groups)) for b in range(a + 1, len(groups))]
    heapq.heapify(heap)
    alive = len(groups)
    while alive > k:
        *_, a, b, va, vb = heapq.heappop(heap)
        ma, mb = members[a], members[b]
        if ma is None or mb is None or va != version[a] or vb != version[b]:
            continue
        members[a] = sorted(ma + mb)
        members[b] = None
        words[a] = words[a] | words[b]
        version[a] += 1
        alive -= 1
        for c in range(len(members)):
            if c != a and members[c] is not None:
                heapq.heappush(heap, entry(min(a, c), max(a, c)))
    return [m for m in members if m is not None]


def _rng(seed: int, scope: str) -> random.Random:
    return random.Random(f"toolbias-merge:{seed}:{scope}")


def random_like(n: int, sizes: Sequence[int], seed: int, scope: str) -> Partition:
    """A seeded random partition of ``n`` items with the given group sizes."""
    order = list(range(n))
    _rng(seed, scope).shuffle(order)
    out, at = [], 0
    for s in sizes:
        out.append(sorted(order[at:at + s]))
        at += s
    return sorted(out, key=lambda g: g[0])


def anti_class(items: Sequence[Item], sizes: Sequence[int], seed: int, scope: str) -> Partition:
    """Groups of the given sizes that mix classes as much as possible.

    Classes are dealt largest first (items of a class in seeded order); each item goes to
    the group with room that holds the fewest items of its class, then the most room
    left, then a seeded group order -- so a class of ``c`` items lands in ``c`` different
    groups whenever there are that many with room, and rooms stay balanced to the end."""
    rng = _rng(seed, scope)
    classes = by_key(items)
    for members in classes:
        rng.shuffle(members)
    classes.sort(key=lambda g: -len(g))  # stable: ties keep first appearance
    rank = list(range(len(sizes)))
    rng.shuffle(rank)
    room = list(sizes)
    out: Partition = [[] for _ in sizes]
    for members in classes:
        held = [0] * len(sizes)
        for i in members:
            best = min((g for g in range(len(sizes)) if room[g]), key=lambda g: (held[g], -room[g], rank[g]))
            out[best].append(i)
            room[best] -= 1
            held[best] += 1
    return sorted((sorted(g) for g in out if g), key=lambda g: g[0])


__all__ = ["Item", "Partition", "anti_class", "apportion", "by_key", "random_like", "semantic", "tokens"]
