"""A model's coopvec inference kernel compiled with `InferenceOptions` and ready to run (GPU tests of the options)."""

from __future__ import annotations

import numpy as np

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


def assert_gives_the_fp16_reference(executable, graph, seed: int, samples: int = 70001) -> None:
    """`executable` (closed after) from numpy arrays and from float32 and float16 device arrays gives the float16
    emulation of `graph` on `samples` float16 inputs (a batch that ends inside a work-group)."""
    import coopnn
    from coopnn.interop.device_arrays import run_on_device
    from coopnn.layouts.formats.emulation import run_fp16_emulation

    try:
        name_in, name_out = graph.inputs[0].name, graph.outputs[0].name
        x = np.random.default_rng(seed).uniform(-1, 1, (samples, graph.inputs[0].feature_size)).astype(np.float16)
        want = run_fp16_emulation(graph, {name_in: x.astype(np.float32)})[name_out]
        got = {"numpy": executable.run({name_in: x.astype(np.float32)})[name_out],
               "f32": run_on_device(executable, {name_in: coopnn.to_device(x)})[name_out].numpy(),
               "f16": run_on_device(executable, {name_in: coopnn.to_device(x, dtype="float16")})[name_out].numpy()}
        for path, y in got.items():
            np.testing.assert_allclose(y.astype(np.float32), want, rtol=1e-3, atol=2.5e-3, err_msg=path)
    finally:
        executable.close()
