"""A training data set held on the device, which the step kernel reads every batch from (no upload per step).

`ResidentData` uploads each input of the step kernel (the model's inputs and the targets) once, as float32 rows: numpy
arrays through the host, CUDA arrays (PyTorch, CuPy, ...) copied on the GPU into memory shared with CUDA
(`coopnn.interop.cuda_rows`), coopnn device arrays bound where they are (copied by the GPU when sharded): no trip
through the host for data already on the GPU. A data set larger than the device should hold (`data_budget`: a buffer's
addressable range, and half of the largest device-local heap for all of them together) is split into shards of whole
rows; one shard is on the device at a time (`select` uploads another), with one warning saying so, and the sampler draws
from the shard on the device (`coopnn.shaders.targets.sampler`).

`KeptBuffers` holds a closed data set's buffers for the next one of the same sizes: a fit after a fit on data of the
same shapes fills them again rather than making new ones, and so runs the steps its session recorded for them (a
recording names the buffers it binds). It keeps none larger than `KEEP_SHARE` of the device's memory, which would
stay out of other allocations' reach for little gain.
"""

from __future__ import annotations

import warnings
from typing import Mapping

import numpy as np

from coopnn.errors import InputError
from coopnn.interop.cuda_rows import CudaRows
from coopnn.interop.device_arrays import DeviceArray
from coopnn.interop.tensors import CudaInput, rows_of

# The share of the largest device-local heap a data set may take; the rest is left to weights, tapes and others.
HEAP_SHARE = 0.5
# Past this many rows a row index no longer fits the sampler's 32-bit arithmetic.
MAX_ROWS = 1 << 32
# The share of the largest device-local heap a closed data set may keep for the next: above it, uploading the data
# again costs far more than keeping it saves.
KEEP_SHARE = 1 / 16


def largest_heap(info) -> int:
    """Bytes of the device's largest device-local memory heap (of any heap, where none is device-local)."""
    heaps = [t.heap_size for t in info.memory_types if t.heap_device_local] or [t.heap_size for t in info.memory_types]
    return max(heaps)


def data_budget(context) -> tuple[int, int]:
    """(bytes one input's buffer may hold, bytes all of them together may hold) on `context`'s device."""
    info = context.info
    per_buffer = min(info.limits.max_storage_buffer_range, info.limits.max_buffer_size)
    return per_buffer, int(largest_heap(info) * HEAP_SHARE)


class KeptBuffers:
    """The buffers of the last data set closed, by (input name, kind, bytes), until one of other sizes replaces them
    or the session closes; none that take more than `limit` bytes together."""

    def __init__(self, limit: int):
        self.limit = limit
        self.buffers: dict[tuple, object] = {}

    @classmethod
    def on(cls, context) -> "KeptBuffers":
        return cls(int(largest_heap(context.info) * KEEP_SHARE))

    def take(self, key: tuple, make):
        """The kept buffer under `key`, or `make()`'s."""
        buffer = self.buffers.pop(key, None)
        return make() if buffer is None else buffer

    def only(self, keys) -> None:
        """Destroy the kept buffers not under `keys`, before a data set that will not take them makes its own."""
        for key in [key for key in self.buffers if key not in keys]:
            self.buffers.pop(key).destroy()

    def keep(self, buffers: Mapping[tuple, object]) -> None:
        """Hold `buffers` (by key) instead of those held so far, which are destroyed; destroy them too where they
        take more than `limit` bytes."""
        self.destroy()
        self.buffers = dict(buffers)
        if sum(key[2] for key in self.buffers) > self.limit:
            self.destroy()

    def destroy(self) -> None:
        for buffer in self.buffers.values():
            buffer.destroy()
        self.buffers = {}


