"""`BatchInputs`: one batch put into a training step's input buffers, from wherever the caller holds it.

Host arrays are written into the buffers (mapped or staged); coopnn device arrays are copied on the GPU; CUDA arrays
(`CudaInput`s: PyTorch, CuPy, ...) are first copied by CUDA into a buffer shared with it (`CudaRows`, kept per input
and grown with the batch), then on the GPU like device arrays. The GPU copies go in a small submission of their own
(`QueuedCopies`, which also takes the shared buffers from CUDA and hands them back), which waits on the GPU for CUDA's
copies where they were queued on one stream (a `CopiedSignal`; the host waits for CUDA where there are several), and
which the step's submission, next on the queue, runs after: the step itself is recorded once per batch size and
never names the caller's buffers, so new arrays every step cost no recording.
"""

from __future__ import annotations

import functools
from typing import Any, Mapping, Sequence

import numpy as np

from coopnn.interop.device_arrays import DeviceArray
from coopnn.interop.cuda_rows import CopiedSignal, CudaRows, acquired, released
from coopnn.interop.tensors import CudaInput
from coopnn.runtime.vk.loader import load_vulkan

TRANSFER_READ = load_vulkan().VK_ACCESS_TRANSFER_READ_BIT


class BatchInputs:
    """The batch writer of a session on `context`; `close` frees what it made."""

    def __init__(self, context):
        self.context = context
        self._copies = None  # a QueuedCopies, once a batch is on the GPU
        self._shared: dict[int, CudaRows] = {}  # input binding -> its shared buffer, once a batch is in CUDA arrays
        self._signal = None  # a CopiedSignal, once a batch in CUDA arrays came on one stream

    @functools.cached_property
    def takes_cuda_arrays(self) -> bool:
        """Whether CUDA arrays go to the GPU through memory shared with CUDA (else the caller copies them through
        the host)."""
        from coopnn.interop.vk_export import interop_unavailable_reason

        return interop_unavailable_reason(self.context) is None

    def write(self, inputs: Sequence, buffers: Mapping[int, Any], sources: Mapping[int, Any],
              batch: int) -> tuple[int, ...]:
        """Fill each binding of `inputs` (bindings of role "input") in `buffers` (by binding index) with rows 0 to
        `batch` of `sources[index]` (padding samples read row 0: `coopnn.shaders.targets.sampler`);
        the GPU copies are submitted before this returns. The bindings filled on the GPU."""
        from coopnn.runtime.vk.queued_copies import QueuedCopies

        copies, copied, filled, streams = [], [], [], set()
        for b in inputs:
            source, target = sources[b.index], buffers[b.index]
            if isinstance(source, DeviceArray):
                copies.append((source.bound_in(self.context).handle, target.handle, source.nbytes))
                copied.append(b.index)
            elif isinstance(source, CudaInput):
                shared = self._shared_rows(b.index, batch * source.row_bytes)
                shared.copy_in(source, 0, batch)
                filled.append(shared)
                streams.add(source.stream)
                copies.append((shared.handle, target.handle, batch * source.row_bytes))
                copied.append(b.index)
            else:
                target.write_rows(np.asarray(source).reshape(batch, -1), b.numpy_dtype)
        wait = self._cuda_copies_done(filled, streams) if filled else None
        if copies:
            if self._copies is None:
                self._copies = QueuedCopies(self.context)
            # Buffers shared with CUDA are taken from it for the copies and handed back after them, so that the next
            # batch's CUDA copies need no Vulkan submission of their own.
            self._copies.submit(copies, before=acquired(filled, TRANSFER_READ) if filled else None,
                                after=released(filled, TRANSFER_READ) if filled else None, wait=wait)
        return tuple(copied)

    def _cuda_copies_done(self, filled: Sequence[CudaRows], streams: set[int]) -> tuple[object, int] | None:
        """What the GPU copies wait for, CUDA's copies into `filled` being queued on `streams`: on one stream (the
        caller's current one), a signal CUDA raises after them, as (semaphore, value); on several, nothing, the host
        having waited for CUDA here. A step returns once its submission is done, so the next batch's CUDA copies
        never overwrite a shared buffer the GPU still reads, and the signal's values only grow."""
        if len(streams) > 1:
            filled[0].wait()  # the whole CUDA context, every stream
            return None
        if self._signal is None:
            self._signal = CopiedSignal(filled[0])
        return self._signal.after(next(iter(streams)))

    def _shared_rows(self, index: int, size: int) -> CudaRows:
        rows = self._shared.get(index)
        if rows is None or rows.size < size:
            if rows is not None:
                del self._shared[index]
                rows.destroy()
            self._shared[index] = rows = CudaRows(self.context, size)
        return rows

    def close(self) -> None:
        if self._copies is not None:
            self._copies.destroy()
            self._copies = None
        if self._signal is not None:
            self._signal.destroy()
            self._signal = None
        for rows in self._shared.values():
            rows.destroy()
        self._shared = {}

