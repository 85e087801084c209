"""`CudaBridge`: runs a `KernelExecutable`'s kernel on CUDA arrays (PyTorch, CuPy, ...) without a trip through the host;
`CudaBridges` (what `bridge_for` gives) holds one a kernel I/O dtype, so float16 arrays run the float16-I/O kernel.

The bridge orders the work of both APIs; what it orders lives in modules of its own: `shared_objects` (Vulkan buffers
and timeline semaphores imported into CUDA, and where their memory lives), `slot` (the SLOTS submissions that can be in
flight, their input buffers and recordings), `output_pool` (the pooled output buffers and their lifetimes) and
`tensors` (reading the caller's arrays and wrapping outputs in its framework).

Ordering, all on the GPU, with timeline semaphores exported from Vulkan and imported into CUDA:
  1. on the caller's stream: the input copies, then a signal of the slot's `inputs_ready` timeline to the slot's next
     value (cuSignalExternalSemaphoresAsync);
  2. on the Vulkan queue: a submission that waits for that value, acquires the shared buffers from the external queue
     family, dispatches, releases them, and signals the bridge's `done` timeline; only the queue signals `done`, in
     submission order, so its values only grow;
  3. on the caller's stream: a wait for that value (cuWaitExternalSemaphoresAsync), so whatever the caller queues after
     `run` sees the outputs.
The host does not wait for the GPU in a run, except to reuse a slot whose previous submission is still running (the
host is then SLOTS runs ahead). A slot's `inputs_ready` values only grow because a slot is reused only after its
previous submission, which waited for the previous value, has finished.
Cost: each run hands the GPU from the CUDA context to Vulkan's and back, a fixed cost (with timeline or binary
semaphores alike) that dominates small batches: the CUDA-tensor column of `bench/results/*-host-path.md`. The
queue-family ownership barriers cost nothing measurable, and having the host wait for the copies before submitting,
or order both APIs itself, was slower, so the GPU orders them.

Lifetimes:
  - Reuse across calls: slots, semaphores and descriptor sets are made once, and each slot's recordings once per
    batch size and buffers bound (`slot.py`), so a repeated call records nothing; buffers are made only when a larger
    batch arrives or the caller still holds every pooled buffer of its stream.
  - `close()` (the model closed) waits for the bridge's submissions and for the context's CUDA work, then frees slots,
    semaphores and pooled buffers; outputs still alive keep their memory (`output_pool`), so an output may outlive
    its model.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, Mapping

from coopnn.errors import BackendUnavailableError, InputError, ModelClosedError
from coopnn.interop import tensors
from coopnn.interop.cuda_driver import CudaDriver, cuda_driver
from coopnn.interop.output_pool import CudaOutput, OutputPool
from coopnn.interop.shared_objects import SharedBuffer, SharedTimeline
from coopnn.interop.slot import Prologue, Slot
from coopnn.interop.vk_export import interop_unavailable_reason

SLOTS = 3


class _RunTiming:
    """The GPU time of one run's dispatches: read from a slot's timestamps before the run reuses it, and from the
    slots still holding theirs when asked."""

    def __init__(self):
        self._pending: list[Slot] = []
        self._measured: list[float | None] = []

    def restart(self) -> None:
        """Forget the last run's measurements (a run starts)."""
        self._pending.clear()
        self._measured.clear()

    def reusing(self, slot: Slot) -> None:
        slot.wait()
        if slot in self._pending:
            self._pending.remove(slot)
            self._measured.append(slot.elapsed_ms())

    def submitted(self, slot: Slot) -> None:
        self._pending.append(slot)

    def total_ms(self) -> float | None:
        times = self._measured + [slot.elapsed_ms() for slot in self._pending]
        return None if not times or None in times else sum(times)


def _typestr(binding) -> str:
    return tensors.KERNEL_TYPESTRS[binding.dtype]


class _Resources:
    """Everything a bridge owns, freed by `close` (directly, or when the bridge is collected)."""

    def __init__(self, context, driver: CudaDriver, cuda_context: int, bindable_limit: int):
        self.context = context
        self.driver = driver
        self.cuda_context = cuda_context
        self.slots: list[Slot] = []
        self.done: SharedTimeline | None = None
        self.pool = OutputPool(context, driver, cuda_context, bindable_limit)

    def close(self) -> None:
        try:
            if not self.context.closed:
                for slot in self.slots:
                    slot.wait()
            with self.driver.current(self.cuda_context):
                self.driver.synchronize()  # no queued CUDA work may still use what is freed below
                for slot in self.slots:
                    slot.release_cuda()
                if self.done is not None:
                    self.done.release_cuda()
                self.pool.close()
        finally:
            for slot in self.slots:
                slot.release_vulkan()
            if self.done is not None:
                self.done.release_vulkan()


