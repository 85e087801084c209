"""The encoding models the kernel targets are tested on: the ONNX tests' `ENCODINGS` (every otype, interpolation and
dimension count), and `COVERAGE`, the rest of what the targets take (spherical harmonics of every degree, grids of
1 to 4 dimensions with 1, 2, 4 and 8 features a level, every grid type and interpolation, 32 levels), each as an
MLP behind the encoding with tables of order one, and its inputs (grids also outside [0, 1], and at 0, 1 and just
under 1)."""

from __future__ import annotations

import itertools

import coopnn
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
    model = coopnn.mlp(n_in, [16], 3, encoding=config, backend=backend, seed=1)
    model.set_parameters(reference.parameters())
    return model, reference


__all__ = ["COVERAGE", "COVERAGE_IDS", "ENCODINGS", "EVERY", "EVERY_IDS", "IDS", "inputs", "kernel_model",
           "model_for"]
