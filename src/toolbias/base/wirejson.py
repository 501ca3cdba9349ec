"""JSON for HTTP bodies on the hot paths (the proxy, the ``openai:`` provider).

orjson when it is installed (``toolbias[proxy]`` pulls it in): it parses and writes a
request of an agent with a dozen tools several times faster than the standard library,
which at hundreds of turns per second is most of the proxy's CPU. The standard library
otherwise, and for what orjson refuses but ``json`` accepts (``NaN`` when parsing,
integers beyond 64 bits, lone surrogates in strings), so the choice never changes what
is accepted. One difference remains when writing: a float NaN or infinity becomes
``null`` (``json`` writes ``NaN``, which is not JSON and which servers reject).
"""

from __future__ import annotations

import json
from typing import Any

_std_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode

try:
    import orjson
except ImportError:  # pragma: no cover - exercised where orjson is absent
    orjson = None  # type: ignore[assignment]


def _std_loads(data: bytes | str) -> Any:
    return json.loads(data)


def _std_dumpb(obj: Any) -> bytes:
    return _std_dumps(obj).encode("utf-8", "surrogatepass")


if orjson is not None:
    _OPTS = orjson.OPT_NON_STR_KEYS

    def loads(data: bytes | str) -> Any:
        """Parse JSON (raises ``ValueError`` on bad JSON, as ``json.loads`` does)."""
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            return json.loads(data)  # what only the standard library accepts, or its error message

    def dumpb(obj: Any) -> bytes:
        """Compact UTF-8 JSON bytes (non-ASCII characters as themselves)."""
        try:
            return orjson.dumps(obj, option=_OPTS)
        except (orjson.JSONEncodeError, TypeError):
            return _std_dumpb(obj)  # NaN, huge integers, surrogates: as json writes them
else:  # pragma: no cover
    loads = _std_loads
    dumpb = _std_dumpb


def dumps(obj: Any) -> str:
    """:func:`dumpb` as text."""
    return dumpb(obj).decode("utf-8", "surrogatepass")
