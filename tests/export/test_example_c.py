"""examples/neural_texture: the C program builds with gcc against an export's NAME.h and coopnn_weights.h, renders
the exported network on a Vulkan device with the helper's upload (with the validation layer where installed), and
its image matches numpy; the helper refuses a weights file that is not the one NAME.h describes."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from coopnn.export import export_shader
from coopnn.export.render import texture_shaders
from tests.devices import validation_off_reason
from tests.export.harness import (FP16_TOLERANCE, coopvec_reference, hash_grid_texture, require_compilers,
                                  texture_model, texture_reference)

SOURCE = Path(__file__).resolve().parents[2] / "examples" / "neural_texture" / "main.c"
SIDE = 20


def read_pfm(path: Path) -> np.ndarray:
    """A little-endian PFM file as [height, width, 3] float32, top row first."""
    data = path.read_bytes()
    header = data.split(b"\n", 3)
    assert header[0] == b"PF" and float(header[2]) < 0
    width, height = map(int, header[1].split())
    rows = np.frombuffer(header[3], "<f4").reshape(height, width, 3)
    return rows[::-1]


@pytest.fixture(scope="module", params=["frequency", "hash_grid"])
def program(request, tmp_path_factory):
    """The export (named texture, as the example includes it) of a frequency-encoded texture or a hash-grid one (its
    tables after the layers), and the program built against it."""
    require_compilers()
    gcc = shutil.which("gcc")
    if gcc is None or not Path("/usr/include/vulkan/vulkan.h").exists():
        pytest.skip("building the C example needs gcc and the Vulkan headers (apt-get install gcc libvulkan-dev)")
    directory = tmp_path_factory.mktemp("neural_texture")
    model = texture_model() if request.param == "frequency" else hash_grid_texture()
    exported = export_shader(model.graph, directory, name="texture")
    binary = directory / "neural_texture"
    built = subprocess.run([gcc, "-std=c99", "-O2", "-Wall", "-Wextra", "-pedantic", "-I", str(directory),
                            str(SOURCE), "-o", str(binary), "-lvulkan"], capture_output=True, text=True)
    assert built.returncode == 0 and "warning" not in built.stderr, built.stderr
    return model, exported, binary


def _render(program, tmp_path, variant: str, weights: Path | None = None,
            validation: bool = True) -> subprocess.CompletedProcess:
    model, exported, binary = program
    vertex, fragment = texture_shaders(exported.manifest, variant)
    (tmp_path / "vert.spv").write_bytes(vertex)
    (tmp_path / "frag.spv").write_bytes(fragment)
    validated = validation and validation_off_reason() is None
    environment = dict(os.environ, NEURAL_TEXTURE_VALIDATION="1" if validated else "0")
    return subprocess.run([str(binary), str(weights or exported.weights), str(tmp_path / "vert.spv"),
                           str(tmp_path / "frag.spv"), str(SIDE), str(SIDE), str(tmp_path / "out.pfm"), variant],
                          capture_output=True, text=True, env=environment, timeout=300)


@pytest.mark.vulkan
def test_the_c_example_renders_the_portable_variant(require_vulkan, program, tmp_path):
    result = _render(program, tmp_path, "portable")
    assert result.returncode == 0, result.stderr
    np.testing.assert_allclose(read_pfm(tmp_path / "out.pfm"), texture_reference(program[0], SIDE), **FP16_TOLERANCE)


@pytest.mark.vulkan
@pytest.mark.parametrize("damage", ["flipped", "truncated"])
def test_the_c_helper_refuses_a_weights_file_that_does_not_match(require_vulkan, program, tmp_path, damage):
    data = bytearray(program[1].weights.read_bytes())
    if damage == "flipped":
        data[40] ^= 0x10
    else:
        del data[-16:]
    bad = tmp_path / "bad.weights.bin"
    bad.write_bytes(bytes(data))
    result = _render(program, tmp_path, "portable", weights=bad)
    assert result.returncode == 1
    assert ("FNV-1a hash does not match" if damage == "flipped" else "size does not match") in result.stderr


@pytest.mark.gpu
def test_the_c_example_renders_the_coopvec_variant(coopvec_device, program, tmp_path):
    # without the layer: Debian's (1.3.239) predates VK_NV_cooperative_vector and reports its feature struct
    result = _render(program, tmp_path, "coopvec", validation=False)
    assert result.returncode == 0, result.stderr
    np.testing.assert_allclose(read_pfm(tmp_path / "out.pfm"), texture_reference(program[0], SIDE, coopvec_reference),
                               **FP16_TOLERANCE)
