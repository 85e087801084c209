"""A training step's per-sample buffers (`StepBuffers`): the most samples a step may hold (`capacity_bounds`), and
how many samples they are made for when the device runs out of memory making them.

A step's per-sample buffers (tape, inputs, targets, losses) are made for a capacity of samples, rounded up from the
batch so that nearby batch sizes reuse them. When the driver reports out of memory while they are made (other work
on the device, or a driver's own limits: what the bounds computed beforehand cannot see), `make_fitting` measures
what fits by making them again for fewer samples: the batch itself without the rounding up, then halves of it.
Training on a smaller batch than asked would change the optimisation, so it never does so silently: the step is
refused with a DeviceMemoryError naming the largest batch whose buffers were made, and none of them stay allocated.
"""

from __future__ import annotations

from typing import Callable

from coopnn.errors import DeviceMemoryError, InputError
from coopnn.runtime.executable import MAX_DEVICE_BYTES_ENV, device_bytes_limit
from coopnn.shaders.training.step_state import LOSS_TILE
from coopnn.train.gpu.resident import HEAP_SHARE, largest_heap

# One step's tape stays below this, whatever the device allows, so a mistaken batch size fails with a clear error
# rather than exhausting device memory.
MAX_TAPE_BYTES = 2 << 30
# Bindings of buffers the session makes once, not per sample of capacity: the training state words, the partial
# gradients a fused step kernel writes (`prepare_tape` makes those), the flat gradient a trained grid's is added into
SESSION_ROLES = ("state", "partials", "table_gradient")
# Bytes of the tape buffer bound where a step keeps no tape (Vulkan buffers are never empty)
UNUSED_TAPE = 16


def largest(fits: Callable[[int], bool], most: int) -> int:
    """The largest capacity up to `most` for which `fits(capacity)` holds (0 if none); `fits` must hold for every
    capacity below one it holds for."""
    low, high = 0, most
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return low


