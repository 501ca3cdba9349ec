"""The built-in selection benchmark, rotations, and the BiasBusters importers."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from tests.support.selection import SHARED, SHARED_REASON
from toolbias.errors import CatalogError
from toolbias.selection import (
    builtin_benchmark,
    load_benchmark,
    load_biasbusters,
    load_biasbusters_filter_set,
    rotations,
)
from toolbias.selection.benchmark import NAME_RE, Benchmark
from toolbias.selection.importers import standardize, toolbench_name

shared = pytest.mark.skipif(not (SHARED / "duplicate_api_clusters.json").is_file(), reason=SHARED_REASON)


def test_builtin_shape() -> None:
    bench = builtin_benchmark()
    assert len(bench) >= 10
    for c in bench:
        assert c.k == 5
        assert len(c.queries) >= 50 and len(set(c.queries)) == len(c.queries)
        assert {t.style for t in c.tools} == {"terse", "plain", "promotional", "long", "examples"}
        assert all(NAME_RE.match(t.name) for t in c.tools)
        assert all(t.description for t in c.tools)
        assert all(isinstance(t.metadata.get("popularity"), float) for t in c.tools)
    names = [t.name for c in bench for t in c.tools]
    assert len(set(names)) == len(names)
    # styles are not tied to canonical positions
    assert len({c.tools[0].style for c in bench}) >= 3


def test_builtin_has_substring_traps() -> None:
    bench = builtin_benchmark()
    traps = [(a.name, b.name) for c in bench for a in c.tools for b in c.tools
             if a.name != b.name and a.name in b.name]
    assert ("geocode", "forward_geocode") in traps and len(traps) >= 8


def test_queries_name_no_provider() -> None:
    for c in builtin_benchmark():
        for q in c.queries:
            for t in c.tools:
                for name in (t.name, t.provider):
                    assert not re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", q, re.I), (q, name)


def test_rotations_put_every_tool_in_every_position() -> None:
    rots = rotations(5)
    assert len(rots) == 5
    for p in range(5):
        assert sorted(r[p] for r in rots) == list(range(5))
    for r in rots:
        assert sorted(r) == list(range(5))
    assert rots[1] == (1, 2, 3, 4, 0)


def test_round_trip_and_file_spec(tmp_path) -> None:
    bench = builtin_benchmark()
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(bench.to_dict()))
    again = load_benchmark(str(path))
    assert [c.names for c in again] == [c.names for c in bench]
    assert [c.fingerprint() for c in again] == [c.fingerprint() for c in bench]


def test_invalid_benchmarks() -> None:
    d = builtin_benchmark().to_dict()
    d["clusters"][0]["tools"][1]["name"] = d["clusters"][0]["tools"][0]["name"]
    with pytest.raises(CatalogError):
        Benchmark.from_dict(d)
    d = builtin_benchmark().to_dict()
    d["clusters"][0]["tools"][0]["name"] = "has space"
    with pytest.raises(CatalogError):
        Benchmark.from_dict(d)
    with pytest.raises(CatalogError):
        load_benchmark("nonsense-spec")


def test_toolbench_names() -> None:
    assert standardize("Geocode - Forward and Reverse") == "geocode_forward_and_reverse"
    assert toolbench_name("Geocode - Forward and Reverse", "Forward geocode") == \
        "forward_geocode_for_geocode_forward_and_reverse"
    assert toolbench_name("Weather", "16 Day Forecast") == "get_16_day_forecast_for_weather"
    long = toolbench_name("Address From To Latitude Longitude", "Coordinates (latitude longitude) to Address")
    assert long == "tude_longitude_to_address_for_address_from_to_latitude_longitude" and len(long) <= 64


@shared
def test_biasbusters_import() -> None:
    bench = load_biasbusters(SHARED)
    assert len(bench) == 10 and all(c.k == 5 for c in bench)
    assert all(len(c.queries) == 100 for c in bench)
    first = bench.cluster("1")
    assert first.tools[0].name == "forward_geocode_for_geocode_forward_and_reverse"
    assert first.tools[0].provider == "Geocode - Forward and Reverse"
    assert first.tools[0].parameters["required"] == ["address"]
    assert first.tools[0].metadata["url"].startswith("https://")
    assert first.queries[0].startswith("What are the latitude and longitude")
    # same via the spec string
    assert [c.names for c in load_benchmark(f"biasbusters:{SHARED}")] == [c.names for c in bench]


@shared
def test_biasbusters_filter_set() -> None:
    examples = load_biasbusters_filter_set(SHARED / "api_subset_selection_ground_truth.json")
    assert len(examples) == 1000
    assert Counter(e.k for e in examples) == {2: 300, 4: 300, 3: 200, 5: 200}
    bench = load_biasbusters(SHARED)
    for e in examples[:50]:
        assert len(e.candidates) == 8
        cluster = bench.cluster(e.cluster)
        assert {e.candidates[i].name for i in e.correct} <= set(cluster.names)
        assert not {e.candidates[i].name for i in range(8) if i not in e.correct} & set(cluster.names)


def test_missing_biasbusters_dir(tmp_path) -> None:
    with pytest.raises(CatalogError) as err:
        load_benchmark(f"biasbusters:{tmp_path}")
    assert "duplicate_api_clusters.json" in str(err.value)


@shared
def test_biasbusters_experiment_mappings() -> None:
    from toolbias.selection import apply_condition

    bench = load_biasbusters(SHARED)
    renamed = apply_condition(bench, f"names:{SHARED / 'experiments' / 'tool_to_id_1.json'}")
    mapping = json.loads((SHARED / "experiments" / "tool_to_id_1.json").read_text())
    for a, b in zip(bench, renamed, strict=True):
        for x, y in zip(a.tools, b.tools, strict=True):
            if x.provider in mapping:
                assert y.name == toolbench_name(mapping[x.provider], x.metadata["api_name"])
            assert y.description == x.description
    swapped = apply_condition(bench, f"desc_swap:{SHARED / 'experiments' / 'desc_swap_1.json'}")
    changed = sum(x.description != y.description for a, b in zip(bench, swapped, strict=True)
                  for x, y in zip(a.tools, b.tools, strict=True))
    assert changed >= 2
