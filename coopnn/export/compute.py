"""A compute-shader harness for an export: a kernel that reads rows of inputs, calls `NAME_eval` once per row and
writes the outputs, compiled in the export's language with the packaged compilers. The tests check exports through it
beside the fragment shader of `coopnn.export.render`, and examples/neural_texture/bench.py times the two variants."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np

from coopnn.export.compilers import compile_glsl, compile_slang
from coopnn.export.device import read_export, upload_weights
from coopnn.runtime.vk.memory import HostAccess

WORKGROUP = 64

# What each invocation does with its row, to the end of `main`: the same text in GLSL and Slang.
ROW_BODY = """    if (row >= push.count) return;
    float inputs[{inputs}];
    for (int i = 0; i < {inputs}; ++i) inputs[i] = x[row * {inputs} + i];
    float outputs[{outputs}];
    {name}_eval(inputs, outputs);
    for (int o = 0; o < {outputs}; ++o) y[row * {outputs} + o] = outputs[o];
}}
"""

GLSL_COMPUTE = """#version 460
#extension GL_GOOGLE_include_directive : require
#include "{name}.glsl"
layout(local_size_x = {workgroup}) in;
layout(set = 0, binding = 1, std430) readonly buffer Inputs {{ float x[]; }};
layout(set = 0, binding = 2, std430) writeonly buffer Outputs {{ float y[]; }};
layout(push_constant) uniform Push {{ uint count; }} push;
void main() {{
    uint row = gl_GlobalInvocationID.x;
""" + ROW_BODY

SLANG_COMPUTE = """#include "{name}.slang"
[[vk::binding(1, 0)]] StructuredBuffer<float> x;
[[vk::binding(2, 0)]] RWStructuredBuffer<float> y;
struct Push {{ uint count; }};
[[vk::push_constant]] ConstantBuffer<Push> push;
[shader("compute")] [numthreads({workgroup}, 1, 1)]
void main(uint3 id: SV_DispatchThreadID) {{
    uint row = id.x;
""" + ROW_BODY


def compute_shader(manifest_path: str | os.PathLike, variant: str) -> bytes:
    """The harness's SPIR-V for the export at `manifest_path` and `variant` ("coopvec" or "portable")."""
    path = Path(manifest_path)
    manifest = read_export(path).manifest
    name, lang = manifest["name"], manifest["language"]
    text = (GLSL_COMPUTE if lang == "glsl" else SLANG_COMPUTE).format(
        name=name, inputs=manifest["inputs"], outputs=manifest["outputs"], workgroup=WORKGROUP)
    defines = {f"{name.upper()}_PORTABLE": "1"} if variant == "portable" else {}
    compile_fn = compile_glsl if lang == "glsl" else compile_slang
    return compile_fn(text, "compute", path=path.parent / f"{name}_harness.{lang}", defines=defines)


class ComputeHarness:
    """The harness made ready on `context` (a VulkanContext or a scope of one) for up to `capacity` rows: the
    export's weights uploaded for `variant`, the kernel built (from `spirv`, else compiled here)."""

    def __init__(self, context, manifest_path: str | os.PathLike, variant: str, capacity: int,
                 spirv: bytes | None = None):
        manifest = read_export(manifest_path).manifest
        self.inputs, self.outputs, self.capacity = manifest["inputs"], manifest["outputs"], capacity
        self.last_gpu_ms: float | None = None
        self._made = []
        try:
            weights = upload_weights(context, manifest_path, variant=variant)
            self._made.append(weights.buffer)
            self.kernel = context.create_kernel(spirv or compute_shader(manifest_path, variant), binding_count=3,
                                                push_constant_size=4, workgroup_size=(WORKGROUP, 1, 1),
                                                specialization=dict(weights.specialization), name="export_harness")
            self._made.append(self.kernel)
            self.x = context.create_buffer(capacity * self.inputs * 4, host_access=HostAccess.WRITE)
            self._made.append(self.x)
            self.y = context.create_buffer(capacity * self.outputs * 4, host_access=HostAccess.READ)
            self._made.append(self.y)
            self.weights = weights.buffer
        except BaseException:
            self.close()
            raise

    def run(self, inputs: np.ndarray) -> np.ndarray:
        """`NAME_eval` of every row of `inputs` [rows <= capacity, inputs]; the GPU time goes to `last_gpu_ms`."""
        rows = len(inputs)
        if rows > self.capacity or np.shape(inputs)[1:] != (self.inputs,):
            raise ValueError(f"the harness takes up to {self.capacity} rows of {self.inputs}, not {np.shape(inputs)}")
        self.x.write(np.ascontiguousarray(inputs, np.float32))
        self.last_gpu_ms = self.kernel.run([self.weights, self.x, self.y], struct.pack("<I", rows),
                                           self.kernel.group_count_for(rows))
        return self.y.read(np.float32, rows * self.outputs).reshape(rows, self.outputs).copy()

    def close(self) -> None:
        for made in reversed(self._made):
            made.destroy()
        self._made.clear()

    def __enter__(self) -> "ComputeHarness":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
