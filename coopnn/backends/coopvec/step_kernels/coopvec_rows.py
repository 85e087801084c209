"""The per-sample step kernel reading the optimizer's float16 working copy itself: matrices row-major (their
transposes read as column-major, which the backward products take), biases and a trained grid's table where the
flat parameter layout puts them. No conversion runs between steps, where the "coopvec" kernel converts the working
copy into the driver's TrainingOptimal layout after every step (vkCmdConvertCooperativeVectorMatrixNV and a copy).

Cooperative-vector products want a matrix on a 64-byte boundary and rows a multiple of 16 bytes apart; the flat
layout pads every width to 8 elements, so row strides always are, and a matrix starts on such a boundary where the
layers before it leave it there. A model where one does not is refused with the layer named.
"""

from __future__ import annotations

from coopnn.backends.coopvec.products import weight_plan
from coopnn.backends.coopvec.step_kernels.coopvec import PerSampleStep, check_trained_only
from coopnn.errors import CompileError
from coopnn.layouts.formats.fp16 import FORMAT as FP16
from coopnn.layouts.pack import MATRIX_ALIGNMENT, VECTOR_ALIGNMENT, WeightImage

ROW_STRIDE_ALIGNMENT = 16  # bytes between rows a plain-layout matrix may have


class WorkingCopyStep(PerSampleStep):
    name = "coopvec_rows"
    preference = 2

    def takes_auto(self, session) -> bool:
        return False

    def weight_image(self, session):
        """The working copy's own entries, after checking the kernel can read them there."""
        if session.gradient_method.accumulates:
            raise CompileError(f"step='{self.name}' reads the working copy, which has no room for the accumulators "
                               f"of gradients={session.gradient_method.name!r}; use step='coopvec'")
        plan = weight_plan(session.program, FP16)
        entries = session.layout.entries(FP16)
        check_trained_only(session, {**plan.matrices, **plan.biases})
        for name, matrix in plan.matrices.items():
            _check_readable(self.name, session, entries[name], matrix.shape)
        for name in plan.biases:
            if entries[name].offset % VECTOR_ALIGNMENT:
                raise CompileError(f"step='{self.name}': vector {name!r} of {session.plan.graph.name!r} starts at "
                                   f"byte {entries[name].offset} of the working copy, not on a {VECTOR_ALIGNMENT}-byte "
                                   "boundary; use step='coopvec'")
        return WeightImage(b"", entries)

    def create_weights(self, session) -> None:
        """Nothing: the kernel reads the working copy the session makes."""

    def weights_buffer(self, session):
        return session.working

    def working_steps(self, session) -> list:
        return []


def _check_readable(step: str, session, entry, shape) -> None:
    """CompileError unless the products can read the working copy's matrix `entry` (of the plan's `shape`)."""
    where = f"matrix {entry.name!r} of {session.plan.graph.name!r}"
    if tuple(entry.shape) != tuple(shape):
        raise CompileError(f"step='{step}': {where} is {entry.shape} in the working copy and {shape} in the "
                           "kernel; use step='coopvec'")
    if entry.offset % MATRIX_ALIGNMENT or entry.stride % ROW_STRIDE_ALIGNMENT:
        raise CompileError(f"step='{step}': {where} starts at byte {entry.offset} of the working copy with rows "
                           f"{entry.stride} bytes apart; cooperative-vector products need a {MATRIX_ALIGNMENT}-byte "
                           f"start and rows a multiple of {ROW_STRIDE_ALIGNMENT} bytes apart; use step='coopvec'")


KERNEL = WorkingCopyStep()
