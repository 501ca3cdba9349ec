"""wirejson: orjson's speed where it is installed, never a different meaning from ``json``."""

from __future__ import annotations

import json
import math

import pytest

from toolbias.base import wirejson

SAMPLES = [
    {"model": "m", "messages": [{"role": "user", "content": "héllo ✓ \u2028"}], "tools": [], "n": 1},
    [1, 2.5, -0.0, 1e300, True, False, None, "", {"a": {"b": [{}]}}],
    {"big": 2**70, "neg": -(2**65)},           # beyond 64 bits: orjson refuses, json does not
    {"lone": "\ud800x"},                       # a lone surrogate
    {1: "int key", 2.5: "float key"},           # non-string keys, as json writes them
]


@pytest.mark.parametrize("obj", SAMPLES)
def test_dumpb_means_what_json_dumps_means(obj: object) -> None:
    data = wirejson.dumpb(obj)
    assert isinstance(data, bytes)
    assert json.loads(data.decode("utf-8", "surrogatepass")) == json.loads(json.dumps(obj))
    assert wirejson.loads(data) == json.loads(json.dumps(obj))
    assert wirejson.dumps(obj) == data.decode("utf-8", "surrogatepass")


def test_non_ascii_is_written_as_itself_and_compact() -> None:
    assert wirejson.dumpb({"a": "é", "b": [1, 2]}) == '{"a":"é","b":[1,2]}'.encode()


def test_loads_accepts_what_json_accepts() -> None:
    assert math.isnan(wirejson.loads(b'{"x": NaN}')["x"])
    assert wirejson.loads(b"[18446744073709551616]") == [2**64]
    assert wirejson.loads('{"s": "\\ud800"}') == {"s": "\ud800"}


@pytest.mark.parametrize("bad", [b"", b"{", b"{'a': 1}", b"[1,]", b"\xff"])
def test_loads_rejects_what_json_rejects_with_a_value_error(bad: bytes) -> None:
    with pytest.raises(ValueError):
        json.loads(bad)
    with pytest.raises(ValueError):
        wirejson.loads(bad)
