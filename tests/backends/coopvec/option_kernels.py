"""A model's coopvec inference kernel compiled with `InferenceOptions` and ready to run (GPU tests of the options)."""

from __future__ import annotations

from coopnn.backends import target
from coopnn.backends.coopvec.inference_options import InferenceOptions
from coopnn.layouts.formats.fp16 import FORMAT as FP16
from coopnn.shaders.kernel.lower import lower


def executable_with(graph, size: int, options: InferenceOptions):
    """A KernelExecutable of `graph`'s kernel with `options` in work-groups of `size` (float32 rows, float16 rows on
    first use) on the driver's converted weights, as the backend prepares its own."""
    from coopnn.backends.coopvec.backend import optimal_weights
    from coopnn.backends.coopvec.products import weight_plan
    from coopnn.runtime.executable import KernelExecutable

    program = lower(graph)
    packed = optimal_weights(weight_plan(program, FP16), None)

    def compiled(io_dtype: str):
        return target("coopvec").compile(program, FP16, size, packed=packed, io_dtype=io_dtype, options=options)

    return KernelExecutable(compiled("f32"), graph, None, program.sources, {"f16": lambda: compiled("f16")})
