"""The on-disk cache of packed weights: round trip, keys, and corrupt files treated as misses."""

from __future__ import annotations

import os

import numpy as np
import pytest

from coopnn.backends.coopvec.layouts import pack_plan, plan_weights
from coopnn.layouts.formats.fp16 import FORMAT as FP16
from coopnn.layouts.weight_cache import WeightImageCache


def _packed():
    rng = np.random.default_rng(1)
    plan = plan_weights({"w0": rng.normal(size=(16, 5)).astype(np.float32)},
                        {"b0": rng.normal(size=16).astype(np.float32)}, FP16)
    return pack_plan(plan, "inferencing_optimal", lambda m: m.tobytes()[::-1])


def test_round_trip(tmp_path):
    cache, packed = WeightImageCache(tmp_path), _packed()
    assert cache.get("model-a:device-1") is None
    cache.put("model-a:device-1", packed)
    again = WeightImageCache(tmp_path).get("model-a:device-1")
    assert again == packed
    assert (cache.hits, cache.misses) == (0, 1)
    assert WeightImageCache(tmp_path).get("model-a:device-2") is None


@pytest.mark.filterwarnings("ignore::coopnn.disk_cache.CacheWarning")  # the subject here; warned in test_disk_cache
def test_corrupt_or_truncated_files_are_misses_and_removed(tmp_path):
    cache, packed = WeightImageCache(tmp_path), _packed()
    cache.put("k", packed)
    path = cache.path("k")
    raw = path.read_bytes()
    path.write_bytes(raw[:-1] + bytes([raw[-1] ^ 1]))
    assert cache.get("k") is None and not path.exists()
    cache.put("k", packed)
    path.write_bytes(raw[:10])
    assert cache.get("k") is None and not path.exists()
    assert cache.misses == 2


def test_least_recently_used_entries_are_evicted(tmp_path):
    cache = WeightImageCache(tmp_path, max_entries=3)
    for i in range(3):
        cache.put(f"key{i}", _packed())
        os.utime(cache.path(f"key{i}"), ns=(i * 10**9, i * 10**9))
    assert cache.get("key0") is not None  # key0 becomes the most recently used
    cache.put("key3", _packed())
    assert sorted(p.name for p in tmp_path.glob("*.bin")) == sorted(cache.path(k).name for k in ("key0", "key2", "key3"))
