"""The on-disk pipeline cache: a second context hits the file, a damaged file is discarded and rewritten."""

from __future__ import annotations

import struct

import numpy as np
import pytest

pytestmark = [pytest.mark.vulkan, pytest.mark.usefixtures("require_vulkan")]


def _make_kernel(context, spirv, a: float = 2.0):
    return context.create_kernel(spirv, binding_count=2, push_constant_size=4, specialization={0: a})


def _works(context, kernel) -> bool:
    x = context.create_buffer(64 * 4)
    y = context.create_buffer(64 * 4)
    x.write(np.ones(64, np.float32))
    kernel.run([x, y], struct.pack("<I", 64), 1)
    return bool(np.all(y.read(np.float32) == 2.0))


def test_second_context_hits_the_disk_cache(make_context, axpb_spirv, tmp_path):
    first = make_context(pipeline_cache_dir=tmp_path)
    kernel = _make_kernel(first, axpb_spirv)
    assert (first.pipeline_cache.hits, first.pipeline_cache.misses) == (0, 1)
    files = list(tmp_path.rglob("*.bin"))
    assert len(files) == 1 and files[0].stat().st_size > 0
    assert _works(first, kernel)
    first.close()

    second = make_context(pipeline_cache_dir=tmp_path)
    kernel = _make_kernel(second, axpb_spirv)
    assert (second.pipeline_cache.hits, second.pipeline_cache.misses) == (1, 0)
    assert _works(second, kernel)


def test_different_specialization_is_a_different_entry(make_context, axpb_spirv, tmp_path):
    context = make_context(pipeline_cache_dir=tmp_path)
    _make_kernel(context, axpb_spirv, a=2.0)
    _make_kernel(context, axpb_spirv, a=3.0)
    _make_kernel(context, axpb_spirv, a=2.0)
    assert (context.pipeline_cache.hits, context.pipeline_cache.misses) == (1, 2)
    assert len(list(tmp_path.rglob("*.bin"))) == 2


@pytest.mark.filterwarnings("ignore::coopnn.disk_cache.CacheWarning")  # the subject here; warned in test_disk_cache
@pytest.mark.parametrize("damage", ["truncate", "flip_byte", "garbage", "empty"])
def test_a_damaged_cache_file_is_discarded_and_rewritten(make_context, axpb_spirv, tmp_path, damage):
    first = make_context(pipeline_cache_dir=tmp_path)
    _make_kernel(first, axpb_spirv)
    first.close()
    (path,) = tmp_path.rglob("*.bin")
    data = path.read_bytes()
    damaged = {"truncate": data[: len(data) // 2],
               "flip_byte": data[:-1] + bytes([data[-1] ^ 0xFF]),
               "garbage": b"\x00not a pipeline cache" * 10,
               "empty": b""}[damage]
    path.write_bytes(damaged)

    second = make_context(pipeline_cache_dir=tmp_path)
    kernel = _make_kernel(second, axpb_spirv)
    cache = second.pipeline_cache
    assert (cache.hits, cache.misses, cache.discarded) == (0, 1, 1)
    assert _works(second, kernel)

    third = make_context(pipeline_cache_dir=tmp_path)
    _make_kernel(third, axpb_spirv)
    assert third.pipeline_cache.hits == 1


@pytest.mark.filterwarnings("ignore::coopnn.disk_cache.CacheWarning")  # the subject here; warned in test_disk_cache
def test_unwritable_cache_directory_only_costs_recompilation(make_context, axpb_spirv, tmp_path):
    blocker = tmp_path / "not_a_directory"
    blocker.write_text("a file where the cache directory would go")
    context = make_context(pipeline_cache_dir=blocker)
    kernel = _make_kernel(context, axpb_spirv)
    assert context.pipeline_cache.write_failures == 1
    assert _works(context, kernel)


def test_cache_root_follows_the_environment(monkeypatch, tmp_path, require_vulkan):
    from coopnn.disk_cache import CACHE_DIR_ENV
    from coopnn.runtime.vk.pipeline_cache import default_cache_root

    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path))
    assert default_cache_root() == tmp_path / "pipelines"
    monkeypatch.delenv(CACHE_DIR_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_root() == tmp_path / "xdg" / "coopnn" / "pipelines"


def test_cache_key_covers_everything_that_changes_the_pipeline(require_vulkan):
    from coopnn.runtime.vk.pipeline_cache import PipelineKey

    base = PipelineKey(b"\x03\x02\x23\x07" * 5, "main", b"", 2, 4)
    variants = [PipelineKey(base.spirv + b"\0\0\0\0", "main", b"", 2, 4), PipelineKey(base.spirv, "other", b"", 2, 4),
                PipelineKey(base.spirv, "main", struct.pack("<f", 1.0), 2, 4),
                PipelineKey(base.spirv, "main", b"", 3, 4), PipelineKey(base.spirv, "main", b"", 2, 8)]
    digests = {base.digest()} | {v.digest() for v in variants}
    assert len(digests) == 1 + len(variants)