def candidates(capacity: int, count: int, granularity: int) -> list[int]:
    """Capacities tried in turn: the one wanted, the batch's own `count`, then halves of it down to `granularity`
    (each a multiple of it)."""
    sizes = [capacity, count]
    while sizes[-1] > granularity:
        sizes.append(max(granularity, sizes[-1] // 2 // granularity * granularity))
    return list(dict.fromkeys(sizes))


def make_fitting(make: Callable[[int], None], free: Callable[[], None], capacity: int, count: int, granularity: int,
                 step: str) -> None:
    """`make(n)` a step's buffers for n = `capacity` samples or, where the device runs out of memory, for the first
    of `candidates` that fits, when it holds the batch's `count`; otherwise `free()` them and raise DeviceMemoryError
    naming the largest batch that fitted (`step` says which step). `make` leaves nothing allocated when it fails."""
    first: DeviceMemoryError | None = None
    for size in candidates(capacity, count, granularity):
        try:
            make(size)
        except DeviceMemoryError as error:
            first = first or error
            continue
        if size >= count:
            return
        free()
        raise DeviceMemoryError(f"{step} does not fit in the device memory free now ({first}); the buffers of "
                                f"{size} samples could be made: use batch_size={size} or less") from first
    raise DeviceMemoryError(f"{step} does not fit in the device memory free now ({first}), nor does a step of "
                            f"{granularity} samples: free other GPU work") from first


class StepBuffers:
    """The per-sample buffers of `KernelTrainingSession`'s step (its `io`, made for `capacity` samples, the chunks'
    partial gradients and the loss tiles' sums): what a sample takes in them, and making them for a batch within the
    class's `capacity_bounds`."""

    partials = None  # the chunks' partial gradients (`prepare_tape`)
    loss_sums = None  # the sums of the losses' tiles (`prepare_tape`)

    def sample_bytes(self) -> tuple[int, list[int]]:
        """Device bytes of one sample in a step's buffers: of its tape row (none where the step keeps no tape: the
        outer-product and fused methods), and of its row in each other buffer."""
        tape = (self.tape.width + self.tape_slack) * self.tape_itemsize if self.tape.layers else 0
        return tape, [b.features * b.itemsize for b in self.binary.bindings[1:]
                      if b.role != "tape" and b.role not in SESSION_ROLES]

    def capacity_bounds(self) -> dict[str, int]:
        """The most samples one step may hold under each bound on it, keyed by how a message names the bound. The
        buffers made per capacity rather than per sample (the partial gradients) count where they grow with it."""
        info = self.context.info
        tape, rows = self.sample_bytes()
        sample = max(tape + sum(rows), 1)
        buffer = min(info.limits.max_storage_buffer_range, info.limits.max_buffer_size)
        share = int(largest_heap(info) * (1 - HEAP_SHARE))

        def total(capacity: int) -> int:
            return capacity * sample + sum(self.capacity_buffer_bytes(capacity))

        bounds = {f"the device's largest buffer ({buffer} bytes)": largest(
                      lambda c: max(self.capacity_buffer_bytes(c)) <= buffer, buffer // max([tape, *rows, 1])),
                  f"the tape's bound ({MAX_TAPE_BYTES} bytes)": MAX_TAPE_BYTES // max(tape, 1),
                  "the device's workgroup count": (info.limits.max_compute_work_group_count[0]
                                                   * self.binary.workgroup_size[0]),
                  f"the share of its largest memory heap left beside the training data ({share} bytes)":
                      largest(lambda c: total(c) <= share, share // sample)}
        if (limit := device_bytes_limit()) is not None:
            bounds[f"{MAX_DEVICE_BYTES_ENV}={limit}"] = largest(lambda c: total(c) <= limit, limit // sample)
        return bounds

    def max_capacity(self) -> tuple[int, str]:
        """The largest batch one step holds (whole multiples of `granularity`), and the bound that sets it."""
        bound, most = min(self.capacity_bounds().items(), key=lambda item: item[1])
        return most // self.granularity * self.granularity, bound

    def invocations(self, batch: int) -> int:
        """The step kernel's invocations for `batch` samples: whole multiples of `granularity`, padding samples
        masked out."""
        return -(-batch // self.granularity) * self.granularity

    def _ensure_capacity(self, batch: int) -> None:
        count = self.invocations(batch)
        if count <= self.capacity:
            return
        most, bound = self.max_capacity()
        tape, rows = self.sample_bytes()
        if count > most:
            raise InputError(f"a training step of {batch} samples does not fit on {self.context.info.name}: one step "
                             f"holds at most {most} samples of this model ({tape + sum(rows)} bytes of step buffers "
                             f"a sample; bounded by {bound}); use batch_size={most} or less")
        capacity = min(most, max(self.granularity, 1 << (count - 1).bit_length()))
        self._free_io()
        make_fitting(self._make_io, self._free_io, capacity, count, self.granularity,
                     f"a training step of {batch} samples ({tape + sum(rows)} bytes of step buffers a sample) on "
                     f"{self.context.info.name}")

    def _make_io(self, capacity: int) -> None:
        """The step's per-sample buffers for `capacity` samples (none of them when one cannot be made)."""
        from coopnn.runtime.vk.memory import HostAccess

        try:
            for b in self.binary.bindings[1:]:
                if b.role == "tape":  # a step kernel that keeps no tape still binds one, never read
                    self.io[b.index] = self.context.create_buffer(max(capacity * self.sample_bytes()[0], UNUSED_TAPE),
                                                                  HostAccess.NONE)
                elif b.role not in SESSION_ROLES:
                    access = HostAccess.READ if b.role == "loss" else HostAccess.WRITE
                    self.io[b.index] = self.context.create_buffer(capacity * b.features * b.itemsize, access)
            self.capacity = capacity
            self.prepare_tape(capacity)
        except BaseException:
            self._free_io()
            raise

    def _free_io(self) -> None:
        for buffer in self.io.values():
            buffer.destroy()
        self.io, self.capacity = {}, 0
        self.prepare_tape(0)

    def prepare_tape(self, capacity: int) -> None:
        """Called when the tape was (re)made for `capacity` samples (0: there is none): (re)makes the sums of the
        losses' tiles (float32, one per `LOSS_TILE` samples of capacity) and the chunks' partial gradients (float32,
        `partial_chunks(capacity)` flat parameter arrays) where the session has them."""
        from coopnn.runtime.vk.memory import HostAccess

        for buffer in (self.partials, self.loss_sums):
            if buffer is not None:
                buffer.destroy()
        self.partials = self.loss_sums = None
        if capacity:
            sums, partials = self.capacity_buffer_bytes(capacity)
            self.loss_sums = self.context.create_buffer(sums, HostAccess.NONE)
            if partials:
                self.partials = self.context.create_buffer(partials, HostAccess.NONE)

    def capacity_buffer_bytes(self, capacity: int) -> tuple[int, int]:
        """Bytes of the loss tiles' sums and of the partial gradients (0: none) that `prepare_tape` makes for
        `capacity` samples."""
        return -(-capacity // LOSS_TILE) * 4, self.partial_chunks(capacity) * self.layout.layers_size * 4

    def partial_chunks(self, capacity: int) -> int:
        """The most partial gradients a batch of up to `capacity` samples is summed in; 0 where weight gradients are
        not summed in chunks."""
        return 0
