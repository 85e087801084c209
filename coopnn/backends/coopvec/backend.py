"""The coopvec backend's record: the cooperative-vector target on a device with VK_NV_cooperative_vector.

It is offered only where the device lists every type combination the model's matrix-vector products use and holds
vectors as long as the model's. Weights are stored in the weight format the model was loaded with (one of
`CoopvecBackend.formats`) and converted to the driver's InferencingOptimal layout on the host
(vkConvertCooperativeVectorMatrixNV: size query, then conversion) through the device's shared context, once per model,
device and driver: the packed buffer and its manifest are cached on disk next to the pipeline cache (`weights/`). The
SPIR-V is then compiled against that manifest and run by the shared `KernelExecutable`.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from coopnn.disk_cache import cache_dir
from coopnn.errors import CompileError
from coopnn.graph.ir import Graph
from coopnn.backends.coopvec.layouts import WeightPlan, pack_plan
from coopnn.layouts.formats.format import WeightFormat
from coopnn.layouts.formats.fp16 import FORMAT as FP16
from coopnn.layouts.formats.fp8_e4m3 import FORMAT as FP8_E4M3
from coopnn.layouts.formats.fp8_e5m2 import FORMAT as FP8_E5M2
from coopnn.layouts.formats.int8 import FORMAT as INT8
from coopnn.layouts.pack import WeightImage
from coopnn.layouts.weight_cache import WeightImageCache
from coopnn.runtime.executable import KernelExecutable, chosen_device, device_unavailable_reason
from coopnn.shaders.kernel.lower import lower
from coopnn.shaders.kernel.program import KernelProgram
from coopnn.backends.base import Examined
from coopnn.backends.coopvec.products import requirements, weight_plan
from coopnn.backends.coopvec.inference_options import shipped_options
from coopnn.backends.coopvec.target import FEATURES, CoopvecTarget
from coopnn.backends.coopvec.training import (GRADIENT_METHODS, STEP_METHODS, TABLE_ATOMICS, TRAINING_FEATURES,
                                              CoopvecTrainingSession)
from coopnn.backends.trained_weights import trained_entries

# Samples a work-group: 32 and 64 ran the benchmark MLPs equally fast and 128 slower at the largest batches
# (`tests/backends/coopvec/test_speed.py` times them on a GPU).
WORKGROUP_SIZE = 64
LAYOUT = "inferencing_optimal"
COMPUTE_STAGE_BIT = 0x20  # VK_SHADER_STAGE_COMPUTE_BIT


def _device_needs(info) -> str | None:
    support = info.cooperative_vector
    if support is None or not support.cooperative_vector:
        return f"{info.name} lacks VK_NV_cooperative_vector"
    if not support.supported_stages & COMPUTE_STAGE_BIT:
        return f"{info.name} offers cooperative vectors outside compute shaders only"
    missing = sorted(f for f in FEATURES if not info.features.get(f))
    if missing:
        return f"{info.name} lacks the features {', '.join(missing)}"
    return None


def _combination(c) -> tuple[str, ...]:
    return tuple(t.name for t in (c.input_type, c.input_interpretation, c.matrix_interpretation,
                                  c.bias_interpretation, c.result_type))


def program_unsupported_reason(info, program: KernelProgram, weights: WeightFormat = FP16) -> str | None:
    """None when the device lists every combination the program needs with weights in `weights` and holds its
    longest vector."""
    needs = requirements(program, weights)
    support = info.cooperative_vector
    missing = needs.combinations - {_combination(c) for c in support.combinations}
    if missing:
        listed = "; ".join("/".join(c) for c in sorted(missing))
        return (f"{info.name} does not list the cooperative-vector type combination(s) {listed} "
                f"(input/input interpretation/matrix/bias/result)")
    if needs.components > support.max_components:
        return (f"the model needs cooperative vectors of {needs.components} components; {info.name} holds at most "
                f"{support.max_components}")
    return None


def weight_cache() -> WeightImageCache:
    return WeightImageCache(cache_dir("weights"))


def host_converter(context, fmt: WeightFormat):
    """Converts a row-major matrix of `fmt` elements to the InferencingOptimal layout with the driver, on the host."""
    from coopnn.backends.coopvec.driver import convert_on_host, matrix_format

    def convert(matrix):
        rows, columns = matrix.shape
        return convert_on_host(context, matrix, matrix_format(fmt, rows, columns, "row_major", matrix.strides[0]),
                               matrix_format(fmt, rows, columns, LAYOUT))

    return convert


def convert_weights(plan: WeightPlan, device: str | int | None) -> WeightImage:
    """The plan packed in the driver's InferencingOptimal layout, converted on the host by the device's driver."""
    from coopnn.runtime.vk.shared import open_context

    with open_context(device, features={"cooperativeVector"}) as context:
        return pack_plan(plan, LAYOUT, host_converter(context, plan.format))


def optimal_weights(plan: WeightPlan, device: str | int | None) -> WeightImage:
    """The converted weights of `plan` for `device`, from the on-disk cache when this driver converted them before."""
    from coopnn.runtime.vk.pipeline_cache import device_key

    if not plan.matrices:
        return pack_plan(plan)
    cache = weight_cache()
    key = f"coopvec:{LAYOUT}:{plan.digest()}:{device_key(chosen_device(device))}"
    packed = cache.get(key)
    if packed is None:
        packed = convert_weights(plan, device)
        cache.put(key, packed)
    return packed


def prepare_coopvec(graph: Graph, program: KernelProgram, weights: WeightFormat, device: str | int | None,
                    workgroup_size: int = WORKGROUP_SIZE) -> KernelExecutable:
    from coopnn.runtime.vk.shared import open_context

    # held from the conversion to the executable, so both use one shared context rather than making two in turn
    with open_context(device, features=FEATURES):
        packed = optimal_weights(weight_plan(program, weights), device)
        def compiled(io_dtype: str):
            made = CoopvecBackend.target.compile(program, weights, workgroup_size, packed=packed, io_dtype=io_dtype,
                                                 options=shipped_options(weights, program))
            # device addresses let `convert_in_place` write new weights with the driver's conversion on the GPU
            return dataclasses.replace(made, features=made.features | {"bufferDeviceAddress"})

        # float16 device arrays: the same kernel on float16 rows, compiled on first use (`KernelExecutable.kernel_for`)
        halves = {} if weights.input_quantization is not None else {"f16": lambda: compiled("f16")}
        return KernelExecutable(compiled("f32"), graph, device, program.sources, halves)


def convert_in_place(executable: KernelExecutable, plan: WeightPlan) -> bool:
    """New values for the executable's weights (a plan of the same matrices and biases), converted to
    InferencingOptimal on the GPU by vkCmdConvertCooperativeVectorMatrixNV (8-bit formats: on the host); False when
    the plan's layout or weight format differs."""
    from coopnn.backends.coopvec.driver import repack
    from coopnn.runtime.vk.memory import HostAccess

    current = executable.binary.weight_image.entries
    context = executable.context
    if plan.format.bits < 16:
        # The H100 driver's device-side conversion into E4M3 or E5M2 (vkCmdConvertCooperativeVectorMatrixNV, driver
        # 580) writes bytes that neither its host conversion nor the shader read as the matrix, from an 8-bit or a
        # float16 source alike, while its host conversion is exact; so 8-bit weights are converted on the host
        # (their row scales are chosen there anyway) and uploaded.
        packed = pack_plan(plan, LAYOUT, host_converter(context, plan.format))
        if dict(packed.entries) != dict(current):
            return False
        with executable.gate.exclusive():
            executable.weight_buffer.upload(np.frombuffer(packed.data, np.uint8))
        return True
    row_major = pack_plan(plan)
    if {name: (e.shape, e.dtype) for name, e in current.items()} != {
            name: (e.shape, e.dtype) for name, e in row_major.entries.items()}:
        return False
    source = context.create_buffer(len(row_major.data), HostAccess.NONE, device_address=True)
    try:
        source.upload(np.frombuffer(row_major.data, np.uint8))
        with executable.gate.exclusive():
            context.submit(repack(context, source, row_major.entries, executable.weight_buffer, current))
    finally:
        source.destroy()
    return True


