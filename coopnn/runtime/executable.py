"""Running a compiled `Binary` on a Vulkan device: the executable shared by every SPIR-V target's backend.

The weight buffer is uploaded once; batches go through the host path (`coopnn.runtime.host_path`): chunks pipelined
over a small pool of I/O slots, copied in and out by several threads, with nothing allocated per call once the slots
have grown. One executable serves many threads at once; new weights and `close()` wait for the runs in flight.
"""

from __future__ import annotations

import os
import threading
from typing import Callable, Mapping

import numpy as np

from coopnn.errors import BackendUnavailableError, CompileError, DeviceMemoryError, InputError
from coopnn.graph.ir import Graph
from coopnn.layouts.pack import WeightImage
from coopnn.runtime import host_arrays
from coopnn.runtime.run_gate import RunGate
from coopnn.shaders.targets.base import Binary

# One chunk's input or output buffer stays below this, so a huge batch never needs huge device allocations.
MAX_IO_BUFFER_BYTES = 128 << 20
# Bytes of input and output buffers one model may hold on the device (all its slots together), and of the per-sample
# buffers of one training step (`coopnn.train.gpu.session`), when set: a bound below the device's own limits, for
# devices shared with other work (and for tests on small CPU devices).
MAX_DEVICE_BYTES_ENV = "COOPNN_MAX_DEVICE_BYTES"
# Results at least this large are copied by the GPU straight into the result array (imported host memory) rather than
# into the slot's staging memory and then by the host.
IMPORT_MIN_BYTES = 1 << 20


def chosen_device(device: str | int | None):
    """The DeviceInfo `device` names (see `runtime/vk/shared.open_context`), or BackendUnavailableError."""
    from coopnn.runtime.vk.shared import chosen_device

    return chosen_device(device)


def load_kernel(context, binary: Binary, name: str = "", capture_statistics: bool = False):
    """The pipeline of `binary` on `context` (a `VulkanContext` or scope of one), called `name` or the binary's;
    `capture_statistics` as `ComputeKernel` takes it. BackendUnavailableError where the device lacks a feature or
    extension the binary needs (a kernel of another backend than the context was opened for)."""
    from coopnn.runtime.vk.shared import refuse_lacking

    refuse_lacking(context.info, binary.features, binary.extensions, name or binary.name or f"the {binary.target} kernel")
    return context.create_kernel(binary.spirv, binary.binding_count, binary.push_constant_size, binary.workgroup_size,
                                 entry_point=binary.entry_point, name=name or binary.name,
                                 capture_statistics=capture_statistics)


