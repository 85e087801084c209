"""Several samples an invocation (`InferenceOptions.samples_per_invocation`): the kernel program lowered once per
sample, instruction by instruction in turn, so that the products of one layer for an invocation's samples are issued
back to back on the same matrix.

Invocation i of the dispatch handles samples k i .. k i + k - 1 (consecutive rows, so a subgroup's direct loads stay
contiguous); it returns early when the first is past the batch, and its other samples past the batch read the last
row and store nothing. The binary's `workgroup_size` then counts samples (k times the invocations of a work-group),
which is what the runtime sizes dispatches and host chunks by.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SampleCopy:
    """What the emitter holds for one of an invocation's samples: its index, its input row, whether it is in the
    batch (an id; None where it always is) and its lowered values."""

    sample: object
    data_row: object
    inside: object | None
    held: dict = field(default_factory=dict)
    unrounded: dict = field(default_factory=dict)


def sample_copies(e, count: int) -> list[SampleCopy]:
    """The `count` samples of an invocation of emitter `e` (a single one: the emitter's own state, unchanged)."""
    frame, fn = e.frame, e.fn
    if count == 1:
        return [SampleCopy(frame.sample, frame.data_row, e.inside, e.held, e.unrounded)]
    u32, n = frame.u32, frame.push_value("count")
    first = fn.ops.int_mul(u32, frame.sample, e.uint(count))
    with fn.if_(fn.ops.uint_at_least(e.boolean, first, n)):
        fn.return_()
    last = fn.ops.int_sub(u32, n, e.uint(1))
    copies = [SampleCopy(first, first, None)]
    for offset in range(1, count):
        sample = fn.ops.int_add(u32, first, e.uint(offset))
        copies.append(SampleCopy(sample, e.glsl(u32, "UMin", sample, last),
                                 fn.ops.uint_less(e.boolean, sample, n)))
    return copies


def enter(e, copy: SampleCopy) -> None:
    """Make `copy` the sample emitter `e` lowers instructions for."""
    e.frame.sample, e.frame.data_row, e.inside = copy.sample, copy.data_row, copy.inside
    e.held, e.unrounded = copy.held, copy.unrounded