class CudaBridge:
    """Runs `executable` (a `KernelExecutable`) on CUDA arrays: `run({name: array})` returns {name: array} in the
    caller's framework, ordered on the caller's stream; see the module docstring for the mechanism and lifetimes.
    `io_dtype`: the rows its kernel reads and writes (`KernelExecutable.kernel_for`): "f32", or "f16", whose outputs
    stay float16."""

    def __init__(self, executable, io_dtype: str = "f32"):
        context = executable.context
        reason = interop_unavailable_reason(context)
        if reason is not None:
            raise BackendUnavailableError(reason)
        self._executable = executable
        self._binary, self._kernel = executable.kernel_for(io_dtype)
        self._keeps_float16 = io_dtype == "f16"
        self._context = context
        self._driver = cuda_driver()
        ordinal = self._driver.ordinal_of_uuid(context.info.device_uuid)
        if ordinal is None:
            raise BackendUnavailableError(f"CUDA does not see {context.info.name} (Vulkan device UUID "
                                          f"{context.info.device_uuid}); check CUDA_VISIBLE_DEVICES")
        self.device = ordinal
        graph = executable.graph
        self._input_features = {v.name: tuple(v.features) for v in graph.inputs}
        self._outputs = {v.name: (tuple(v.features), v.dtype == "bool") for v in graph.outputs}
        self._input_bindings = tuple(b for b in self._binary.bindings if b.role == "input")
        self._output_bindings = tuple(b for b in self._binary.bindings if b.role == "output")
        limits = context.info.limits
        widest = max(b.features * b.itemsize for b in self._input_bindings + self._output_bindings)
        self.chunk_limit = max(1, min(limits.max_storage_buffer_range // widest,
                                      limits.max_compute_work_group_count[0] * self._kernel.workgroup_size[0]))
        self._lock = threading.Lock()
        cuda_context = self._driver.primary_context(ordinal)
        self._resources = _Resources(context, self._driver, cuda_context, limits.max_storage_buffer_range)
        self._closer = weakref.finalize(self, self._resources.close)
        self._closer.atexit = False  # at exit the process's end frees CUDA's side, the context's close the rest
        try:
            with self._driver.current(cuda_context):
                self._resources.done = SharedTimeline(context, self._driver)
                for _ in range(SLOTS):
                    self._resources.slots.append(Slot(context, self._driver, len(self._input_bindings),
                                                      len(self._output_bindings)))
        except BaseException:
            self.close()
            raise
        self._next_slot = 0
        self._timing = _RunTiming()

    @property
    def closed(self) -> bool:
        return not self._closer.alive

    def run(self, feeds: Mapping[str, Any], prologue: Prologue | None = None) -> dict[str, Any]:
        """Run the kernel on CUDA arrays keyed by input name; outputs keyed by output name, in the framework of the
        first input, ready on its stream. `prologue` is recorded before the first chunk's dispatch, in the same
        submission (after the caller's stream reached this call)."""
        with self._lock:
            if self.closed:
                raise ModelClosedError("this model is closed; load it again to run it")
            # new weights and the executable's close wait for this host part; the GPU part is ordered by the queue
            with self._executable.gate.shared():
                return self._run(feeds, prologue)

    def _read_inputs(self, feeds: Mapping[str, Any]) -> list[tensors.CudaInput]:
        missing = [b.name for b in self._input_bindings if b.name not in feeds]
        if missing:
            raise InputError(f"missing inputs {missing}; expected {[b.name for b in self._input_bindings]}")
        inputs = [tensors.as_cuda_input(b.name, feeds[b.name], self._input_features[b.name], b.dtype)
                  for b in self._input_bindings]
        first = self._input_bindings[0].name
        for binding, given in zip(self._input_bindings, inputs):
            if given.rows != inputs[0].rows:
                raise InputError(f"input {binding.name!r} has batch {given.rows}, input {first!r} has "
                                 f"{inputs[0].rows}")
            if given.stream != inputs[0].stream:
                raise InputError(f"input {binding.name!r} is on CUDA stream {given.stream:#x}, input {first!r} on "
                                 f"{inputs[0].stream:#x}; put them on one stream")
            device = given.device
            if device is None and given.rows:
                device = self._driver.pointer_device(given.pointer)
            if device is not None and device != self.device:
                raise InputError(f"input {binding.name!r} is on cuda:{device}; the model runs on "
                                 f"{self._context.info.name}, which is cuda:{self.device}")
        return inputs

    def _run(self, feeds: Mapping[str, Any], prologue: Prologue | None) -> dict[str, Any]:
        resources = self._resources
        with self._driver.current(resources.cuda_context):
            inputs = self._read_inputs(feeds)
            batch, stream = inputs[0].rows, inputs[0].stream
            framework = tensors.framework_of(feeds[self._input_bindings[0].name])
            if batch == 0:
                return {b.name: tensors.wrap_output(CudaOutput(0, (0,) + self._outputs[b.name][0], _typestr(b)),
                                                    framework, self.device, stream, self._outputs[b.name][1],
                                                    self._keeps_float16)
                        for b in self._output_bindings}
            resources.pool.reclaim()
            single = batch <= self.chunk_limit
            lent = []
            try:
                for binding in self._output_bindings:
                    lent.append(resources.pool.lend(batch * binding.features * binding.itemsize, stream, single))
                self._timing.restart()
                for start in range(0, batch, self.chunk_limit):
                    self._dispatch(inputs, lent, start, min(self.chunk_limit, batch - start), single, stream,
                                   prologue if start == 0 else None)
            except BaseException:
                for buffer in lent:
                    resources.pool.take_back(buffer, stream)
                raise
            # later work on the caller's stream waits for the last submission, which follows all earlier ones
            self._driver.wait(resources.done.args, resources.done.value, stream)
            # every buffer is owned by an output object before any is wrapped, so a failure gives them all back
            made = [resources.pool.output(buffer, (batch,) + self._outputs[b.name][0], _typestr(b), stream)
                    for b, buffer in zip(self._output_bindings, lent)]
            return {b.name: tensors.wrap_output(output, framework, self.device, stream, self._outputs[b.name][1],
                                                self._keeps_float16)
                    for b, output in zip(self._output_bindings, made)}

    def _dispatch(self, inputs: list[tensors.CudaInput], outputs: list[SharedBuffer], start: int, count: int,
                  single: bool, stream: int, prologue: Prologue | None) -> None:
        """Copy rows [start, start + count) in on `stream` and submit their dispatch (after `prologue`) on a free
        slot."""
        executable = self._executable
        slot = self._resources.slots[self._next_slot]
        self._next_slot = (self._next_slot + 1) % SLOTS
        self._timing.reusing(slot)
        for index, given in enumerate(inputs):
            buffer = slot.input_buffer(index, count * given.row_bytes)
            self._driver.copy_rows(buffer.pointer, given.pointer + start * given.pitch, given.row_bytes, count,
                                   given.pitch, stream)
        slot.inputs_ready.value += 1
        self._driver.signal(slot.inputs_ready.args, slot.inputs_ready.value, stream)
        copies = []
        if single:
            bound_outputs = outputs
        else:
            bound_outputs = [slot.chunk_output(index, count * b.features * b.itemsize)
                             for index, b in enumerate(self._output_bindings)]
            copies = [(chunk, whole, start * b.features * b.itemsize, count * b.features * b.itemsize)
                      for chunk, whole, b in zip(bound_outputs, outputs, self._output_bindings)]
        shared = [b for b in slot.inputs if b is not None] + list(outputs)
        slot.record(self._kernel, (executable.weight_buffer, *slot.inputs, *bound_outputs), shared,
                    self._binary.pack_push(count=count), self._kernel.group_count_for(count), copies, prologue)
        slot.submit(slot.inputs_ready.value, self._resources.done)
        self._timing.submitted(slot)

    @property
    def last_gpu_ms(self) -> float | None:
        """GPU time of the last run's dispatches in ms (waits for them to finish); None without timestamps."""
        with self._lock:
            return self._timing.total_ms()

    def pool_counts(self) -> dict[str, int]:
        """Pooled output buffers: idle, and lent to outputs still alive."""
        return self._resources.pool.counts()

    def close(self) -> None:
        """Free what the bridge owns once its work is done; outputs still alive keep their memory (`output_pool`).
        Harmless when closed already."""
        with self._lock:
            self._closer()