class KernelExecutable:
    """A Binary on its device's shared context (`runtime/vk/shared.py`), ready to run batches from any number of
    threads."""

    def __init__(self, binary: Binary, graph: Graph, device: str | int | None,
                 sources: Mapping[str, tuple[str, ...]] | None = None,
                 io_variants: Mapping[str, Callable[[], Binary]] | None = None):
        """`sources`: the graph constants each weight entry holds unchanged (`KernelProgram.sources`). `io_variants`:
        by I/O dtype ("f16"), a maker of the same kernel reading and writing that dtype, against the same weight
        manifest (`kernel_for` makes it on first use)."""
        from coopnn.runtime.host_path import SLOTS, SlotPool, chunk_samples, row_bytes
        from coopnn.runtime.vk.memory import HostAccess
        from coopnn.runtime.vk.shared import open_context

        self.binary = binary
        self.graph = graph
        self.sources = dict(sources or {})
        self.context = open_context(device, features=binary.features, extensions=binary.extensions)
        try:
            info = self.context.info
            self.kernel = load_kernel(self.context, binary, graph.name)
            # with device addresses, the weights can be converted into place on the device (`refresh` of coopvec)
            self.weight_buffer = self.context.create_buffer(len(binary.weight_image.data), HostAccess.NONE,
                                                      device_address="bufferDeviceAddress" in binary.features)
            self.weight_buffer.upload(np.frombuffer(binary.weight_image.data, np.uint8))
            self.inputs = tuple(b for b in binary.bindings if b.role == "input")
            self.outputs = tuple(b for b in binary.bindings if b.role == "output")
            widest = max(max(b.features * b.itemsize for b in binary.bindings if b.role != "weights"), 1)
            group_limit = info.limits.max_compute_work_group_count[0] * binary.workgroup_size[0]
            range_limit = info.limits.max_storage_buffer_range // widest
            bounds = [group_limit, range_limit, MAX_IO_BUFFER_BYTES // widest]
            if (device_limit := device_bytes_limit()) is not None:
                bounds.append(device_limit // (SLOTS * row_bytes(self.inputs, self.outputs)))
            self.max_chunk = max(1, min(bounds))
            # samples per pipelined chunk; tests lower it to cross chunk boundaries with small batches
            self.chunk = chunk_samples(self.inputs, self.outputs, self.max_chunk, binary.workgroup_size[0])
            self.slots = SlotPool(self._make_slot)
            self.gate = RunGate(f"model {graph.name!r}")
            self.last_gpu_ms: float | None = None
            self.last_timing = None
            self._attachments: dict[str, object] = {}
            self._attachments_lock = threading.Lock()
            self._io_variants = dict(io_variants or {})
            # the host path's kernel: float32 rows in and out, as every target reads them
            self._io_kernels = {"f32": (binary, self.kernel)}
        except BaseException:
            self.context.close()
            raise

    def _make_slot(self):
        from coopnn.runtime.host_path import IOSlot

        return IOSlot(self.context, self.kernel, self.weight_buffer, self.inputs, self.outputs,
                      lambda n: self.binary.pack_push(count=n))

    def run(self, feeds: Mapping[str, np.ndarray],
            out: Mapping[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
        """Outputs for `feeds` (arrays of any float dtype and strides, keyed by input name), written into the arrays
        of `out` where given (C-contiguous, float32 or bool as the output is, checked by the caller)."""
        from coopnn.runtime.host_path import run_chunks, split_batch

        batch = next(iter(feeds.values())).shape[0]
        out = out or {}
        shaped = {v.name: out[v.name] if v.name in out else
                  host_arrays.empty((batch,) + v.features, np.bool_ if v.dtype == "bool" else np.float32)
                  for v in self.graph.outputs}
        # the kernel writes float32 rows; boolean outputs go through a float32 array and are compared after
        rows = {b.name: (np.empty((batch, b.features), np.float32) if shaped[b.name].dtype == np.bool_
                         else shaped[b.name].reshape(batch, b.features)) for b in self.outputs}
        if batch:
            chunk = split_batch(batch, min(self.chunk, self.max_chunk), self.inputs, self.outputs,
                                self.binary.workgroup_size[0])
            with self.gate.shared():
                try:
                    timing = run_chunks(self.slots, self.inputs, self.outputs, feeds, rows, chunk, self.max_chunk,
                                        self._imported_results(rows))
                except DeviceMemoryError:
                    if chunk <= self.binary.workgroup_size[0]:
                        raise
                    # once more with chunks half as large, which later runs keep: the device had less memory free
                    # than the chunk needed (other work on it, or a driver's own limits)
                    self.max_chunk = max(1, chunk // 2)
                    timing = run_chunks(self.slots, self.inputs, self.outputs, feeds, rows, self.max_chunk,
                                        self.max_chunk, self._imported_results(rows))
            self.last_timing, self.last_gpu_ms = timing, timing.gpu_ms
        for name, array in shaped.items():
            if array.dtype == np.bool_:
                np.not_equal(rows[name].reshape(array.shape), 0, out=array)
        return shaped

    def _imported_results(self, rows: Mapping[str, np.ndarray]) -> dict:
        """Output bindings whose result array is a pooled host block large enough to gain from the GPU copying into
        it directly, each with the block's import in this context and the offset of the array in it."""
        from coopnn.runtime.vk.host_import import ImportedHostBuffer, import_alignment

        alignment = import_alignment(self.context)
        if alignment is None:
            return {}
        imported = {}
        for b in self.outputs:
            found = host_arrays.block_of(rows[b.name])
            if found is None or rows[b.name].nbytes < IMPORT_MIN_BYTES:
                continue
            block, offset = found
            if block.address % alignment or block.size % alignment:
                continue
            context = self.context
            imported[b.index] = (block.imported(id(context), lambda: ImportedHostBuffer(
                context, block.address, block.size)), offset)
        return imported

    def replace_weights(self, packed: WeightImage) -> bool:
        """Upload new weight values laid out as the current ones (same entries); False, leaving the weights as they
        were, when the layout differs and the model needs preparing anew."""
        if packed.entries != self.binary.weight_image.entries or len(packed.data) != len(self.binary.weight_image.data):
            return False
        with self.gate.exclusive():
            self.weight_buffer.upload(np.frombuffer(packed.data, np.uint8))
        return True

    def copy_into_weights(self, source, regions: list[tuple[int, int, int]]) -> None:
        """Copy (source offset, weight-buffer offset, bytes) regions of another buffer of this device's shared
        context into the weights, on the GPU, once the runs in flight are done."""
        from coopnn.runtime.vk.loader import load_vulkan

        vk = load_vulkan()
        copies = [vk.VkBufferCopy(srcOffset=s, dstOffset=d, size=n) for s, d, n in regions]
        with self.gate.exclusive():
            self.context.submit(lambda cmd: vk.vkCmdCopyBuffer(cmd, source.handle, self.weight_buffer.handle,
                                                               len(copies), copies))

    def kernel_for(self, io_dtype: str):
        """(binary, kernel) of this executable's kernel reading inputs and writing outputs of `io_dtype` ("f32" or
        "f16"), built on first use; InputError where the backend has no such kernel."""
        with self._attachments_lock:
            if io_dtype not in self._io_kernels:
                make = self._io_variants.get(io_dtype)
                if make is None:
                    have = ", ".join(sorted({"f32", *self._io_variants}))
                    raise InputError(f"model {self.graph.name!r} ({self.binary.target}) reads and writes {have} "
                                     f"arrays, not {io_dtype}: float16 device arrays run on the coopvec backend")
                binary = make()
                kernel = load_kernel(self.context, binary, f"{self.graph.name} ({io_dtype} I/O)")
                self._io_kernels[io_dtype] = (binary, kernel)
            return self._io_kernels[io_dtype]

    def attachment(self, key: str, make: Callable[[], object]):
        """The object kept under `key` for this executable's life, made by `make()` on first use and closed before
        the executable: how the layers above (the CUDA bridge) keep state per executable."""
        with self._attachments_lock:
            if key not in self._attachments:
                self._attachments[key] = make()
            return self._attachments[key]

    @property
    def debug_messages(self) -> list[str]:
        return list(self.context.debug_messages)

    def close(self) -> None:
        if self.gate.close():
            for attached in self._attachments.values():
                attached.close()
            self.slots.destroy()
            self.context.close()


def device_unavailable_reason(device: str | int | None, needs: Callable[[object], str | None]) -> str | None:
    """None when a Vulkan device is there and `needs(info)` accepts it; otherwise why not."""
    try:
        info = chosen_device(device)
    except BackendUnavailableError as e:
        return str(e)
    return needs(info)


def compile_or_reason(compile_fn: Callable[[], Binary]) -> tuple[Binary | None, str | None]:
    try:
        return compile_fn(), None
    except CompileError as e:
        return None, str(e)


def device_bytes_limit() -> int | None:
    """`COOPNN_MAX_DEVICE_BYTES` as a number of bytes (None when unset); InputError when it is not one."""
    value = os.environ.get(MAX_DEVICE_BYTES_ENV, "").strip()
    if not value:
        return None
    try:
        limit = int(value)
    except ValueError:
        limit = -1
    if limit < 1:
        raise InputError(f"{MAX_DEVICE_BYTES_ENV}={value!r}: give a positive number of bytes")
    return limit
