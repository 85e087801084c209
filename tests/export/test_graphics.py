"""`coopnn.runtime.vk.graphics.draw_fullscreen`: the image comes back row by row from the top, every pixel drawn
once with the buffer, push constants and specialization constants the shaders read, and the validation layer has
nothing to say."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from coopnn.runtime.vk.graphics import draw_fullscreen
from coopnn.runtime.vk.memory import HostAccess
from tests.export.harness import require_compilers, spirv_val

VERTEX = """#version 460
void main() {
    vec2 corner = vec2((gl_VertexIndex << 1) & 2, gl_VertexIndex & 2);
    gl_Position = vec4(corner * 2.0 - 1.0, 0.0, 1.0);
}
"""

FRAGMENT = """#version 460
layout(set = 0, binding = 0, std430) readonly buffer Values { float value[]; };
layout(push_constant) uniform Push { float scale; } push;
layout(constant_id = 0) const float OFFSET = 0.0;
layout(location = 0) out vec4 color;
void main() {
    color = vec4(gl_FragCoord.x, gl_FragCoord.y, value[0] * push.scale, OFFSET);
}
"""


@pytest.mark.vulkan
def test_a_draw_covers_every_pixel_once(vk_context, tmp_path):
    require_compilers()
    from coopnn.export.compilers import compile_glsl

    vertex, fragment = compile_glsl(VERTEX, "vertex"), compile_glsl(FRAGMENT, "fragment")
    for words in (vertex, fragment):
        spirv_val(words, tmp_path)
    values = vk_context.create_buffer(16, host_access=HostAccess.NONE)
    values.write(np.array([3.0, 0, 0, 0], np.float32))
    image = draw_fullscreen(vk_context, vertex, fragment, 7, 5, [values], {0: 0.25}, struct.pack("<f", 2.0))
    rows, columns = np.mgrid[0:5, 0:7] + 0.5
    np.testing.assert_array_equal(image[..., 0], columns)
    np.testing.assert_array_equal(image[..., 1], rows)
    np.testing.assert_array_equal(image[..., 2], 6.0)
    np.testing.assert_array_equal(image[..., 3], 0.25)
    values.destroy()


@pytest.mark.vulkan
def test_a_draw_of_nothing_is_refused(vk_context):
    with pytest.raises(ValueError, match="positive size and at least one buffer"):
        draw_fullscreen(vk_context, b"", b"", 0, 4, [])