class CudaBridges:
    """The bridges of one executable by I/O dtype, each made on first use: float16 arrays in (every input) take the
    float16-I/O kernel where the executable has one and get float16 arrays back; anything else, or a backend without
    that kernel, takes the float32 one (which converts float16 inputs on the GPU, as for other dtypes)."""

    def __init__(self, executable):
        self._executable = executable
        self._bridges: dict[str, CudaBridge] = {}
        self._last: CudaBridge | None = None
        self._halves: bool | None = None  # whether the executable has a float16-I/O kernel, once asked
        self._lock = threading.Lock()

    def _bridge(self, feeds: Mapping[str, Any]) -> CudaBridge:
        io_dtype = "f32"
        if feeds and all(tensors.is_float16(v) for v in feeds.values()):
            if self._halves is None:
                try:
                    self._executable.kernel_for("f16")
                    self._halves = True
                except InputError:
                    self._halves = False
            io_dtype = "f16" if self._halves else "f32"
        with self._lock:
            if io_dtype not in self._bridges:
                self._bridges[io_dtype] = CudaBridge(self._executable, io_dtype)
            return self._bridges[io_dtype]

    def run(self, feeds: Mapping[str, Any], prologue: Prologue | None = None) -> dict[str, Any]:
        bridge = self._bridge(feeds)
        self._last = bridge
        return bridge.run(feeds, prologue)

    @property
    def last_gpu_ms(self) -> float | None:
        """GPU time of the last run's dispatches in ms; None before the first or without timestamps."""
        return None if self._last is None else self._last.last_gpu_ms

    def close(self) -> None:
        with self._lock:
            for bridge in self._bridges.values():
                bridge.close()


def bridge_for(executable) -> CudaBridges:
    """The bridges of `executable` (a `KernelExecutable`), made on first use and closed with it."""
    return executable.attachment("cuda_bridge", lambda: CudaBridges(executable))
