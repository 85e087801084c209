"""The per-sample step kernel: one invocation a sample, cooperative-vector products with the weights in the
driver's TrainingOptimal layout, forward and transposed, which vkCmdConvertCooperativeVectorMatrixNV makes from the
optimizer's row-major float16 working copy after every step (a trained grid's table copied beside them, its gradient
added with the session's `table_atomics`). The only step kernel that trains a grid."""

from __future__ import annotations

from coopnn.backends.coopvec.inference_options import DEFAULT_OPTIONS, TABLE_OPTIONS
from coopnn.backends.coopvec.layouts import pack_plan, padded
from coopnn.backends.coopvec.products import weight_plan
from coopnn.backends.coopvec.target import CoopvecTarget
from coopnn.errors import CompileError
from coopnn.layouts.formats.fp16 import FORMAT as FP16
from coopnn.train.gpu.families import StepKernel

LAYOUT = "training_optimal"
WORKGROUP = 64  # invocations a work-group, unless the session's tuning sets `sample_workgroup`


def optimal_size(context, rows: int, cols: int) -> int:
    """Bytes the driver gives a row-major float16 matrix of `rows` x `cols` once in `LAYOUT`."""
    from coopnn.backends.coopvec.driver import converted_size, matrix_format

    return converted_size(context, matrix_format(FP16, rows, cols, "row_major", 2 * cols),
                          matrix_format(FP16, rows, cols, LAYOUT))


def check_trained_only(session, entries) -> None:
    """CompileError unless every weight the kernel reads is a parameter the session trains."""
    constants = sorted(set(entries) - set(session.layout.entries(FP16)))
    if constants:
        # The step's weights come from the optimizer's working copy, which holds parameters only.
        raise CompileError(f"the per-sample coopvec step cannot train {session.plan.graph.name!r}: its kernel "
                           f"reads weights that are not among the parameters it trains ({', '.join(constants)}); "
                           "train it with backend='numpy'")


class PerSampleStep(StepKernel):
    name = "coopvec"
    preference = 2

    def padded(self, width: int) -> int:
        return padded(width)

    def takes_auto(self, session) -> bool:
        return True

    def compile(self, session):
        session.image = session.gradient_method.weight_image(session, self.weight_image(session))
        tuning = session.tuning
        session.small_batch_binary = (None if tuning.small_batch is None
                                      else self._compiled(session, tuning.small_batch_workgroup))
        session.small_batch_kernel = None  # loaded when a step first takes it
        return self._compiled(session, tuning.sample_workgroup or WORKGROUP)

    def _compiled(self, session, workgroup: int):
        # a trained grid's vertices read as inference reads them, unless gradients accumulate into the weight buffer
        options = DEFAULT_OPTIONS if session.gradient_method.accumulates else TABLE_OPTIONS
        return CoopvecTarget().compile(session.program, FP16, workgroup, packed=session.image,
                                       table_atomics=session.table_atomics, options=options)

    def launch(self, session, count: int) -> tuple:
        """The copy for small batches where the tuning has one and `count` is one (the same bindings and push
        constants), else the session's kernel."""
        if session.small_batch_binary is None or count > session.tuning.small_batch:
            return super().launch(session, count)
        if session.small_batch_kernel is None:
            from coopnn.runtime.executable import load_kernel

            session.small_batch_kernel = load_kernel(session.context, session.small_batch_binary,
                                                     f"{session.plan.graph.name} training step, small batches")
        return session.small_batch_kernel, session.small_batch_kernel.group_count_for(count)

    def binaries(self, session) -> dict:
        return {} if session.small_batch_binary is None else {"step, small batches": session.small_batch_binary}

    def weight_image(self, session):
        """Where the kernel reads each weight: every matrix converted to `LAYOUT` (the bytes reserved, written by
        `working_steps`), biases and tables beside them."""
        from coopnn.backends.coopvec.driver import converted_size, matrix_format

        def reserve(matrix):
            rows, cols = matrix.shape
            return bytes(converted_size(session.context,
                                        matrix_format(FP16, rows, cols, "row_major", matrix.strides[0]),
                                        matrix_format(FP16, rows, cols, LAYOUT)))

        session.packed = pack_plan(weight_plan(session.program, FP16), LAYOUT, reserve)
        check_trained_only(session, session.packed.entries)
        return session.packed

    def create_weights(self, session) -> None:
        from coopnn.runtime.vk.memory import HostAccess

        session.optimal = session.context.create_buffer(len(session.image.data), HostAccess.NONE,
                                                        device_address=True)

    def weights_buffer(self, session):
        return session.optimal

    def working_steps(self, session) -> list:
        from coopnn.backends.coopvec.driver import repack
        from coopnn.runtime.vk.commands import Recorded

        return [Recorded(repack(session.context, session.working, session.layout.entries(FP16), session.optimal,
                                session.packed.entries))]


KERNEL = PerSampleStep()
