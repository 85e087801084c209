"""How many samples a training step's buffers are made for when the device runs out of memory making them.

A step's per-sample buffers (tape, inputs, targets, losses) are made for a capacity of samples, rounded up from the
batch so that nearby batch sizes reuse them. When the driver reports out of memory while they are made (other work
on the device, or a driver's own limits: what the bounds computed beforehand cannot see), `make_fitting` measures
what fits by making them again for fewer samples: the batch itself without the rounding up, then halves of it.
Training on a smaller batch than asked would change the optimisation, so it never does so silently: the step is
refused with a DeviceMemoryError naming the largest batch whose buffers were made, and none of them stay allocated.
"""

from __future__ import annotations

from typing import Callable

from coopnn.errors import DeviceMemoryError


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
