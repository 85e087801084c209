"""Copies submitted ahead of a submission (`QueuedCopies`) are what that submission reads, a kept `Recording`
uploads exactly the byte ranges it was given of STAGED buffers on every submission, and a submission with `repeat` runs
its sequence that many times in order, on whichever of the recording's lanes. On lavapipe, validated."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from coopnn.runtime.vk.commands import Dispatch, Recorded
from coopnn.runtime.vk.lane import copy_buffer
from coopnn.runtime.vk.memory import Placement
from coopnn.runtime.vk.queued_copies import QueuedCopies
from coopnn.runtime.vk.recording import Recording

pytestmark = [pytest.mark.vulkan, pytest.mark.usefixtures("require_vulkan")]

COUNT = 1000


def _triple(context, spirv):
    kernel = context.create_kernel(spirv, binding_count=2, push_constant_size=4, specialization={0: 3.0})
    return kernel, struct.pack("<I", COUNT), kernel.group_count_for(COUNT)


def test_a_submission_reads_what_the_copies_queued_before_it_wrote(vk_context, axpb_spirv):
    kernel, push, groups = _triple(vk_context, axpb_spirv)
    x, y = vk_context.create_buffer(4 * COUNT), vk_context.create_buffer(4 * COUNT)
    sources = [vk_context.create_buffer(4 * COUNT) for _ in range(3)]
    copies = QueuedCopies(vk_context)
    recording = Recording(vk_context, [Dispatch(kernel, (x, y), push, groups)])
    try:
        for i, source in enumerate(sources):
            values = np.arange(COUNT, dtype=np.float32) + 1000 * i
            source.upload(values)
            copies.submit([(source.handle, x.handle, source.size)])
            recording.run()
            np.testing.assert_array_equal(y.read(np.float32), values * np.float32(3.0))
    finally:
        copies.destroy()
        recording.destroy()
        for buffer in (x, y, *sources):
            buffer.destroy()


def test_a_recording_uploads_its_byte_ranges_of_staged_buffers_each_time(vk_context, axpb_spirv):
    kernel, push, groups = _triple(vk_context, axpb_spirv)
    x = vk_context.create_buffer(4 * COUNT, placement=Placement.STAGED)
    y = vk_context.create_buffer(4 * COUNT, placement=Placement.STAGED)
    half = 4 * COUNT // 2
    whole = Recording(vk_context, [Dispatch(kernel, (x, y), push, groups)], uploads={x: (0, x.size)}, downloads=(y,))
    tail = Recording(vk_context, [Dispatch(kernel, (x, y), push, groups)], uploads={x: (half, x.size)},
                     downloads=(y,))
    try:
        first, second = np.arange(COUNT, dtype=np.float32), np.arange(COUNT, dtype=np.float32) + 5000
        for values in (first, second):
            x.write(values)
            whole.run()
            np.testing.assert_array_equal(y.read(np.float32), values * np.float32(3.0))
        x.write(first)
        tail.run()  # only the second half of x goes to the device: its first half still holds `second`
        expected = np.concatenate([second[:COUNT // 2], first[COUNT // 2:]]) * np.float32(3.0)
        np.testing.assert_array_equal(y.read(np.float32), expected)
    finally:
        whole.destroy()
        tail.destroy()
        x.destroy()
        y.destroy()


@pytest.mark.parametrize("repeat", [1, 2, 5])
def test_a_repeated_recording_runs_its_sequence_that_many_times_in_order(vk_context, axpb_spirv, repeat):
    """Each repetition reads what the one before wrote: between dispatches (x to y, y to x: 3^2 a repetition), and
    after a recorded copy (x to y, then y copied onto x: 3 a repetition)."""
    kernel, push, groups = _triple(vk_context, axpb_spirv)
    x, y = vk_context.create_buffer(4 * COUNT), vk_context.create_buffer(4 * COUNT)
    values = np.linspace(-1, 1, COUNT, dtype=np.float32)
    back = Recorded(lambda cmd: copy_buffer(cmd, y.handle, x.handle, 0, 0, y.size))
    sequences = {9.0: [Dispatch(kernel, (x, y), push, groups), Dispatch(kernel, (y, x), push, groups)],
                 3.0: [Dispatch(kernel, (x, y), push, groups), back]}
    try:
        for factor, sequence in sequences.items():
            x.upload(values)
            recording = Recording(vk_context, sequence)
            try:
                recording.run(repeat)
            finally:
                recording.destroy()
            np.testing.assert_allclose(x.read(np.float32), values * np.float32(factor) ** repeat, rtol=1e-6)
    finally:
        x.destroy()
        y.destroy()


def test_submissions_of_several_sizes_on_two_lanes_run_in_the_order_submitted(vk_context, axpb_spirv):
    """Primaries of three repeat counts on two lanes, in flight together, all executing the one recorded sequence."""
    kernel, push, groups = _triple(vk_context, axpb_spirv)
    x, y = vk_context.create_buffer(4 * COUNT), vk_context.create_buffer(4 * COUNT)
    values = np.linspace(-1, 1, COUNT, dtype=np.float32)
    x.upload(values)
    recording = Recording(vk_context, [Dispatch(kernel, (x, y), push, groups), Dispatch(kernel, (y, x), push, groups)],
                          lanes=2)
    try:
        for lane, repeat in enumerate((1, 2, 1, 3)):
            recording.submit(repeat, lane % 2)
        assert len(recording.finish_all()) <= 2 and not (recording.in_flight(0) or recording.in_flight(1))
        np.testing.assert_allclose(x.read(np.float32), values * np.float32(9.0) ** 7, rtol=1e-5)
    finally:
        recording.destroy()
        x.destroy()
        y.destroy()


def test_a_recording_runs_something_at_least_once_on_a_lane_it_has(vk_context, axpb_spirv):
    kernel, push, groups = _triple(vk_context, axpb_spirv)
    x, y = vk_context.create_buffer(4 * COUNT), vk_context.create_buffer(4 * COUNT)
    recording = Recording(vk_context, [Dispatch(kernel, (x, y), push, groups)])
    try:
        with pytest.raises(ValueError, match="at least once"):
            recording.submit(0)
        with pytest.raises(ValueError, match="nothing was submitted"):
            recording.finish()
        with pytest.raises(ValueError, match="at least"):
            Recording(vk_context, [])
        with pytest.raises(ValueError, match="at least"):
            Recording(vk_context, [Dispatch(kernel, (x, y), push, groups)], lanes=0)
    finally:
        recording.destroy()
        x.destroy()
        y.destroy()
