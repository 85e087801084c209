"""The encoding models the kernel targets are tested on: the ONNX tests' `ENCODINGS` (every otype, interpolation and
dimension count), and `COVERAGE`, the rest of what the targets take (spherical harmonics of every degree, grids of
1 to 4 dimensions with 1, 2, 4 and 8 features a level, every grid type and interpolation, 32 levels), each as an
MLP behind the encoding with tables of order one, and its inputs (grids also outside [0, 1], and at 0, 1 and just
under 1)."""

from __future__ import annotations

import itertools

import numpy as np

import coopnn
from coopnn.graph.parameters import parameters, with_parameters
from coopnn.layouts.formats.emulation import run_fp16_emulation
from coopnn.layouts.formats.fp16 import round_fp16
from tests.graph.onnx.test_encoding_onnx import ENCODINGS, IDS, inputs, model_for

_GRIDS = ("HashGrid", "DenseGrid", "TiledGrid")
_INTERPOLATIONS = ("Nearest", "Linear", "Smoothstep")
COVERAGE = [({"otype": "SphericalHarmonics", "degree": degree}, 3) for degree in range(1, 9)]
COVERAGE += [({"otype": _GRIDS[i % 3], "n_levels": 2, "n_features_per_level": features, "log2_hashmap_size": 7,
               "base_resolution": 5, "per_level_scale": 1.5, "interpolation": _INTERPOLATIONS[(i // 3) % 3]}, dims)
             for i, (dims, features) in enumerate(itertools.product((1, 2, 3, 4), (1, 2, 4, 8)))]
COVERAGE.append(({"otype": "HashGrid", "n_levels": 32, "n_features_per_level": 2, "log2_hashmap_size": 10,
                  "base_resolution": 2, "per_level_scale": 1.3}, 3))
COVERAGE_IDS = [f"{c['otype']}-{c.get('interpolation', '')}-{c.get('n_features_per_level', c.get('degree', ''))}-{n}d"
                for c, n in COVERAGE]
EVERY = ENCODINGS + COVERAGE
EVERY_IDS = IDS + COVERAGE_IDS


def kernel_model(config, n_in, backend: str):
    """The test model of `config` on `backend`, with the numpy one's parameters (tables of order one)."""
    reference = model_for(config, n_in)
    weights = "fp32" if backend in ("numpy", "portable") else "fp16"  # the tensor-core backends store float16
    model = coopnn.mlp(n_in, [16], 3, encoding=config, backend=backend, weights=weights, seed=1)
    model.set_parameters(reference.parameters())
    return model, reference


def fp16_reference(graph, x: np.ndarray) -> np.ndarray:
    """What the float16 kernels compute for an encoded MLP: every parameter (the tables too) rounded to float16, the
    encoding in float32 of the unrounded input, then the layers in the float16 arithmetic of `run_fp16_emulation`
    from the encoded input rounded to float16."""
    graph = with_parameters(graph, {k: round_fp16(v) for k, v in parameters(graph).items()})
    node, rest = graph.nodes[0], graph.nodes[1:]
    table = graph.constants[node.inputs[1]] if len(node.inputs) > 1 else np.zeros(0, np.float32)
    encoded = node.attrs["encoding"].forward(np.asarray(x, np.float32), table)
    layers = graph.with_nodes(rest).replace(inputs=(graph.values[node.outputs[0]],))
    return run_fp16_emulation(layers, {node.outputs[0]: encoded})[graph.outputs[0].name]


def assert_matches_fp16_reference(config, n_in, backend: str) -> None:
    """The test model of `config` on the float16 kernels of `backend` against `fp16_reference` at the fp16
    tolerance."""
    model, _ = kernel_model(config, n_in, backend)
    with model:
        assert model.backend == backend
        x = inputs(config, n_in)
        np.testing.assert_allclose(model.run(x), fp16_reference(model.graph, x), rtol=1e-3, atol=2.5e-3)


__all__ = ["assert_matches_fp16_reference", "fp16_reference", "COVERAGE", "COVERAGE_IDS", "ENCODINGS", "EVERY",
           "EVERY_IDS", "IDS", "inputs", "kernel_model", "model_for"]