class CoopvecBackend:
    name = "coopvec"
    priority = 20
    description = ("cooperative vectors (VK_NV_cooperative_vector): float16 matrix-vector products on tensor cores, "
                   "one invocation per sample")
    target = CoopvecTarget()
    formats = (FP16, FP8_E4M3, FP8_E5M2, INT8)  # what its matrix-vector products multiply
    trains = True
    training_options = {"gradients": GRADIENT_METHODS, "step": STEP_METHODS, "table_atomics": TABLE_ATOMICS}
    device_features = FEATURES | {"bufferDeviceAddress"} | TRAINING_FEATURES

    def unavailable_reason(self) -> str | None:
        return device_unavailable_reason(None, _device_needs)

    def examine(self, graph: Graph, weights: WeightFormat, device) -> Examined:
        why = device_unavailable_reason(device, _device_needs)
        if why:
            return Examined(why)
        try:
            program = lower(graph)
        except CompileError as e:
            return Examined(str(e))
        return Examined(program_unsupported_reason(chosen_device(device), program, weights), program)

    def auto_skip_reason(self, device, lowered, weights: WeightFormat) -> str | None:
        return None

    def prepare(self, graph: Graph, lowered: KernelProgram, *, weights: WeightFormat, device) -> KernelExecutable:
        return prepare_coopvec(graph, lowered, weights, device)

    def refresh(self, executable: KernelExecutable, graph: Graph, *, weights: WeightFormat) -> bool:
        program = lower(graph)
        if not convert_in_place(executable, weight_plan(program, weights)):
            return False
        executable.sources = dict(program.sources)
        return True

    def take_trained(self, executable: KernelExecutable, session) -> bool:
        """Convert the session's float16 row-major working weights into the model's InferencingOptimal weight buffer
        on the GPU (vkCmdConvertCooperativeVectorMatrixNV); False (the host path then) for another backend's
        session, or a model whose weight format scales rows (its scales are chosen on the host)."""
        from coopnn.backends.coopvec.driver import repack

        entries = executable.binary.weight_image.entries
        if not isinstance(session, CoopvecTrainingSession) or any(e.scale_offset is not None for e in entries.values()):
            return False
        pairs = trained_entries(executable, session, session.layout.entries(FP16))
        if pairs is None:
            return False
        context = executable.context
        with executable.gate.exclusive():
            context.submit(repack(context, session.working, {name: s for name, (s, _) in pairs.items()},
                                  executable.weight_buffer, {name: d for name, (_, d) in pairs.items()}))
        return True

    def prepare_training(self, graph: Graph, loss, optimizer, *, device, **options) -> CoopvecTrainingSession:
        return CoopvecTrainingSession(graph, loss, optimizer, device, **options)
