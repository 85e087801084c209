"""An export drawn as a neural texture: a full-screen triangle whose fragment shader includes the exported source and
evaluates the network at every pixel, (row, column) = (gl_FragCoord.y / height, gl_FragCoord.x / width) -> RGB(A),
the coordinates `coopnn fit-image` trains on. The shaders are compiled here with the packaged compilers
(`coopnn.export.compilers`) and drawn by `coopnn.runtime.vk.graphics`.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np

from coopnn.errors import CompileError
from coopnn.export.compilers import compile_glsl, compile_slang
from coopnn.export.device import read_export, upload_weights
from coopnn.runtime.vk.graphics import draw_fullscreen

# Features a device needs for the cooperative-vector variant (the float16 vectors, and the memory model glslang and
# Slang declare with the extension).
COOPVEC_FEATURES = frozenset({"cooperativeVector", "shaderFloat16", "vulkanMemoryModel"})
FRAGMENT_STAGE = 0x10  # VK_SHADER_STAGE_FRAGMENT_BIT

GLSL_VERTEX = """#version 460
void main() {
    vec2 corner = vec2((gl_VertexIndex << 1) & 2, gl_VertexIndex & 2);
    gl_Position = vec4(corner * 2.0 - 1.0, 0.0, 1.0);
}
"""

GLSL_FRAGMENT = """#version 460
#extension GL_GOOGLE_include_directive : require
#include "{name}.glsl"
layout(push_constant) uniform Push {{ vec2 inverse_size; }} push;
layout(location = 0) out vec4 color;
void main() {{
    float inputs[2] = float[2](gl_FragCoord.y * push.inverse_size.y, gl_FragCoord.x * push.inverse_size.x);
    float outputs[{outputs}];
    {name}_eval(inputs, outputs);
    color = vec4({channels});
}}
"""

SLANG_VERTEX = """[shader("vertex")]
float4 main(uint index: SV_VulkanVertexID) : SV_Position {
    float2 corner = float2((index << 1) & 2, index & 2);
    return float4(corner * 2.0 - 1.0, 0.0, 1.0);
}
"""

SLANG_FRAGMENT = """#include "{name}.slang"
struct Push {{ float2 inverse_size; }};
[[vk::push_constant]] ConstantBuffer<Push> push;
[shader("fragment")]
float4 main(float4 position: SV_Position) : SV_Target {{
    float inputs[2] = {{ position.y * push.inverse_size.y, position.x * push.inverse_size.x }};
    float outputs[{outputs}];
    {name}_eval(inputs, outputs);
    return float4({channels});
}}
"""


def _channels(outputs: int) -> str:
    """RGBA from the first four outputs; missing colour channels 0, a missing alpha 1."""
    values = [f"outputs[{i}]" for i in range(min(outputs, 4))]
    values += ["0.0"] * (3 - len(values)) + ["1.0"] * (len(values) < 4)
    return ", ".join(values)


def texture_shaders(manifest_path: str | os.PathLike, variant: str) -> tuple[bytes, bytes]:
    """The vertex and fragment SPIR-V of the texture for the export at `manifest_path`, in its language."""
    path = Path(manifest_path)
    manifest = read_export(path).manifest
    name, lang = manifest["name"], manifest["language"]
    if manifest["inputs"] != 2:
        raise CompileError(f"{path}: a texture takes 2 inputs (row, column); {name} takes {manifest['inputs']}")
    defines = {f"{name.upper()}_PORTABLE": "1"} if variant == "portable" else {}
    fragment_text = (GLSL_FRAGMENT if lang == "glsl" else SLANG_FRAGMENT).format(
        name=name, outputs=manifest["outputs"], channels=_channels(manifest["outputs"]))
    if lang == "glsl":
        vertex = compile_glsl(GLSL_VERTEX, "vertex", path=path.parent / "texture.vert")
        fragment = compile_glsl(fragment_text, "fragment", path=path.parent / "texture.frag", defines=defines)
        return vertex, fragment
    vertex = compile_slang(SLANG_VERTEX, "vertex", path=path.parent / "texture_vertex.slang")
    fragment = compile_slang(fragment_text, "fragment", path=path.parent / "texture_fragment.slang", defines=defines)
    return vertex, fragment


def draw_texture(context, manifest_path: str | os.PathLike, width: int, height: int, *,
                 variant: str = "portable", shaders: tuple[bytes, bytes] | None = None) -> np.ndarray:
    """The [height, width, 4] float32 image of the export drawn on `context`."""
    vertex, fragment = shaders or texture_shaders(manifest_path, variant)
    weights = upload_weights(context, manifest_path, variant=variant)
    try:
        push = struct.pack("<2f", 1.0 / width, 1.0 / height)
        return draw_fullscreen(context, vertex, fragment, width, height, [weights.buffer],
                               dict(weights.specialization), push)
    finally:
        weights.buffer.destroy()


def fragment_variant(device: str | int | None = None) -> str:
    """"coopvec" where the device runs cooperative vectors in fragment shaders with the features they need, else
    "portable"."""
    from coopnn.runtime.vk.shared import chosen_device

    info = chosen_device(device)
    support = info.cooperative_vector
    usable = support is not None and support.cooperative_vector and support.supported_stages & FRAGMENT_STAGE
    return "coopvec" if usable and all(info.features.get(f) for f in COOPVEC_FEATURES) else "portable"


def draw_export(model, directory: str | os.PathLike, side: int, *, lang: str = "glsl",
                device: str | int | None = None) -> np.ndarray:
    """Export `model` (a 2-input texture) into `directory` as `texture`, draw it at `side` x `side` on `device` with
    the best variant it runs (`fragment_variant`), and return the [side, side, channels] image."""
    exported = model.export_shader(directory, lang=lang, name="texture")
    image = render_texture(exported.manifest, side, side, variant=fragment_variant(device), device=device)
    return image[..., :min(model.graph.outputs[0].shape[1], 4)]


def render_texture(manifest_path: str | os.PathLike, width: int, height: int, *, variant: str = "portable",
                   device: str | int | None = None) -> np.ndarray:
    """`draw_texture` on the process's shared context of `device` (with cooperative vectors for that variant)."""
    from coopnn.runtime.vk.shared import open_context

    features = COOPVEC_FEATURES if variant == "coopvec" else frozenset()
    scope = open_context(device, features=features)
    try:
        return draw_texture(scope, manifest_path, width, height, variant=variant)
    finally:
        scope.close()
