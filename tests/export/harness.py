"""What the export tests share: small networks to export, their numpy oracles, the packaged compilers (skipping
with the reason where slangpy is missing), spirv-val, and the compute-shader harness (`coopnn.export.compute`) that
runs an export's `NAME_eval` once per row of a buffer."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

import coopnn
from coopnn.examples.fit_image import pixel_centres
from coopnn.layouts.formats.emulation import run_fp16_emulation
from tests.devices import SPIRV_TOOLS_HINT, spirv_tool

FP16_TOLERANCE = {"rtol": 1e-3, "atol": 2.5e-3}
FP32_TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}
LANGUAGES = ("glsl", "slang")


def texture_model(output_activation: str | None = "sigmoid", octaves: int = 3, hidden=(16, 16), seed: int = 1):
    """A neural texture: (row, column) through a frequency encoding and an MLP to RGB."""
    return coopnn.mlp(2, list(hidden), 3, encoding="frequency", octaves=octaves, output_activation=output_activation,
                      seed=seed, backend="numpy")


HASH_GRID = {"otype": "HashGrid", "n_levels": 4, "n_features_per_level": 2, "log2_hashmap_size": 10,
             "base_resolution": 4, "per_level_scale": 2.0}


def hash_grid_texture(seed: int = 1):
    """A neural texture on a hash grid, its tables drawn in [-1, 1] (trained sizes rather than tcnn's 1e-4 start)."""
    model = coopnn.mlp(2, [16, 16], 3, encoding=HASH_GRID, output_activation="sigmoid", seed=seed, backend="numpy")
    rng = np.random.default_rng(seed)
    model.set_parameters({name: rng.uniform(-1, 1, value.shape).astype(np.float32)
                          for name, value in model.parameters().items() if name.startswith("encoding")})
    return model


def _tables_rounded(graph, weights: str):
    """`graph` with its encodings' tables rounded as the weights file stores them (the format rounds the layers)."""
    from coopnn.graph.ir import Op
    from coopnn.layouts.formats import weight_format

    fmt = weight_format(weights)
    tables = {n.inputs[1] for n in graph.nodes if n.op is Op.ENCODING and len(n.inputs) > 1}
    return graph.replace(constants={k: fmt.emulate(v) if k in tables else v for k, v in graph.constants.items()})


def reference(model, inputs: np.ndarray, weights: str = "fp16") -> np.ndarray:
    """The model's outputs in float32 with its weights and tables rounded as `weights` stores them (the portable
    variant)."""
    rounded = coopnn.model.prepare(_tables_rounded(model.graph, weights), backend="numpy", weights=weights)
    return rounded.run(inputs)


def coopvec_reference(model, inputs: np.ndarray) -> np.ndarray:
    """The float16 arithmetic of cooperative-vector products (`run_fp16_emulation`), tables rounded to float16."""
    return run_fp16_emulation(_tables_rounded(model.graph, "fp16"), {"x": inputs})["y"]


def texture_reference(model, side: int, oracle=reference) -> np.ndarray:
    return oracle(model, pixel_centres(side)).reshape(side, side, -1)


def require_compilers() -> None:
    from coopnn.errors import BackendUnavailableError
    from coopnn.export.compilers import versions

    try:
        versions()
    except BackendUnavailableError as e:
        pytest.skip(str(e))


def spirv_val(words: bytes, tmp_path: Path) -> None:
    """spirv-val for Vulkan 1.3 on the module, failing the test with its message."""
    validator = spirv_tool("spirv-val")
    if validator is None:
        pytest.skip(f"spirv-val unavailable: {SPIRV_TOOLS_HINT}")
    path = tmp_path / f"module_{len(list(tmp_path.glob('module_*.spv')))}.spv"
    path.write_bytes(words)
    result = subprocess.run([validator, "--target-env", "vulkan1.3", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr + result.stdout


def without_debug(words: bytes, tmp_path: Path) -> bytes:
    """The module less its debug instructions: Debian's validation layer (1.3.239) predates OpSource's Slang
    language (11) and reports every Slang module as invalid SPIR-V for it."""
    optimizer = spirv_tool("spirv-opt")
    if optimizer is None:
        pytest.skip(f"spirv-opt unavailable: {SPIRV_TOOLS_HINT}")
    source, target = tmp_path / "with_debug.spv", tmp_path / "without_debug.spv"
    source.write_bytes(words)
    subprocess.run([optimizer, "--strip-debug", str(source), "-o", str(target)], check=True)
    return target.read_bytes()


def compute_shader(exported, variant: str) -> bytes:
    """The harness's SPIR-V for the export (an `ExportedShader`) and `variant`."""
    from coopnn.export.compute import compute_shader as harness_shader

    return harness_shader(exported.manifest, variant)


def run_compute(context, exported, spirv: bytes, inputs: np.ndarray, variant: str) -> np.ndarray:
    """`NAME_eval` of every row of `inputs` through the harness on `context`."""
    from coopnn.export.compute import ComputeHarness

    with ComputeHarness(context, exported.manifest, variant, len(inputs), spirv) as harness:
        return harness.run(inputs)