class ResidentData:
    """`sources` (name -> float32 array of rows, a `CudaInput` of float32 rows, or a `DeviceArray`) on `context`'s
    device, whole or one shard at a time; its buffers taken from `kept` where it holds some of the same sizes, and
    handed back to it on `close`."""

    def __init__(self, context, sources: Mapping[str, np.ndarray | CudaInput | DeviceArray], kept: KeptBuffers):
        from coopnn.runtime.vk.memory import HostAccess

        self.context = context
        self.kept = kept
        self.sources = {name: source if isinstance(source, (CudaInput, DeviceArray))
                        else np.ascontiguousarray(source, np.float32).reshape(len(source), -1)
                        for name, source in sources.items()}
        self.count = rows_of(next(iter(self.sources.values())))
        row_bytes = {name: _row_bytes(source) for name, source in self.sources.items()}
        per_buffer, total = data_budget(context)
        fit = min(min(per_buffer // b for b in row_bytes.values()), total // sum(row_bytes.values()), MAX_ROWS - 1)
        if fit < 1:
            raise InputError(f"one training sample ({sum(row_bytes.values())} bytes) does not fit on "
                             f"{context.info.name}")
        shard_rows = min(self.count, fit)
        self.shards = [(start, min(start + shard_rows, self.count)) for start in range(0, self.count, shard_rows)]
        if len(self.shards) > 1:
            size = self.count * sum(row_bytes.values())
            warnings.warn(f"the training data ({size / 2**30:.2f} GiB) does not fit on {context.info.name} "
                          f"(at most {shard_rows * sum(row_bytes.values()) / 2**30:.2f} GiB); it is streamed in "
                          f"{len(self.shards)} shards of {shard_rows} samples, each run of steps drawing its batches "
                          f"from one shard", stacklevel=3)
        self.buffers = {}
        self._keys: dict[str, tuple] = {}  # of the buffers ours, as `kept` holds them
        made = {}  # name -> (key, what makes its buffer)
        for name, source in self.sources.items():
            size = shard_rows * row_bytes[name]
            if isinstance(source, DeviceArray) and len(self.shards) == 1:
                self.buffers[name] = source.bound_in(context)  # not ours to fill, keep or destroy
            elif isinstance(source, CudaInput):
                made[name] = (name, "cuda", size), lambda size=size: CudaRows(context, size)
            else:
                access = HostAccess.NONE if isinstance(source, DeviceArray) else HostAccess.WRITE
                made[name] = (name, access, size), lambda size=size, access=access: context.create_buffer(size, access)
        kept.only({key for key, _ in made.values()})
        self.shard = -1
        try:
            for name, (key, make) in made.items():
                self.buffers[name] = kept.take(key, make)
                self._keys[name] = key
            self.select(0)
        except BaseException:
            self._destroy()
            raise

    @property
    def rows(self) -> int:
        """Rows of the shard on the device."""
        start, stop = self.shards[self.shard]
        return stop - start

    def select(self, shard: int) -> None:
        """Put shard `shard` (counted modulo the number of shards) on the device."""
        shard %= len(self.shards)
        if shard == self.shard:
            return
        start, stop = self.shards[shard]
        for name, buffer in self.buffers.items():
            source = self.sources[name]
            if name not in self._keys:
                continue
            if isinstance(source, CudaInput):
                buffer.fill(source, start, stop)
            elif isinstance(source, DeviceArray):
                row_bytes = _row_bytes(source)
                self.context.copy(source.bound_in(self.context).handle, buffer.handle, start * row_bytes, 0,
                                  (stop - start) * row_bytes)
            else:
                buffer.upload(source[start:stop].reshape(-1))
        self.shard = shard

    def close(self) -> None:
        """Hand our buffers to `kept`; once."""
        if not self._keys:
            self.buffers = {}
            return
        self.kept.keep({key: self.buffers[name] for name, key in self._keys.items()})
        self.buffers, self._keys = {}, {}

    def _destroy(self) -> None:
        for name in self._keys:
            self.buffers[name].destroy()
        self.buffers, self._keys = {}, {}


def _row_bytes(source) -> int:
    if isinstance(source, CudaInput):
        return source.row_bytes
    return int(np.prod(source.shape[1:], dtype=np.int64)) * 4
