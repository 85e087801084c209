"""The per-sample step kernel reading the optimizer's float16 working copy itself: matrices row-major (their
transposes read as column-major, which the backward products take), biases and a trained grid's table where the
flat parameter layout puts them. No conversion runs between steps, where the "coopvec" kernel converts the working
copy into the driver's TrainingOptimal layout after every step (vkCmdConvertCooperativeVectorMatrixNV and a copy).

Cooperative-vector products want a matrix on a 64-byte boundary and rows a multiple of 16 bytes apart; the flat
layout pads every width to 8 elements, so row strides always are, and a matrix starts on such a boundary where the
layers before it leave it there (hidden widths that are multiples of 32). "auto" takes this kernel for a model with a
trained grid that it can read; a model it cannot read is refused naming the matrix.
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
    preference = 1  # before "coopvec", which takes every model this kernel does not

    def takes_auto(self, session) -> bool:
        """A model with a trained grid, whose working copy the products can read: the conversion it saves made tcnn's
        image configuration's step at 2^18 2.0% faster on the H200, and at 2^16 4% faster with the small-batch copy
        of `tuning.MEASURED` (3.5% slower without; bench/results/nvidia-h200-2026-12-03-93983e6-step-stages.md); a
        plain MLP was not measured."""
        if not session.plan.tables or session.gradient_method.accumulates:
            return False
        return unreadable(session.parameter_layout(self.padded).entries(FP16)) is None

    def weight_image(self, session):
        """The working copy's own entries, after checking the kernel can read them there."""
        if session.gradient_method.accumulates:
            raise CompileError(f"step='{self.name}' reads the working copy, which has no room for the accumulators "
                               f"of gradients={session.gradient_method.name!r}; use step='coopvec'")
        plan = weight_plan(session.program, FP16)
        entries = session.layout.entries(FP16)
        check_trained_only(session, {**plan.matrices, **plan.biases})
        for name, matrix in plan.matrices.items():
            if tuple(entries[name].shape) != tuple(matrix.shape):
                raise CompileError(f"step='{self.name}': matrix {name!r} of {session.plan.graph.name!r} is "
                                   f"{entries[name].shape} in the working copy and {matrix.shape} in the kernel; "
                                   "use step='coopvec'")
        reason = unreadable({name: entries[name] for name in {**plan.matrices, **plan.biases}})
        if reason is not None:
            raise CompileError(f"step='{self.name}' cannot train {session.plan.graph.name!r}: {reason}; use "
                               "step='coopvec'")
        return WeightImage(b"", entries)

    def create_weights(self, session) -> None:
        """Nothing: the kernel reads the working copy the session makes."""

    def weights_buffer(self, session):
        return session.working

    def working_steps(self, session) -> list:
        return []


def unreadable(entries) -> str | None:
    """Why the products cannot read these working-copy entries where they are (a matrix's start or rows, a vector's
    start), or None."""
    for entry in entries.values():
        if entry.layout == "vector":
            if entry.offset % VECTOR_ALIGNMENT:
                return (f"vector {entry.name!r} starts at byte {entry.offset} of the working copy, not on a "
                        f"{VECTOR_ALIGNMENT}-byte boundary")
        elif entry.offset % MATRIX_ALIGNMENT or entry.stride % ROW_STRIDE_ALIGNMENT:
            return (f"matrix {entry.name!r} starts at byte {entry.offset} of the working copy with rows {entry.stride} "
                    f"bytes apart; cooperative-vector products need a {MATRIX_ALIGNMENT}-byte start and rows a "
                    f"multiple of {ROW_STRIDE_ALIGNMENT} bytes apart (hidden layers whose widths are multiples of 32)")
    return None


KERNEL = WorkingCopyStep()
